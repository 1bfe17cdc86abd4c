"""gpu_readiness_info: ready nodes of the expected ones, what the others lack, a stuck operator pod, on one line."""

from ansible_collections.tokenfactory.spark.plugins.modules.gpu_readiness_info import readiness

from tests.unit.plugins.module_utils.tokenfactory.test_engine_pods import pod

LABELS = ["nvidia.com/gpu.product"]
PARAMS = {"nodes": [], "labels": LABELS, "resource": "nvidia.com/gpu", "namespace": "gpu-operator"}


def node(name, gpus, product="NVIDIA-GB10"):
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product} if product else {}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }


class Cluster:
    def __init__(self, nodes, pods=()):
        self.nodes, self.pods = nodes, list(pods)

    def list(self, rtype, namespace=None, label_selector=None):
        return {"Node": self.nodes, "Pod": self.pods, "Event": []}[rtype.kind]

    def log(self, *args, **kwargs):
        return "driver init failed"


def test_all_nodes_ready():
    seen = readiness(Cluster([node("spark-01", 1), node("spark-02", 1)]), PARAMS)
    assert seen["ready"] and seen["gaps"] == {}
    assert seen["progress_line"] == "GPU nodes: Ready, 2/2 ready"
    assert seen["gpus"][0] == {"name": "spark-01", "count": 1, "product": "NVIDIA-GB10"}


def test_missing_gpus_and_stuck_operator_pod_are_named():
    crashing = pod(
        name="nvidia-device-plugin-x",
        waiting={"reason": "CrashLoopBackOff"},
        terminated={"exitCode": 1, "reason": "Error"},
        restarts=4,
    )
    seen = readiness(Cluster([node("spark-01", 1), node("spark-02", 0, product="")], [crashing]), PARAMS)
    assert not seen["ready"]
    line = seen["progress_line"]
    assert line.startswith("GPU nodes: Pending, 1/2 ready - spark-02: nvidia.com/gpu not allocatable, label")
    assert "stuck operator pod nvidia-device-plugin-x: container engine CrashLoopBackOff" in line
    assert "last log lines: driver init failed" in line


def test_no_nodes_at_all():
    seen = readiness(Cluster([]), {**PARAMS, "namespace": ""})
    assert seen["progress_line"] == "GPU nodes: Pending, 0/0 ready - (cluster): no node found"
