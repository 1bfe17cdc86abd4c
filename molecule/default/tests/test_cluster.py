"""The real cluster (the pair, upgraded): both nodes Ready on the real kubelets, system pods Running from the locally
built images, a pod's IP and DNS, a Service, GPU scheduling against the SIMULATED capacity, the kubelet config.
kubectl runs on the control plane (conftest.py's `first`); test_cluster_pair.py checks what crosses the link."""

import ipaddress
import json

import pytest
import testinfra
import yaml

from tests.host_roles.cluster_checks import (
    condition,
    delete_pods,
    get,
    kubectl,
    node_images,
    pod_manifest,
    run_pod,
    wait_for_condition,
    wait_until,
)
from lab.versions import kube_tag

pytestmark = pytest.mark.molecule

WEB_SERVER = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"
SERVICE = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "tf-web", "namespace": "default"},
        "spec": {"selector": {"tf-test": "tf-web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
)

FIRST, SECOND = "tf-spark-01", "tf-spark-02"
NODES = (FIRST, SECOND)
# component label (static pods) or k8s-app label -> how many pods of it the pair runs (one control plane).
SYSTEM_PODS = {
    "etcd": 1,
    "kube-apiserver": 1,
    "kube-controller-manager": 1,
    "kube-scheduler": 1,
    "kube-proxy": 2,
    "kube-dns": 2,
}
# The image sets each node loads (inventories/lab tf_lab_node_image_sets): the control-plane set on the first only.
IMAGE_SETS = {FIRST: {"control-plane", "node", "test"}, SECOND: {"node", "test"}}


@pytest.mark.parametrize("name", NODES)
def test_node_ready_on_the_real_kubelet(first, name):
    node = get(first, f"node {name}")
    assert condition(node, "Ready") == "True"
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == kube_tag()
    assert info["containerRuntimeVersion"].startswith("containerd://1.6")
    # Every Spark serves its GPU, the first one too: no control-plane taint on either.
    assert not [t for t in node["spec"].get("taints", []) if t["key"] == "node-role.kubernetes.io/control-plane"]


def test_system_pods_run_from_the_locally_built_images(first):
    pods = get(first, "pods -n kube-system")["items"]
    by_app = {}
    for pod in pods:
        labels = pod["metadata"].get("labels", {})
        by_app.setdefault(labels.get("component") or labels.get("k8s-app"), []).append(pod)
    for app, count in SYSTEM_PODS.items():
        assert len(by_app.get(app, [])) == count, f"{app}: {[p['metadata']['name'] for p in pods]}"
        for pod in by_app[app]:
            assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "True", pod["metadata"]["name"]
    # The images kubelet runs are the archives' digests: nothing was pulled from a registry.
    digests = {i["ref"]: i["digest"] for i in node_images()}
    for pod in pods:
        for status in pod["status"]["containerStatuses"]:
            assert status["image"] in digests, status["image"]


@pytest.mark.parametrize("name", NODES)
def test_each_node_holds_the_image_sets_it_was_given(name):
    listed = testinfra.get_host(f"podman://{name}").check_output("ctr -n k8s.io images ls")
    for image in node_images():
        if image["set"] in IMAGE_SETS[name]:
            assert f"{image['ref']} " in listed and image["digest"] in listed, (name, image["ref"])


def test_pod_gets_an_ip_from_its_node_pod_cidr_and_resolves_kubernetes_default(first):
    pod = run_pod(first, "tf-dns-check")
    try:
        node_cidr = ipaddress.ip_network(get(first, f"node {pod['spec']['nodeName']}")["spec"]["podCIDR"])
        assert ipaddress.ip_address(pod["status"]["podIP"]) in node_cidr
        # glibc's resolver with the pod's search path (kubelet's resolv.conf), answered by CoreDNS.
        resolved = kubectl(first, "exec tf-dns-check -- getent hosts kubernetes.default").split()
        assert resolved[0] == "10.96.0.1" and resolved[1] == "kubernetes.default.svc.cluster.local"
        resolv = kubectl(first, "exec tf-dns-check -- cat /etc/resolv.conf")
        assert "nameserver 10.96.0.10" in resolv
        # The Service VIP reaches the API server through kube-proxy's rules.
        assert "ok" in kubectl(first, "exec tf-dns-check -- curl -sSk --max-time 5 https://kubernetes.default/livez")
    finally:
        delete_pods(first, "tf-dns-check")


def test_service_reaches_a_pod_by_name(first):
    """A ClusterIP Service in front of a pod (busybox httpd): CoreDNS name, kube-proxy DNAT, bridge hairpin."""
    try:
        server = run_pod(first, "tf-web", node=FIRST, command=["sh", "-c", WEB_SERVER])
        kubectl(first, "apply -f -", stdin=SERVICE)
        run_pod(first, "tf-web-client", node=FIRST)
        body = wait_until(
            lambda: kubectl(
                first, "exec tf-web-client -- curl -sS --max-time 3 http://tf-web.default.svc.cluster.local/"
            ),
            timeout=180,
            what="the Service answering",
            interval=2,
        )
        assert body.strip() == server["metadata"]["name"]
    finally:
        kubectl(first, "delete service --ignore-not-found tf-web")
        delete_pods(first, "tf-web", "tf-web-client")


def test_one_gpu_pod_per_node_runs_and_a_third_stays_pending(first):
    """SIMULATED GPU (status capacity nvidia.com/gpu=1 on each node); the scheduler and kubelet admission are real."""
    for name in NODES:
        assert get(first, f"node {name}")["status"]["allocatable"]["nvidia.com/gpu"] == "1", name
    try:
        running = [run_pod(first, f"tf-gpu-{n}", gpus=1) for n in (1, 2)]
        assert sorted(pod["spec"]["nodeName"] for pod in running) == sorted(NODES)
        kubectl(first, "apply -f -", stdin=pod_manifest("tf-gpu-3", gpus=1))
        pending = wait_for_condition(first, "pod tf-gpu-3", "PodScheduled", status="False")
        message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
        assert "Insufficient nvidia.com/gpu" in message
        assert pending["status"]["phase"] == "Pending"
    finally:
        delete_pods(first, "tf-gpu-1", "tf-gpu-2", "tf-gpu-3")


@pytest.mark.parametrize("name", NODES)
def test_gpu_feature_discovery_labels_simulated_from_the_recording(first, name):
    labels = get(first, f"node {name}")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-GB10"
    assert (labels["nvidia.com/gpu.family"], labels["nvidia.com/gpu.count"]) == ("blackwell", "1")
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("12", "1")


@pytest.mark.parametrize("name", NODES)
def test_kubelet_reports_the_spark_profile_through_configz(first, name):
    """The real kubelet accepted the rendered KubeletConfiguration (its /configz, through the API server)."""
    configz = json.loads(kubectl(first, f"get --raw /api/v1/nodes/{name}/proxy/configz"))["kubeletconfig"]
    assert configz["cpuManagerPolicy"] == "static"
    assert configz["reservedSystemCPUs"] == "0"  # one CPU on this 2-CPU VM (lab override of the count)
    assert (configz["topologyManagerPolicy"], configz["topologyManagerScope"]) == ("single-numa-node", "pod")
    # reservedSystemCPUs also stands for the CPU part of systemReserved (kubelet fills it in).
    assert configz["systemReserved"] == {"cpu": "1", "memory": "8Gi", "ephemeral-storage": "20Gi"}
    assert configz["kubeReserved"] == {"memory": "2Gi", "ephemeral-storage": "10Gi"}
    # Lab overrides (a VM whose memory and disk other sessions share); the Spark profile says 4Gi / 10% / 15%.
    assert configz["evictionHard"]["memory.available"] == "1Gi"
    assert (configz["evictionHard"]["nodefs.available"], configz["evictionHard"]["imagefs.available"]) == ("2Gi", "2Gi")
    assert configz["evictionHard"]["nodefs.inodesFree"] == "5%"
    assert (configz["imageGCHighThresholdPercent"], configz["imageGCLowThresholdPercent"]) == (100, 99)
    assert (configz["serializeImagePulls"], configz["maxParallelImagePulls"]) == (False, 2)
    assert (configz["failCgroupV1"], configz["cgroupDriver"]) == (False, "cgroupfs")
    # Same as the file kubeadm wrote from the role's config.
    on_disk = yaml.safe_load(testinfra.get_host(f"podman://{name}").file("/var/lib/kubelet/config.yaml").content_string)
    assert on_disk["reservedSystemCPUs"] == configz["reservedSystemCPUs"]
    # The reservations shrink what pods may use: allocatable = capacity - system - kube - eviction floor.
    status = get(first, f"node {name}")["status"]
    ki = {k: int(status[k]["memory"].removesuffix("Ki")) for k in ("capacity", "allocatable")}
    assert ki["capacity"] - ki["allocatable"] == (8 + 2 + 1) * 1024 * 1024
    assert status["allocatable"]["cpu"] == "1"
