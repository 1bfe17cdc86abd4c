# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Command lines for kubeadm init and join."""

from __future__ import annotations

import re

import yaml
from ansible.errors import AnsibleFilterError

JOIN = re.compile(
    r"kubeadm join (?P<endpoint>\S+:\d+) --token (?P<token>[a-z0-9]{6}\.[a-z0-9]{16})"
    r"\s+--discovery-token-ca-cert-hash (?P<hash>sha256:[a-f0-9]{64})"
)


def _join_match(output):
    match = JOIN.search(" ".join(str(output).replace("\\\n", " ").split()))
    if not match:
        raise AnsibleFilterError(
            "kubeadm token create --print-join-command printed no 'kubeadm join ENDPOINT --token T "
            "--discovery-token-ca-cert-hash sha256:H' line (output withheld: it carries a token)"
        )
    return match


def kubeadm_join_discovery(output):
    """print-join-command output -> a JoinConfiguration discovery.bootstrapToken mapping."""
    match = _join_match(output)
    return {"apiServerEndpoint": match["endpoint"], "token": match["token"], "caCertHashes": [match["hash"]]}


def kubeadm_join_argv(output, node_name=None, control_plane=False, certificate_key=None, advertise_address=None):
    match = _join_match(output)
    argv = [
        "kubeadm",
        "join",
        match["endpoint"],
        "--token",
        match["token"],
        "--discovery-token-ca-cert-hash",
        match["hash"],
    ]
    if control_plane:
        if not certificate_key or not re.fullmatch(r"[a-f0-9]{64}", certificate_key):
            raise AnsibleFilterError("control-plane join needs certificate_key: 64 hex characters from upload-certs")
        argv += ["--control-plane", "--certificate-key", certificate_key]
        if advertise_address:
            argv += ["--apiserver-advertise-address", advertise_address]
    if node_name:
        argv += ["--node-name", node_name]
    return argv


def kubeadm_init_argv(config_path, upload_certs=False, skip_phases=None):
    argv = ["kubeadm", "init", "--config", str(config_path)]
    if upload_certs:
        argv.append("--upload-certs")
    if skip_phases:
        argv.append("--skip-phases=" + ",".join(skip_phases))
    return argv


def kubeadm_pod_subnet(configmaps):
    """podSubnet from the kubeadm-config ConfigMap (a k8s_info resources list or one ConfigMap)."""
    items = configmaps if isinstance(configmaps, list) else [configmaps]
    if not items or not items[0]:
        raise AnsibleFilterError("kube-system/kubeadm-config not found: is this a kubeadm cluster?")
    text = (items[0].get("data") or {}).get("ClusterConfiguration", "")
    subnet = ((yaml.safe_load(text) or {}).get("networking") or {}).get("podSubnet")
    if not subnet:
        raise AnsibleFilterError("kubeadm ClusterConfiguration has no networking.podSubnet")
    return subnet


def kubeconfig_with_server(kubeconfig, server):
    """A copy of a parsed kubeconfig with every cluster's server set to `server`."""
    if not isinstance(kubeconfig, dict) or not kubeconfig.get("clusters"):
        raise AnsibleFilterError("kubeconfig_with_server: input is not a kubeconfig with clusters")
    if not str(server).startswith("https://"):
        raise AnsibleFilterError(f"kubeconfig_with_server: server must be an https:// URL, got {server!r}")
    clusters = [{**c, "cluster": {**c.get("cluster", {}), "server": server}} for c in kubeconfig["clusters"]]
    return {**kubeconfig, "clusters": clusters}


class FilterModule:
    def filters(self):
        return {
            "kubeadm_join_argv": kubeadm_join_argv,
            "kubeadm_join_discovery": kubeadm_join_discovery,
            "kubeadm_init_argv": kubeadm_init_argv,
            "kubeadm_pod_subnet": kubeadm_pod_subnet,
            "kubeconfig_with_server": kubeconfig_with_server,
        }
