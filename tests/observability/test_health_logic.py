"""Health gate decisions (module_utils/tokenfactory/health.py) on crafted nodes, metrics and alerts."""

import pytest

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.health import (
    PrometheusError,
    PrometheusReader,
    evaluate,
    node_states,
)


def node(name, gpus=1, allocatable=None, ready=True, product="NVIDIA-GB10"):
    labels = {"nvidia.com/gpu.product": product} if gpus else {}
    capacity = {"nvidia.com/gpu": str(gpus), "memory": "128Gi", "cpu": "20"}
    allocatable = {**capacity, "nvidia.com/gpu": str(gpus if allocatable is None else allocatable)}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def healthy_metrics(*names):
    return {
        "gpusReporting": dict.fromkeys(names, 1.0),
        "lastXid": dict.fromkeys(names, 0.0),
        "memoryAvailableRatio": dict.fromkeys(names, 0.6),
    }


def alert(name, severity, node_name=None):
    labels = {"alertname": name, "severity": severity, **({"node": node_name} if node_name else {})}
    return {"labels": labels, "annotations": {"summary": f"{name} summary"}, "state": "firing", "activeAt": "t"}


def gate(nodes, metrics, alerts=(), **kw):
    states = node_states(nodes, metrics, {"NVIDIA-GB10"})
    return (*evaluate(states, list(alerts), {"critical"}, set(kw.pop("ignore", ())), **kw), states)


def test_healthy_gb10_passes_and_cpu_nodes_are_not_gated():
    blocking, warnings, considered, states = gate(
        [node("spark-01"), node("cpu-01", gpus=0)], healthy_metrics("spark-01")
    )
    assert blocking == [] and warnings == [] and considered == []
    assert [s["name"] for s in states] == ["spark-01"]
    assert states[0]["unifiedMemory"] and states[0]["memoryAvailableRatio"] == 0.6 and states[0]["lastXid"] == 0


@pytest.mark.parametrize(
    ("nodes", "metrics", "expected"),
    [
        ([node("spark-01", ready=False)], healthy_metrics("spark-01"), "spark-01: node is not Ready"),
        (
            [node("s", gpus=2, allocatable=1, product="NVIDIA-H100")],
            {"gpusReporting": {"s": 2}},
            "s: only 1 of 2 GPUs allocatable",
        ),
        (
            [node("spark-01")],
            {"gpusReporting": {}, "memoryAvailableRatio": {"spark-01": 0.5}},
            "spark-01: DCGM reports 0 of 1 GPUs",
        ),
        (
            [node("spark-01")],
            {"gpusReporting": {"spark-01": 1}},
            "spark-01: no host memory metrics (node-exporter) for a unified-memory GPU",
        ),
    ],
)
def test_structural_problems_block(nodes, metrics, expected):
    blocking = gate(nodes, metrics)[0]
    assert blocking == [expected]


def test_missing_gpu_metrics_do_not_block_when_not_required():
    assert gate([node("spark-01")], {}, require_gpu_metrics=False)[0] == []


def test_critical_alerts_block_warnings_do_not_and_ignored_ones_are_skipped():
    alerts = [
        alert("TokenFactoryGPUXidCritical", "critical", "spark-01"),
        alert("TokenFactoryGPUThermalThrottling", "warning", "spark-01"),
        alert("TokenFactoryGatewayDown", "critical"),
    ]
    blocking, warnings, considered, _ignored = gate(
        [node("spark-01")], healthy_metrics("spark-01"), alerts, ignore={"TokenFactoryGatewayDown"}
    )
    assert blocking == ["spark-01: TokenFactoryGPUXidCritical (critical): TokenFactoryGPUXidCritical summary"]
    assert warnings == [
        "spark-01: TokenFactoryGPUThermalThrottling (warning): TokenFactoryGPUThermalThrottling summary"
    ]
    assert [a["alertname"] for a in considered] == ["TokenFactoryGPUXidCritical", "TokenFactoryGPUThermalThrottling"]


def test_gating_one_node_ignores_alerts_and_problems_of_the_others():
    nodes = [node("spark-01"), node("spark-02", ready=False)]
    alerts = [alert("TokenFactoryGPUXidCritical", "critical", "spark-02"), alert("TokenFactoryEngineDown", "critical")]
    blocking = gate(nodes, healthy_metrics("spark-01", "spark-02"), alerts, only_nodes={"spark-01"})[0]
    assert blocking == ["TokenFactoryEngineDown (critical): TokenFactoryEngineDown summary"]
    assert gate(nodes, healthy_metrics("spark-01"), only_nodes={"spark-09"})[0] == ["spark-09: no such GPU node"]


def test_reader_reads_instant_vectors_and_firing_alerts_only():
    answers = {
        "/api/v1/query": {"status": "success", "data": {"result": [
            {"metric": {"node": "spark-01"}, "value": [1, "1"]}, {"metric": {}, "value": [1, "3"]}]}},
        "/api/v1/alerts": {"status": "success", "data": {"alerts": [
            {"state": "firing", "labels": {"alertname": "A"}}, {"state": "pending", "labels": {"alertname": "B"}}]}},
    }  # fmt: skip
    reader = PrometheusReader(lambda path, params: answers[path])
    assert reader.by_node("count(x)") == {"spark-01": 1.0}
    assert [a["labels"]["alertname"] for a in reader.firing_alerts()] == ["A"]


def test_reader_names_a_prometheus_error():
    reader = PrometheusReader(lambda path, params: {"status": "error", "errorType": "bad_data", "error": "parse error"})
    with pytest.raises(PrometheusError, match="bad_data: parse error"):
        reader.by_node("count(")
