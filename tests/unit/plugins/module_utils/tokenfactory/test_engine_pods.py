"""status.phase follows the real pods, for every engine: Pending, Progressing, Ready, and Failed with the reason,
the last exit and the container's last log lines when a pod is stuck (crash loop, image pull errors)."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES, render
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.pods import (
    FAILING_REASONS,
    LOG_LINES,
    workload_phase,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    MODEL_DEPLOYMENT_LABEL,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment

from tests.unit.plugins.module_utils.tokenfactory.samples import md_params
from tests.unit.plugins.module_utils.tokenfactory.test_golden import SCENARIOS

DEPLOYMENT = {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 1}}


class Pods:
    """The part of KubeClient the observers use: get, list and log, from fixed answers (logs per container run)."""

    def __init__(self, pods, workload=None, child=None, logs=None):
        self.pods, self.workload, self.child, self.logs, self.log_calls = pods, workload, child, logs or {}, []

    def get(self, rtype, name, namespace=None):
        return self.child if rtype.kind not in ("Deployment", "StatefulSet") else self.workload

    def list(self, rtype, namespace=None, label_selector=None):
        assert label_selector.startswith(f"{MODEL_DEPLOYMENT_LABEL}=")
        return self.pods

    def log(self, pod, namespace, container, tail_lines=None, previous=False):
        self.log_calls.append((pod, container, tail_lines, previous))
        if (pod, previous) not in self.logs:
            raise K8sError(400, f'previous terminated container "{container}" in pod "{pod}" not found')
        return self.logs[(pod, previous)]


def pod(name="qwen-abc", node="spark-1", waiting=None, terminated=None, restarts=0, scheduled=None, ready=False):
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    container = {"name": "engine", "restartCount": restarts, "state": {"running": {}}}
    if waiting:
        container["state"] = {"waiting": waiting}
    if terminated:
        container["lastState"] = {"terminated": terminated}
    status["containerStatuses"] = [container]
    if scheduled:
        status["conditions"].append({"type": "PodScheduled", "status": "False", **scheduled})
    return {
        "metadata": {"name": name, "namespace": "tokenfactory"},
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


def rollout(available, updated=None, observed=2, progressing=None):
    """A Deployment's status as its controller writes it (one replica wanted)."""
    updated = available if updated is None else updated
    status = {
        "observedGeneration": observed,
        "replicas": max(1, updated),
        "updatedReplicas": updated,
        "readyReplicas": available,
        "availableReplicas": available,
    }
    if progressing:
        status["conditions"] = [{"type": "Progressing", **progressing}]
    return {**DEPLOYMENT, "status": status}


def test_ready_when_every_replica_is_updated_and_ready():
    client = Pods([pod(ready=True)])
    assert workload_phase(client, 1, rollout(1), client.pods) == ("Ready", "1/1 updated and available", ["spark-1"])


def test_old_ready_pods_of_a_rollout_do_not_make_it_ready():
    client = Pods([pod(ready=True)])
    assert workload_phase(client, 1, rollout(1, 0), client.pods) == (
        "Progressing",
        "0 of 1 replicas updated",
        ["spark-1"],
    )
    # The controller has not seen the new spec yet: its counts are of the old one.
    assert workload_phase(client, 1, rollout(1, observed=1), client.pods)[0] == "Progressing"


def test_a_rollout_past_its_deadline_is_failed():
    client = Pods([pod()])
    late = rollout(0, 1, progressing={"reason": "ProgressDeadlineExceeded", "message": "ReplicaSet has timed out"})
    phase, message, _nodes = workload_phase(client, 1, late, client.pods)
    assert (phase, message) == ("Failed", "rollout exceeded its progress deadline: ReplicaSet has timed out")


def test_pending_when_the_scheduler_cannot_place_a_pod():
    unschedulable = {"reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}
    client = Pods([pod(node=None, scheduled=unschedulable)])
    phase, message, nodes = workload_phase(client, 1, rollout(0), client.pods, note="queued")
    assert (phase, nodes) == ("Pending", [])
    assert message == "queued; qwen-abc: Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    assert workload_phase(client, 0, rollout(0), client.pods)[:2] == ("Pending", "scaled to zero replicas")


def test_queued_is_pending_before_the_scheduler_has_marked_the_pod():
    """The planner queued it (not enough GPUs): Pending even while the pod has no PodScheduled condition yet."""
    client = Pods([pod(node=None)])
    assert workload_phase(client, 1, rollout(0), client.pods, note="queued")[:2] == ("Pending", "queued")
    assert workload_phase(client, 1, rollout(0), client.pods)[0] == "Progressing"


def test_a_starting_engine_is_progressing():
    client = Pods([pod(waiting={"reason": "ContainerCreating"})])
    assert workload_phase(client, 1, rollout(0, 1), client.pods) == (
        "Progressing",
        "0 of 1 updated replicas available",
        ["spark-1"],
    )
    assert workload_phase(client, 1, None, [])[:2] == ("Progressing", "waiting for the workload to be created")


def test_crash_loop_is_failed_with_the_exit_and_the_last_log_lines_of_the_crashed_run():
    lines = "\n".join(f"line {i}" for i in range(30)) + "\nvllm: error: unrecognized arguments: --bogus\n"
    crashed = pod(
        waiting={"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container=engine"},
        terminated={"exitCode": 2, "reason": "Error"},
        restarts=3,
    )
    client = Pods([crashed], logs={("qwen-abc", True): lines})
    phase, message, nodes = workload_phase(client, 1, rollout(0), client.pods)
    assert (phase, nodes) == ("Failed", ["spark-1"])
    assert message.startswith("qwen-abc: container engine CrashLoopBackOff; back-off 40s")
    assert "last exit code 2 (Error), restarts 3" in message
    assert message.endswith(
        "line 21 | line 22 | line 23 | line 24 | line 25 | line 26 | line 27 | line 28 | line 29 | "
        "vllm: error: unrecognized arguments: --bogus"
    )
    assert client.log_calls == [("qwen-abc", "engine", LOG_LINES, True)]


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull", "InvalidImageName"])
def test_image_errors_are_failed_with_the_kubelet_message(reason):
    message = 'Back-off pulling image "nvcr.io/nvidia/vllm:25.11-py3"'
    client = Pods([pod(waiting={"reason": reason, "message": message})])
    phase, text, _nodes = workload_phase(client, 1, rollout(0), client.pods)
    assert phase == "Failed"
    assert text == f"qwen-abc: container engine {reason}; {message}"
    assert client.log_calls == []  # nothing ran: no log to read
    assert reason in FAILING_REASONS


def test_a_log_that_cannot_be_read_is_named_not_fatal():
    crashed = pod(waiting={"reason": "CrashLoopBackOff"}, terminated={"exitCode": 137, "reason": "OOMKilled"})
    client = Pods([crashed])
    phase, message, _nodes = workload_phase(client, 1, rollout(0), client.pods)
    assert phase == "Failed"
    assert "last exit code 137 (OOMKilled)" in message and "last log lines: (no log: previous terminated" in message


@pytest.mark.parametrize(("name", "scenario"), [("vllm", "vllm-default"), ("nim", "nim"), ("dynamo", "dynamo")])
def test_every_engine_reports_a_stuck_pod_as_failed(name, scenario):
    """vLLM reads its Deployment, NIM and Dynamo their operator's object: a stuck pod wins over both."""
    overrides, model, _provider, compute_cluster = SCENARIOS[scenario]
    spec = deployment_spec(md_params(**overrides))
    plan = plan_deployment(spec, model, compute_cluster, [], name="qwen")
    md = {"metadata": {"name": "qwen", "namespace": "tokenfactory"}, "spec": spec}
    stuck = pod(waiting={"reason": "ErrImagePull", "message": "not found"})
    client = Pods([stuck], workload=rollout(0), child={"status": {"state": "Ready"}})
    seen = ENGINES[name].observe(client, md, plan)
    assert seen["phase"] == "Failed", seen
    assert seen["message"].endswith("qwen-abc: container engine ErrImagePull; not found")
    assert seen["nodes"] == ["spark-1"]
    healthy = Pods([pod(ready=True)], workload=rollout(1), child={"status": {"state": "Ready"}})
    assert ENGINES[name].observe(healthy, md, plan)["phase"] == "Ready"


def test_every_engine_labels_and_annotates_its_pods_for_status_and_prometheus():
    """One place (workload.pod_metadata) for every engine: the pods carry the ModelDeployment label and the
    prometheus.io annotations the in-cluster Prometheus keeps engine pods by."""
    rendered = {
        name: rendered_children(SCENARIOS[name]) for name in ("vllm-default", "vllm-multinode", "nim", "dynamo")
    }
    templates = [
        rendered["vllm-default"][0]["spec"]["template"]["metadata"],
        rendered["vllm-multinode"][1]["spec"]["template"]["metadata"],
        {k: rendered["nim"][0]["spec"][k] for k in ("labels", "annotations")},
        rendered["dynamo"][0]["spec"]["services"]["Frontend"]["extraPodMetadata"],
    ]
    paths = ["/metrics", "/metrics", "/v1/metrics", "/metrics"]
    for metadata, path in zip(templates, paths, strict=True):
        assert metadata["labels"][MODEL_DEPLOYMENT_LABEL] == "qwen"
        assert metadata["annotations"] == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "8000",
            "prometheus.io/path": path,
        }
    worker = rendered["dynamo"][0]["spec"]["services"]["VllmWorker"]["extraPodMetadata"]
    assert worker["labels"][MODEL_DEPLOYMENT_LABEL] == "qwen" and "annotations" not in worker


def rendered_children(scenario):
    overrides, model, provider, compute_cluster = scenario
    spec = deployment_spec(md_params(**overrides))
    plan = plan_deployment(spec, model, compute_cluster, [], name="qwen")
    md = {"metadata": {"name": "qwen", "namespace": "tf", "uid": "1"}, "kind": "ModelDeployment", "spec": spec}
    md["apiVersion"] = "tokenfactory.io/v1alpha1"
    return render(md, model, provider, plan)
