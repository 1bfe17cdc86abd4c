"""After playbooks/upgrade.yml took the real node from v1.36.2 to v1.36.3: versions, static pods, workloads, re-run."""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
import yaml

from tests.host_roles.cluster_checks import condition, get, kubectl

pytestmark = pytest.mark.molecule

NODE = "tf-upg-1"
FROM, TO = "v1.36.2", "v1.36.3"
CONTROL_PLANE = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
EPHEMERAL = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent"))


def test_node_reports_the_new_kubelet_and_is_schedulable(host):
    node = get(host, f"node {NODE}")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == TO
    assert condition(node, "Ready") == "True"
    assert not node["spec"].get("unschedulable"), "left cordoned"
    # The SIMULATED GPU capacity survived the kubelet restart (the health gate checked it too).
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"


def test_node_binaries_are_the_new_version(host):
    assert host.check_output("kubelet --version").split()[-1] == TO
    assert host.check_output("kubeadm version -o short") == TO
    assert json.loads(host.check_output("kubectl version --client -o json"))["clientVersion"]["gitVersion"] == TO


@pytest.mark.parametrize("component", CONTROL_PLANE)
def test_control_plane_static_pod_runs_the_new_image(host, component):
    manifest = yaml.safe_load(host.file(f"/etc/kubernetes/manifests/{component}.yaml").content_string)
    assert manifest["spec"]["containers"][0]["image"] == f"registry.k8s.io/{component}:{TO}"
    pod = get(host, f"pod -n kube-system {component}-{NODE}")
    assert pod["spec"]["containers"][0]["image"] == f"registry.k8s.io/{component}:{TO}"
    assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "True"
    # The running container is the new one (kubeadm replaced the manifest; kubelet restarted the pod).
    assert pod["status"]["containerStatuses"][0]["image"] == f"registry.k8s.io/{component}:{TO}"


def test_cluster_addons_follow(host):
    cluster = json.loads(kubectl(host, "version -o json"))["serverVersion"]["gitVersion"]
    assert cluster == TO
    proxy = get(host, "daemonset -n kube-system kube-proxy")
    assert proxy["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.k8s.io/kube-proxy:{TO}"
    assert proxy["status"]["numberReady"] == proxy["status"]["desiredNumberScheduled"] == 1
    dns = get(host, "deployment -n kube-system coredns")
    assert dns["status"].get("readyReplicas") == 2
    config = yaml.safe_load(get(host, "configmap -n kube-system kubeadm-config")["data"]["ClusterConfiguration"])
    assert config["kubernetesVersion"] == TO


def pods(host, label):
    return [p for p in get(host, f"pods -l tf-test={label}")["items"] if not p["metadata"].get("deletionTimestamp")]


def test_deployment_pod_was_rescheduled_and_daemonset_pod_kept_running(host):
    before = json.loads((EPHEMERAL / "pods-before.json").read_text())
    [moved] = pods(host, "tf-upgrade-deployment")
    assert moved["metadata"]["uid"] != before["tf-upgrade-deployment"], "the drain did not evict the Deployment's pod"
    [kept] = pods(host, "tf-upgrade-daemonset")
    assert kept["metadata"]["uid"] == before["tf-upgrade-daemonset"], "the DaemonSet's pod was replaced"
    assert kept["status"]["containerStatuses"][0]["restartCount"] == 0
    for pod in (moved, kept):
        assert pod["spec"]["nodeName"] == NODE
        assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "True"


def test_second_run_changes_nothing():
    """upgrade.yml again with the same target: every node is already there, nothing is drained or changed."""
    playbook = pathlib.Path(__file__).parents[1] / "upgrade.yml"
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    started = time.monotonic()
    proc = subprocess.run(  # noqa: S603 - the venv's ansible-playbook on this scenario's playbook
        [str(pathlib.Path(sys.executable).with_name("ansible-playbook")), "-i", inventory, str(playbook)],
        capture_output=True,
        text=True,
        env=os.environ | {"ANSIBLE_FORCE_COLOR": "0", "NO_COLOR": "1"},
        check=False,
    )
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    recap = proc.stdout.split("PLAY RECAP")[-1]
    changed = {host: int(n) for host, n in re.findall(r"^(\S+)\s+:.*?changed=(\d+)", recap, re.M)}
    assert changed and set(changed.values()) == {0}, recap
    assert f"{NODE} already runs {TO}: left alone." in proc.stdout
    print(f"second run: {took:.0f} s")
