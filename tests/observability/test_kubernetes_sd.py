"""The shipped kubernetes_sd jobs against the lab's real API server: Prometheus (built with kubernetes_sd) lists
pods and nodes with the lab's kubeconfig and keeps exactly the engine pods (labelled and annotated as the
renderer's workload.pod_metadata does it for vLLM and NIM), the gateway pods, the DCGM exporter pods and every
node, with the labels the rules and dashboards use. kwok runs the pods (no kubelet), so
nothing answers at their addresses: the targets are discovered, and scrapes of them fail; real scrapes of pods
come with the real nodes (the lab e2e)."""

import pytest

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import POD
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import nim, workload
from tests.modules.lab_helpers import client
from tests.observability.fixtures import render
from tests.observability.prometheus import Prometheus

pytestmark = [pytest.mark.observability, pytest.mark.lab]
NAMESPACE = "tf-sd"


def pod(name, namespace, labels, annotations=None, port=8000, metadata=None):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            **(metadata or {"labels": labels, "annotations": annotations or {}}),
        },
        "spec": {
            "nodeName": "spark-01",
            "containers": [{"name": "c", "image": "localhost/none:0", "ports": [{"containerPort": port}]}],
        },
    }


@pytest.fixture(scope="module")
def discovered(lab_cluster, tmp_path_factory):
    kube = client(lab_cluster.kubeconfig)
    for namespace in (NAMESPACE, "gpu-operator"):
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": "8000"}
    for obj in (
        pod("qwen2-engine", NAMESPACE, None, metadata=workload.pod_metadata("qwen2", "vllm")),
        pod("nim-engine", NAMESPACE, None, metadata=workload.pod_metadata("llama-nim", "nim", nim.METRICS_PATH)),
        pod("unannotated-engine", NAMESPACE, {"tokenfactory.io/model-deployment": "hidden"}),
        pod("annotated-stranger", NAMESPACE, {"app": "other"}, scrape),
        pod("gateway-0", NAMESPACE, {"app.kubernetes.io/name": "tokenfactory-gateway"},
            {"prometheus.io/port": "8080"}, port=8080),
        pod("nvidia-dcgm-exporter-x", "gpu-operator", {"app": "nvidia-dcgm-exporter"}, port=9400),
    ):  # fmt: skip
        kube.apply(obj)
    tmp = tmp_path_factory.mktemp("sd")
    rendered = render(
        tmp,
        {
            "observability_scrape_interval": "1s",
            "observability_kubernetes_sd_kubeconfig": str(lab_cluster.kubeconfig),
            "observability_static_engine_targets": [],
            "observability_static_dcgm_targets": [],
            "observability_static_node_targets": [],
            "observability_alert_rules_enabled": False,
        },
    )
    prom = Prometheus(tmp / "prom", rendered.config_text).start()

    def targets():
        active = prom.targets()["activeTargets"]
        pods = {t["discoveredLabels"].get("__meta_kubernetes_pod_name") for t in active}
        wanted = {"qwen2-engine", "nim-engine", "gateway-0", "nvidia-dcgm-exporter-x"}
        running = all(p["status"].get("podIP") for p in kube.list(POD, NAMESPACE))
        return (
            active
            if wanted <= pods and running and any(t["scrapePool"] == "tokenfactory-node" for t in active)
            else None
        )

    try:
        active = prom.until("the annotated pods and the node as targets", targets, timeout=90)
    except AssertionError as exc:
        seen = [(t["scrapePool"], t["labels"]) for t in prom.targets()["activeTargets"]]
        raise AssertionError(f"{exc}\nactive targets: {seen}\npods: {kube.list(POD, NAMESPACE)}") from None
    by_name = {}
    for target in active:  # pods by their name, nodes by theirs
        name = target["discoveredLabels"].get("__meta_kubernetes_pod_name") or target["labels"]["node"]
        by_name[f"{target['scrapePool']}/{name}"] = target
    yield by_name, kube
    prom.stop()


def pod_ip(kube, namespace, name):
    return kube.get(POD, name, namespace)["status"]["podIP"]


def test_engine_pods_by_label_and_annotations(discovered):
    targets, kube = discovered
    qwen2 = targets["tokenfactory-engines/qwen2-engine"]
    assert qwen2["labels"]["deployment"] == "qwen2" and qwen2["labels"]["namespace"] == NAMESPACE
    assert qwen2["labels"]["node"] == "spark-01"
    assert qwen2["discoveredLabels"]["__address__"].split(":")[0] == pod_ip(kube, NAMESPACE, "qwen2-engine")
    assert qwen2["scrapeUrl"] == f"http://{pod_ip(kube, NAMESPACE, 'qwen2-engine')}:8000/metrics"
    nim = targets["tokenfactory-engines/nim-engine"]
    assert nim["scrapeUrl"].endswith(":8000/v1/metrics") and nim["labels"]["deployment"] == "llama-nim"
    engine_pods = {key for key in targets if key.startswith("tokenfactory-engines/")}
    assert engine_pods == {"tokenfactory-engines/qwen2-engine", "tokenfactory-engines/nim-engine"}, engine_pods


def test_gateway_dcgm_and_node_jobs(discovered):
    targets, kube = discovered
    gateway = targets["tokenfactory-gateway/gateway-0"]
    assert gateway["scrapeUrl"] == f"http://{pod_ip(kube, NAMESPACE, 'gateway-0')}:8080/metrics"
    dcgm = targets["tokenfactory-dcgm/nvidia-dcgm-exporter-x"]
    assert dcgm["labels"]["node"] == "spark-01" and "pod" not in dcgm["labels"]  # the exporter's own pod label stays
    assert dcgm["scrapeUrl"] == f"http://{pod_ip(kube, 'gpu-operator', 'nvidia-dcgm-exporter-x')}:9400/metrics"
    node = targets["tokenfactory-node/spark-01"]
    assert node["labels"]["gpu_product"] == "NVIDIA-GB10"
    assert node["scrapeUrl"].endswith(":9100/metrics")
    assert [k for k in targets if k.startswith("tokenfactory-gateway/")] == ["tokenfactory-gateway/gateway-0"]


def test_discovered_pods_are_scraped_and_fail_honestly(discovered):
    """kwok pods have addresses but no process: Prometheus tries them (health down), it does not invent data."""
    targets, _kube = discovered
    assert targets["tokenfactory-engines/qwen2-engine"]["health"] in ("down", "unknown")
