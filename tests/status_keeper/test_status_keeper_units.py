"""The status keeper (services/status_keeper) without a cluster: it writes a ModelDeployment's or Endpoint's status
only when what the modules' own status functions compute now differs from the stored status, onto the version it read
(409: next pass), keeps the old plan and writes the refusal in status for a newer spec that cannot be planned, keeps
going past API errors and never logs container logs."""

import copy
import logging
import threading

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import (
    PLAN_KEYS,
    is_current,
    plan_deployment,
    stored_plan,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import (
    deployment_status,
    endpoint_status,
)

from tokenfactory_status_keeper.__main__ import main
from tokenfactory_status_keeper.keeper import Keeper
from tokenfactory_status_keeper.logs import summary
from tokenfactory_status_keeper.loop import run

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B, md_params
from tests.unit.plugins.module_utils.tokenfactory.test_engine_pods import pod, rollout
from tests.unit.plugins.module_utils.tokenfactory.test_golden import SINGLE

NS = "tokenfactory"
CRASH = {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container=engine"}
SECRET_LINE = "HF_TOKEN=hf_secret_value"


class Cluster:
    """The part of KubeClient the keeper uses, over objects held here; apply() stores .status like the API server
    (a new resourceVersion) and answers 409 when the body names another resourceVersion than the stored one."""

    def __init__(self, objects, pods, workload, gateway_ready=0):
        self.objects = objects  # kind -> [objects]
        self.pods, self.workload, self.gateway_ready = pods, workload, gateway_ready
        self.applied, self.lists = [], 0

    def list(self, rtype, namespace=None, label_selector=None):
        if rtype.kind == "Pod":
            return self.pods
        if rtype.kind == "EndpointSlice":
            return [{"endpoints": [{"conditions": {"ready": True}}] * self.gateway_ready}]
        self.lists += 1
        return copy.deepcopy(self.objects.get(rtype.kind, []))

    def get(self, rtype, name, namespace=None):
        if rtype.kind == "Deployment":
            return self.workload
        if rtype.kind == "Service":
            return {"metadata": {"name": name}}
        if rtype.kind == "ComputeCluster":
            return SINGLE
        return next((o for o in self.objects.get(rtype.kind, []) if o["metadata"]["name"] == name), None)

    def log(self, pod_name, namespace, container, tail_lines=None, previous=False):
        return f"starting\n{SECRET_LINE}\nOOM"

    def apply(self, body, dry_run=False, subresource=None, conflict=True):
        assert subresource == "status" and conflict is False
        self.applied.append(body)
        stored = next(o for o in self.objects[body["kind"]] if o["metadata"]["name"] == body["metadata"]["name"])
        if body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise K8sError(409, "the object has been modified", "Conflict")
        stored["status"] = copy.deepcopy(body["status"])
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        return stored


def endpoint():
    spec = {
        "hostname": "llm.example.com",
        "computeCluster": "spark",
        "gateway": {"serviceName": "tokenfactory-gateway", "namespace": "tokenfactory-system"},
    }
    return {"metadata": {"name": "public", "namespace": NS, "resourceVersion": "10"}, "spec": spec}


def module_written(cluster):
    """A Ready ModelDeployment and its Endpoint with the status the modules wrote (computed by the same functions)."""
    ep = endpoint()
    ep["status"] = endpoint_status(cluster, ep["spec"])
    spec = deployment_spec(md_params())
    plan = plan_deployment(spec, QWEN_05B, SINGLE, [], name="qwen")
    md = {"metadata": {"name": "qwen", "namespace": NS, "generation": 1, "resourceVersion": "20"}, "spec": spec}
    md["status"] = deployment_status(cluster, md, plan, ep, SINGLE)
    return md, ep, plan


def ready_cluster():
    cluster = Cluster({}, [pod(ready=True)], rollout(1, observed=2), gateway_ready=2)
    md, ep, plan = module_written(cluster)
    cluster.objects = {"ModelDeployment": [md], "Endpoint": [ep]}
    return cluster, plan


def counts(**values):
    return {"checked": 2, "written": 0, "unchanged": 0, "skipped": 0, "conflicts": 0, "errors": 0, **values}


def test_the_plan_read_back_from_the_status_is_the_plan_the_module_decided():
    cluster, plan = ready_cluster()
    md = cluster.objects["ModelDeployment"][0]
    assert stored_plan(md) == plan and sorted(plan) == sorted(PLAN_KEYS)
    assert plan["generation"] == 1 and is_current(md)
    md["metadata"]["generation"] = 2  # a spec applied since (kubectl): the keeper replans it
    assert not is_current(md) and stored_plan(md) == plan


def test_nothing_changed_nothing_written():
    cluster, _plan = ready_cluster()
    assert Keeper(cluster).run_pass() == counts(unchanged=2)
    assert cluster.applied == []


def test_a_crash_loop_after_ready_is_written_as_failed_then_ready_again(caplog):
    cluster, _plan = ready_cluster()
    keeper = Keeper(cluster)
    cluster.pods = [pod(waiting=CRASH, terminated={"exitCode": 1, "reason": "Error"}, restarts=3)]
    cluster.workload = rollout(0, updated=1, observed=2)
    with caplog.at_level(logging.INFO, logger="tokenfactory.status_keeper"):
        assert keeper.run_pass() == counts(written=1, unchanged=1)
    (body,) = cluster.applied
    assert body["metadata"] == {"name": "qwen", "namespace": NS, "resourceVersion": "20"}
    assert body["kind"] == "ModelDeployment" and body["apiVersion"] == "tokenfactory.io/v1alpha1"
    status = cluster.objects["ModelDeployment"][0]["status"]
    assert status["phase"] == "Failed" and status["readyReplicas"] == 0
    assert status["message"].startswith("qwen-abc: container engine CrashLoopBackOff; back-off 40s")
    assert SECRET_LINE in status["message"]  # the status carries the last log lines, as the module writes them ...
    assert "ModelDeployment tokenfactory/qwen: Ready -> Failed, 0/1 ready: qwen-abc: container engine" in caplog.text
    assert SECRET_LINE not in caplog.text and "last log lines" not in caplog.text  # ... the keeper's log does not
    assert keeper.run_pass() == counts(unchanged=2)

    cluster.pods, cluster.workload = [pod(ready=True)], rollout(1, observed=2)
    assert keeper.run_pass() == counts(written=1, unchanged=1)
    assert cluster.objects["ModelDeployment"][0]["status"]["phase"] == "Ready"


def test_the_endpoint_follows_its_gateway_pods():
    cluster, _plan = ready_cluster()
    cluster.gateway_ready = 0
    assert Keeper(cluster).run_pass() == counts(written=1, unchanged=1)
    status = cluster.objects["Endpoint"][0]["status"]
    assert (status["phase"], status["gatewayReadyPods"]) == ("Pending", 0)
    assert status["message"] == "gateway Service tokenfactory-system/tokenfactory-gateway has no ready gateway pod"


def test_a_write_onto_a_changed_object_is_dropped_until_the_next_pass():
    cluster, _plan = ready_cluster()
    cluster.gateway_ready = 1
    keeper = Keeper(cluster)
    listed = cluster.list

    def list_then_modified(rtype, namespace=None, label_selector=None):
        items = listed(rtype, namespace, label_selector)
        if rtype.kind == "Endpoint":  # a module writes between the keeper's read and its write
            cluster.objects["Endpoint"][0]["metadata"]["resourceVersion"] = "11"
        return items

    cluster.list = list_then_modified
    assert keeper.run_pass() == counts(conflicts=1, unchanged=1)
    assert cluster.objects["Endpoint"][0]["status"]["gatewayReadyPods"] == 2
    cluster.list = listed
    assert keeper.run_pass() == counts(written=1, unchanged=1)
    assert cluster.objects["Endpoint"][0]["status"]["gatewayReadyPods"] == 1


def test_a_newer_spec_that_cannot_be_planned_is_refused_in_status_with_the_old_plan_said_once(caplog):
    cluster, plan = ready_cluster()
    cluster.objects["ModelDeployment"][0]["metadata"]["generation"] = 2
    keeper = Keeper(cluster)
    with caplog.at_level(logging.INFO, logger="tokenfactory.status_keeper"):
        assert keeper.run_pass() == counts(written=1, unchanged=1)
        assert keeper.run_pass() == counts(unchanged=2)
    status = cluster.objects["ModelDeployment"][0]["status"]
    assert status["plan"] == plan and status["phase"] == "Ready" and status["observedGeneration"] == 2
    assert status["refused"] == {
        "generation": 2,
        "field": "model",
        "reason": "model: Model 'qwen' not found in namespace tokenfactory (existing: none)",
    }
    assert caplog.text.count("ModelDeployment tokenfactory/qwen: generation 2 not applied: model: Model") == 1
    assert [body["kind"] for body in cluster.applied] == ["ModelDeployment"], "only its status is written"


def test_a_deployment_created_by_kubectl_without_status_gets_its_status_once_planned(monkeypatch):
    """No status at all (kubectl apply, or the module between its apply and its status write): once planned, the
    cluster is the one its Endpoint names (measured: a KeyError on status.computeCluster before)."""
    cluster, plan = ready_cluster()
    md = cluster.objects["ModelDeployment"][0]
    written = md.pop("status")
    monkeypatch.setattr("tokenfactory_status_keeper.keeper.reconcile", lambda client, obj, stored, log: (plan, None))
    assert Keeper(cluster).run_pass() == counts(written=1, unchanged=1)
    assert md["status"]["computeCluster"] == written["computeCluster"] == "spark"
    assert md["status"]["phase"] == "Ready" and md["status"]["plan"] == plan


def test_an_api_error_on_one_object_does_not_stop_the_others():
    cluster, _plan = ready_cluster()
    cluster.gateway_ready = 0

    def no_pods(*args, **kwargs):
        raise K8sError(403, 'pods is forbidden: User "system:serviceaccount:x:y" cannot list resource "pods"')

    got = cluster.list
    cluster.list = lambda rtype, namespace=None, label_selector=None: (
        no_pods() if rtype.kind == "Pod" else got(rtype, namespace, label_selector)
    )
    assert Keeper(cluster).run_pass() == counts(written=1, errors=1)
    assert cluster.objects["Endpoint"][0]["status"]["phase"] == "Pending"


def test_the_loop_runs_pass_after_pass_until_stopped_and_survives_a_failed_list():
    cluster, _plan = ready_cluster()
    keeper = Keeper(cluster)
    assert run(keeper, 0.01, threading.Event(), passes=3) == 3
    assert cluster.lists == 6

    calls = []

    def unreachable():
        calls.append(1)
        raise K8sError(0, "GET /apis/tokenfactory.io/v1alpha1/endpoints: cannot reach the API server")

    keeper.run_pass = unreachable
    assert run(keeper, 0.01, threading.Event(), passes=2) == 2 and len(calls) == 2
    stopped = threading.Event()
    stopped.set()
    assert run(keeper, 0.01, stopped) == 0


def test_the_log_summary_has_no_container_log_lines():
    status = {
        "phase": "Failed",
        "readyReplicas": 0,
        "replicas": 1,
        "message": f"p: container e X; last log lines: {SECRET_LINE}",
    }
    assert summary(status) == "Failed, 0/1 ready: p: container e X"
    assert summary({"phase": "Ready", "gatewayReadyPods": 2, "message": "m"}) == "Ready, 2 gateway pod(s) ready: m"


def test_the_interval_must_be_positive(capsys):
    try:
        main(["--interval", "0", "--once"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("--interval 0 was accepted")
    assert "0 is not a positive number of seconds" in capsys.readouterr().err
