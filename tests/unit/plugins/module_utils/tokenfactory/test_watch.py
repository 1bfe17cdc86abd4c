"""model_deployment_info observe=true: the live rollout of a stored ModelDeployment, on one line."""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.watch import rollout_now

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B, md_params
from tests.unit.plugins.module_utils.tokenfactory.test_engine_pods import pod
from tests.unit.plugins.module_utils.tokenfactory.test_golden import PAIR

MD = {
    "metadata": {"name": "qwen", "namespace": "tokenfactory", "generation": 1},
    "spec": {"engine": "vllm", "replicas": 1},
    "status": {"phase": "Progressing", "placement": {"nodesPerReplica": 1}},
}


class Cluster:
    def __init__(self, workload, pods, events=()):
        self.workload, self.pods, self.events, self.got = workload, pods, list(events), []

    def get(self, rtype, name, namespace=None):
        self.got.append((rtype.kind, name))
        return self.workload

    def list(self, rtype, namespace=None, label_selector=None):
        return self.events if rtype.kind == "Event" else self.pods

    def log(self, *args, **kwargs):
        return ""


def deployment(available):
    return {
        "kind": "Deployment",
        "metadata": {"generation": 1},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "updatedReplicas": 1,
            "availableReplicas": available,
            "readyReplicas": available,
        },
    }


def test_progressing_then_ready():
    pulling = {
        "involvedObject": {"kind": "Pod", "name": "qwen-abc"},
        "reason": "Pulling",
        "message": "Pulling image vllm",
        "lastTimestamp": "2026-12-04T10:00:00Z",
        "metadata": {},
    }
    cluster = Cluster(deployment(0), [pod()], [pulling])
    seen = rollout_now(cluster, MD)
    assert cluster.got == [("Deployment", "qwen")]
    assert seen["phase"] == "Progressing" and seen["readyReplicas"] == 0 and seen["replicas"] == 1
    assert seen["progressLine"] == (
        "ModelDeployment tokenfactory/qwen: Progressing, 0/1 ready - 0 of 1 updated replicas available"
        " (last event: Pod/qwen-abc Pulling: Pulling image vllm)"
    )
    ready = rollout_now(Cluster(deployment(1), [pod(ready=True)]), MD)
    assert ready["progressLine"].startswith("ModelDeployment tokenfactory/qwen: Ready, 1/1 ready")


def test_stuck_pod_names_the_reason():
    stuck = pod(waiting={"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope:1"'})
    seen = rollout_now(Cluster(deployment(0), [stuck]), MD)
    assert seen["phase"] == "Failed"
    assert "qwen-abc: container engine ImagePullBackOff" in seen["progressLine"]


def test_multinode_watches_the_statefulset():
    cluster = Cluster(None, [])
    spec = deployment_spec(md_params(gpus_per_replica=2))
    plan = plan_deployment(spec, QWEN_05B, PAIR, [], name="qwen")
    md = {**MD, "spec": spec, "status": {"plan": plan}}  # the persisted plan says where it runs
    assert rollout_now(cluster, md)["phase"] == "Progressing"
    assert cluster.got == [("StatefulSet", "qwen")]
