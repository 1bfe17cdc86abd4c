"""Kubeconfig files with embedded credentials, so they can be copied anywhere (an EE, another host)."""

import base64
import pathlib

import yaml


def _b64(path: pathlib.Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(path: pathlib.Path, *, name: str, server: str, ca: pathlib.Path, cert: pathlib.Path, key: pathlib.Path):
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": name, "user": {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
