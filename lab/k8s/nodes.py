"""Simulated nodes as data: profiles/*.yaml name nodes of the machine classes in node_classes.yaml."""

import functools
import pathlib
import uuid

import yaml

from lab.k8s.bins import KUBE_VERSION

HERE = pathlib.Path(__file__).parent
LAB_NODE_VARS = HERE.parents[1] / "inventories/lab/group_vars/tf_lab_nodes/lab_node.yml"
PROFILE_DIR = HERE / "profiles"
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}


def profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(profile: str) -> list[dict]:
    """Node manifests (metadata, spec, status) for a profile; raises ValueError naming the allowed profiles."""
    path = PROFILE_DIR / f"{profile}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown lab profile {profile!r}; allowed: {', '.join(profiles())}")
    classes = yaml.safe_load((HERE / "node_classes.yaml").read_text())
    manifests = []
    for node in yaml.safe_load(path.read_text())["nodes"]:
        if node["class"] not in classes:
            raise ValueError(
                f"{path.name}: node {node['name']}: unknown class {node['class']!r}; allowed: {sorted(classes)}"
            )
        manifests.append(_manifest(node, _with_simulated_gpu(classes[node["class"]])))
    return manifests


@functools.cache
def _lab_node_vars() -> dict:
    return yaml.safe_load(LAB_NODE_VARS.read_text())


def _with_simulated_gpu(machine: dict) -> dict:
    """A class naming a lab inventory variable gets that simulated GPU's labels and count."""
    if "simulated_gpu" not in machine:
        return machine
    gpu = _lab_node_vars()[machine["simulated_gpu"]]
    return {
        **machine,
        "labels": {**machine["labels"], **gpu["labels"]},
        "capacity": {**machine["capacity"], "nvidia.com/gpu": str(gpu["count"])},
    }


def _manifest(node: dict, machine: dict) -> dict:
    labels = {**machine["labels"], "kubernetes.io/hostname": node["name"], "type": "kwok"}
    labels.update(node.get("labels", {}))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node["name"], "labels": labels, "annotations": dict(KWOK_ANNOTATION)},
        "spec": {},
        "status": {
            "capacity": dict(machine["capacity"]),
            "allocatable": dict(machine["capacity"]),
            "addresses": [
                {"type": "InternalIP", "address": node["address"]},
                {"type": "Hostname", "address": node["name"]},
            ],
            "nodeInfo": {**machine["node_info"], **_identity(node["name"])},
        },
    }


def _identity(name: str) -> dict:
    """Stable per-name ids and versions, so clients that require every nodeInfo field can read the node."""
    node_id = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.lab.tokenfactory.io")
    return {
        "machineID": node_id.hex,
        "systemUUID": str(node_id),
        "bootID": str(node_id),
        "kubeletVersion": KUBE_VERSION,
        "kubeProxyVersion": KUBE_VERSION,
    }
