"""The real single-node cluster: node Ready, system pods Running, a pod's IP and DNS, GPU scheduling, kubelet config."""

import ipaddress
import json

import pytest
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

NODE = "tf-spark-1"
# component label (static pods) or k8s-app label -> how many pods of it a single node runs.
SYSTEM_PODS = {
    "etcd": 1,
    "kube-apiserver": 1,
    "kube-controller-manager": 1,
    "kube-scheduler": 1,
    "kube-proxy": 1,
    "kube-dns": 2,
}


def test_node_ready_on_the_real_kubelet(host):
    node = get(host, f"node {NODE}")
    assert condition(node, "Ready") == "True"
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == kube_tag()
    assert info["containerRuntimeVersion"].startswith("containerd://1.6")
    eth0 = host.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]
    assert {"type": "InternalIP", "address": eth0} in node["status"]["addresses"]
    # The first node serves the GPU: no control-plane taint.
    assert not [t for t in node["spec"].get("taints", []) if t["key"] == "node-role.kubernetes.io/control-plane"]


def test_system_pods_run_from_the_locally_built_images(host):
    pods = get(host, "pods -n kube-system")["items"]
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
    listed = host.check_output("ctr -n k8s.io images ls")
    for ref, digest in digests.items():
        assert f"{ref} " in listed and digest in listed


def test_pod_gets_an_ip_from_the_node_pod_cidr_and_resolves_kubernetes_default(host):
    node_cidr = ipaddress.ip_network(get(host, f"node {NODE}")["spec"]["podCIDR"])
    pod = run_pod(host, "tf-dns-check")
    try:
        assert ipaddress.ip_address(pod["status"]["podIP"]) in node_cidr
        # glibc's resolver with the pod's search path (kubelet's resolv.conf), answered by CoreDNS.
        resolved = kubectl(host, "exec tf-dns-check -- getent hosts kubernetes.default").split()
        assert resolved[0] == "10.96.0.1" and resolved[1] == "kubernetes.default.svc.cluster.local"
        resolv = kubectl(host, "exec tf-dns-check -- cat /etc/resolv.conf")
        assert "nameserver 10.96.0.10" in resolv
        # The Service VIP reaches the API server through kube-proxy's rules.
        assert "ok" in kubectl(host, "exec tf-dns-check -- curl -sSk --max-time 5 https://kubernetes.default/livez")
    finally:
        delete_pods(host, "tf-dns-check")


def test_service_reaches_a_pod_by_name(host):
    """A ClusterIP Service in front of a pod (busybox httpd): CoreDNS name, kube-proxy DNAT, bridge hairpin."""
    try:
        server = run_pod(host, "tf-web", command=["sh", "-c", WEB_SERVER])
        kubectl(host, "apply -f -", stdin=SERVICE)
        run_pod(host, "tf-web-client")
        body = wait_until(
            lambda: kubectl(
                host, "exec tf-web-client -- curl -sS --max-time 3 http://tf-web.default.svc.cluster.local/"
            ),
            timeout=180,
            what="the Service answering",
            interval=2,
        )
        assert body.strip() == server["metadata"]["name"]
    finally:
        kubectl(host, "delete service --ignore-not-found tf-web")
        delete_pods(host, "tf-web", "tf-web-client")


def test_one_gpu_pod_runs_and_a_second_stays_pending(host):
    """SIMULATED GPU (status capacity nvidia.com/gpu=1); the scheduler and kubelet admission are real."""
    assert get(host, f"node {NODE}")["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    try:
        first = run_pod(host, "tf-gpu-1", gpus=1)
        assert first["spec"]["nodeName"] == NODE
        kubectl(host, "apply -f -", stdin=pod_manifest("tf-gpu-2", gpus=1))
        pending = wait_for_condition(host, "pod tf-gpu-2", "PodScheduled", status="False")
        message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
        assert "Insufficient nvidia.com/gpu" in message
        assert pending["status"]["phase"] == "Pending"
    finally:
        delete_pods(host, "tf-gpu-1", "tf-gpu-2")


def test_gpu_feature_discovery_labels_simulated_from_the_recording(host):
    labels = get(host, f"node {NODE}")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-GB10"
    assert (labels["nvidia.com/gpu.family"], labels["nvidia.com/gpu.count"]) == ("blackwell", "1")
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("12", "1")


def test_kubelet_reports_the_spark_profile_through_configz(host):
    """The real kubelet accepted the rendered KubeletConfiguration (its /configz, through the API server)."""
    configz = json.loads(kubectl(host, f"get --raw /api/v1/nodes/{NODE}/proxy/configz"))["kubeletconfig"]
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
    on_disk = yaml.safe_load(host.file("/var/lib/kubelet/config.yaml").content_string)
    assert on_disk["reservedSystemCPUs"] == configz["reservedSystemCPUs"]
    # The reservations shrink what pods may use: allocatable = capacity - system - kube - eviction floor.
    status = get(host, f"node {NODE}")["status"]
    ki = {k: int(status[k]["memory"].removesuffix("Ki")) for k in ("capacity", "allocatable")}
    assert ki["capacity"] - ki["allocatable"] == (8 + 2 + 1) * 1024 * 1024
    assert status["allocatable"]["cpu"] == "1"
