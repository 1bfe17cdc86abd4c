"""Checks after playbooks/upgrade.yml took a real cluster from v1.36.2 to v1.36.3 (molecule upgrade and pair).

`host` is a testinfra host of a node; kubectl runs on the first control-plane node (cluster_checks).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import yaml

from tests.host_roles.cluster_checks import condition, get, kubectl
from tests.host_roles.playbook import changed_count
from lab.versions import kube_tag

TO = kube_tag()
CONTROL_PLANE = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
DEPLOYMENT, DAEMONSET = "tf-upgrade-deployment", "tf-upgrade-daemonset"
EPHEMERAL = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))
# molecule/shared/upgrade.yml: what the side effect ran, and the second run runs again.
UPGRADE_PLAYBOOK = pathlib.Path(__file__).resolve().parents[2] / "molecule/shared/upgrade.yml"


def assert_node_upgraded(control, name):
    """The Node reports the new kubelet, is Ready and schedulable, and offers its (SIMULATED) GPU again."""
    node = get(control, f"node {name}")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == TO, name
    assert condition(node, "Ready") == "True", name
    assert not node["spec"].get("unschedulable"), f"{name} left cordoned"
    # The SIMULATED GPU capacity survived the kubelet restart (the health gate checked it too).
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1", name


def assert_binaries_upgraded(host):
    assert host.check_output("kubelet --version").split()[-1] == TO
    assert host.check_output("kubeadm version -o short") == TO
    assert json.loads(host.check_output("kubectl version --client -o json"))["clientVersion"]["gitVersion"] == TO


def assert_static_pod_upgraded(control, node, component):
    """The manifest kubeadm rewrote, and the running container kubelet restarted from it, are the new image."""
    image = f"registry.k8s.io/{component}:{TO}"
    manifest = yaml.safe_load(control.file(f"/etc/kubernetes/manifests/{component}.yaml").content_string)
    assert manifest["spec"]["containers"][0]["image"] == image
    pod = get(control, f"pod -n kube-system {component}-{node}")
    assert pod["spec"]["containers"][0]["image"] == image
    assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "True"
    assert pod["status"]["containerStatuses"][0]["image"] == image


def assert_addons_upgraded(control, nodes):
    """API server, kube-proxy (ready on every node), CoreDNS and kubeadm's ClusterConfiguration follow."""
    assert json.loads(kubectl(control, "version -o json"))["serverVersion"]["gitVersion"] == TO
    proxy = get(control, "daemonset -n kube-system kube-proxy")
    assert proxy["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.k8s.io/kube-proxy:{TO}"
    assert proxy["status"]["numberReady"] == proxy["status"]["desiredNumberScheduled"] == nodes
    assert get(control, "deployment -n kube-system coredns")["status"].get("readyReplicas") == 2
    config = yaml.safe_load(get(control, "configmap -n kube-system kubeadm-config")["data"]["ClusterConfiguration"])
    assert config["kubernetesVersion"] == TO


def live_pods(control, label):
    return [p for p in get(control, f"pods -l tf-test={label}")["items"] if not p["metadata"].get("deletionTimestamp")]


def assert_workloads_moved_and_kept(control, deployment_node):
    """The drains evicted the Deployment's pod (a new one runs on deployment_node); the DaemonSet's pods kept running.

    Compares with the pods upgrade_side_effect.yml recorded before the upgrade.
    """
    before = json.loads((EPHEMERAL / "pods-before.json").read_text())
    uids = {
        label: {p["metadata"]["uid"] for p in before if p["metadata"]["labels"]["tf-test"] == label}
        for label in (DEPLOYMENT, DAEMONSET)
    }
    [moved] = live_pods(control, DEPLOYMENT)
    assert moved["metadata"]["uid"] not in uids[DEPLOYMENT], "the drain did not evict the Deployment's pod"
    assert moved["spec"]["nodeName"] == deployment_node
    kept = live_pods(control, DAEMONSET)
    assert {p["metadata"]["uid"] for p in kept} == uids[DAEMONSET], "a DaemonSet pod was replaced"
    for pod in [moved, *kept]:
        assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "True", pod["metadata"]["name"]
    for pod in kept:
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["metadata"]["name"]


def assert_second_run_changes_nothing(nodes):
    """upgrade.yml again with the same target: every node is already there, nothing is drained or changed.

    Returns the run's wall time in seconds.
    """
    started = time.monotonic()
    proc = subprocess.run(
        [
            str(pathlib.Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            os.environ["MOLECULE_INVENTORY_FILE"],
            str(UPGRADE_PLAYBOOK),
        ],
        capture_output=True,
        text=True,
        env=os.environ | {"ANSIBLE_FORCE_COLOR": "0", "NO_COLOR": "1"},
        check=False,
    )
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert changed_count(proc) == 0, proc.stdout.split("PLAY RECAP")[-1]
    for node in nodes:
        assert f"{node} already runs {TO}: left alone." in proc.stdout
    return took
