"""Checks on a real kubeadm cluster from inside its first node (testinfra host): kubectl with the admin kubeconfig."""

from __future__ import annotations

import json
import os
import pathlib

from lab.wait import wait_until
from lab.versions import kube_tag

KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
NETTEST_IMAGE = "localhost/tf-nettest:bookworm"
KUBE_VERSION = kube_tag()


def node_images():
    """images.json of scripts/build-node-images: [{ref, archive, set, digest}]."""
    cache = os.environ.get("TF_CACHE") or str(
        pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache", "tokenfactory")
    )
    return json.loads(pathlib.Path(cache, f"k8s-{KUBE_VERSION}", "images", "images.json").read_text())


def kubectl(host, args, stdin=None):
    """Run kubectl on the node; returns stdout (raises with stderr on failure)."""
    cmd = f"{KUBECTL} {args}"
    if stdin is not None:
        cmd = f"cat <<'EOF' | {cmd}\n{stdin}\nEOF"
    result = host.run(cmd)
    if result.rc != 0:
        raise AssertionError(f"{cmd!r} failed ({result.rc}): {result.stderr or result.stdout}")
    return result.stdout


def get(host, args):
    return json.loads(kubectl(host, f"get {args} -o json"))


def condition(obj, kind):
    return next((c["status"] for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)


def pod_manifest(name, node=None, command=("sleep", "3600"), gpus=0, image=NETTEST_IMAGE):
    """A test pod on the locally built image (never pulled), optionally pinned to a node and asking for GPUs."""
    spec = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", "command": list(command)}],
    }
    if node:
        spec["nodeName"] = node
    if gpus:
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    metadata = {"name": name, "namespace": "default", "labels": {"tf-test": name}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


def wait_for_condition(host, what, kind, status="True", timeout=180):
    """Wait until `kubectl get <what>` has condition `kind` with `status`; returns the object."""

    def check():
        obj = get(host, what)
        return obj if condition(obj, kind) == status else None

    return wait_until(check, timeout=timeout, what=f"{what} {kind}={status}", interval=2)


def run_pod(host, name, **kwargs):
    """Create a test pod and wait until it is Ready; returns the Pod object."""
    kubectl(host, "apply -f -", stdin=pod_manifest(name, **kwargs))
    return wait_for_condition(host, f"pod {name}", "Ready")


def delete_pods(host, *names):
    kubectl(host, f"delete pod --ignore-not-found --wait=true --timeout=60s {' '.join(names)}")
