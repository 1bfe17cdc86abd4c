"""Start the gateway as real processes (one per replica) and talk to its admin API."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import yaml

from lab.paths import GATEWAY_DIR
from lab.processes import free_port
from lab.wait import ProcessDied, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The collection (scripts/bootstrap links it here): the Kubernetes routing source uses its client, as in the image.
COLLECTIONS = ROOT / ".collections"
# TF_GATEWAY_UNDER_TEST: another build of services/gateway (e.g. an export of an older commit) for A/B runs.
SERVICE_DIR = pathlib.Path(os.environ.get("TF_GATEWAY_UNDER_TEST") or GATEWAY_DIR)


@functools.cache
def known_settings(source: pathlib.Path) -> frozenset[str] | None:
    """The settings another build of the gateway accepts (None: this checkout's, which must accept them all)."""
    if source.resolve() == GATEWAY_DIR.resolve():
        return None
    code = "import dataclasses as d, tokenfactory_gateway.config as c; print(*(f.name for f in d.fields(c.Config)))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(source)},
                         check=True, capture_output=True, text=True)  # fmt: skip
    return frozenset(out.stdout.split())


def deployment_objects(
    name, model, upstream, tenants=("*",), rate_limits=None, pricing=None, namespace="tf", engine=None
):
    """A Model + ModelDeployment pair as the Token Factory CRDs (group tokenfactory.io) shape them; `engine`
    sets spec.engine (unset: the CRD's default, vllm)."""
    objects = [
        {"apiVersion": "tokenfactory.io/v1alpha1", "kind": "Model",
         "metadata": {"name": name, "namespace": namespace}, "spec": {"servedName": model}},
        {"apiVersion": "tokenfactory.io/v1alpha1", "kind": "ModelDeployment",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"model": name, "endpoint": "main", "tenants": list(tenants), "rateLimits": rate_limits or {},
                  "pricing": pricing or {"currency": "USD", "inputPer1M": "0.15", "outputPer1M": "0.60"}},
         "status": {"phase": "Ready", "servedModelName": model, "upstreamURL": upstream}},
    ]  # fmt: skip
    if engine:
        objects[1]["spec"]["engine"] = engine
    return objects


class Gateway:
    """A set of gateway replicas sharing one config, database and Redis prefix. `source`: the services/gateway
    directory to run (default this checkout's, or TF_GATEWAY_UNDER_TEST); another build runs without the settings
    it does not have (one from before the internal listener serves everything on its public one)."""

    def __init__(self, postgres, redis, objects, source=None, **settings):
        self.source = pathlib.Path(source) if source else SERVICE_DIR
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="tf-gw-"))
        self.routing_file = self.dir / "routing.yaml"
        self.set_routing(objects)
        self.admin_token = "adm-" + secrets.token_urlsafe(24)
        self.pepper = secrets.token_urlsafe(32)
        self.database = postgres.create_database()
        self.postgres = postgres
        self.settings = {
            "host": "127.0.0.1",
            "redis_url": redis.url,
            "redis_key_prefix": f"tf:{self.database}:",
            "routing_source": "static",
            "routing_file": str(self.routing_file),
            "routing_refresh_seconds": 0.2,
            "spool_dir": str(self.dir / "spool"),
            **settings,
        }
        self.replicas: list[Replica] = []

    def set_routing(self, objects) -> None:
        tmp = self.routing_file.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump_all(objects))
        tmp.replace(self.routing_file)

    def env(self) -> dict:
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(self.source), str(COLLECTIONS)]),
            "TF_GATEWAY_ADMIN_TOKEN": self.admin_token,
            "TF_GATEWAY_KEY_PEPPER": self.pepper,
            "TF_GATEWAY_DATABASE_URL": self.postgres.dsn(self.database),
        }

    def add_replica(self, wrapper=(), timeout=60, **overrides) -> Replica:
        """Start one more replica; its public listener (`listen`, first address = its own) and internal
        listener get free ports unless `overrides` says otherwise. `wrapper`: argv prefix (e.g. valgrind)."""
        index = len(self.replicas)
        config = self.dir / f"replica{index}.yaml"
        listeners = {"listen": f"127.0.0.1:{free_port()}", "internal_listen": f"127.0.0.1:{free_port()}"}
        settings = {k: v for k, v in {**self.settings, **listeners, **overrides}.items() if v is not None}
        known = known_settings(self.source)
        if known is not None:  # an older build (A/B runs): without the settings it does not have
            settings = {k: v for k, v in settings.items() if k in known}
        config.write_text(yaml.safe_dump(settings))
        replica = Replica(self, config, self.dir / f"replica{index}.log", list(wrapper)).start(timeout)
        self.replicas.append(replica)
        return replica

    @property
    def url(self) -> str:
        """Public base URL of the first replica (OpenAI routes)."""
        return self.replicas[0].url

    @property
    def admin_url(self) -> str:
        """Internal base URL of the first replica (admin API, metrics, probes)."""
        return self.replicas[0].internal_url

    def admin(self, method, path, body=None, token=None, replica=0):
        return self.replicas[replica].request(method, "/admin/v1" + path, body, token or self.admin_token)

    def create_key(self, tenant, name="k1", models=None, limits=None, key_limits=None) -> str:
        body = {"models": list(models or [])}
        if limits:
            body["limits"] = limits
        status = self.admin("PUT", f"/tenants/{tenant}", body)[0]
        assert status == 200, status
        status, answer = self.admin("PUT", f"/tenants/{tenant}/keys/{name}", {"limits": key_limits or {}})
        assert status == 201, answer
        return answer["key"]

    def sql(self, query: str) -> str:
        """Run SQL against this gateway's database (psql -At output)."""
        return self.postgres.psql(self.database, query)

    def logs(self) -> str:
        return "".join(r.log_path.read_text(errors="replace") for r in self.replicas if r.log_path.exists())

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


INTERNAL_PATHS = ("/admin/", "/metrics", "/health", "/ready")


class Replica:
    def __init__(self, gateway: Gateway, config: pathlib.Path, log_path: pathlib.Path, wrapper=()):
        self.gateway, self.config, self.log_path, self.wrapper = gateway, config, log_path, list(wrapper)
        settings = yaml.safe_load(config.read_text())
        self.port = int(settings["listen"].split(",")[0].rsplit(":", 1)[1])
        internal = settings.get("internal_listen")  # absent: a build with one listener for everything
        self.internal_port = int(internal.rsplit(":", 1)[1]) if internal else self.port
        scheme = "https" if settings.get("tls_cert_file") else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.internal_url = f"http://127.0.0.1:{self.internal_port}"
        self.proc = None

    def start(self, timeout: float = 60) -> Replica:
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [*self.wrapper, sys.executable, "-m", "tokenfactory_gateway", "--config", str(self.config)],
            env=self.gateway.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(self._ready, timeout, f"gateway on port {self.port} (log {self.log_path})")
        except BaseException:
            # Not ready in time (or the wait interrupted): no gateway is left running behind the failed test.
            self.stop(signal.SIGKILL, timeout=30)
            raise
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise ProcessDied(f"gateway exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
        return self.request("GET", "/ready")[0] == 200

    def request(self, method, path, body=None, token=None, timeout=30):
        """(status, decoded JSON); admin API, metrics and probes go to the internal listener."""
        data = None if body is None else json.dumps(body).encode()
        base = self.internal_url if path.startswith(INTERNAL_PATHS) else self.url
        req = urllib.request.Request(base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, None

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)
        return self.proc.returncode if self.proc else None
