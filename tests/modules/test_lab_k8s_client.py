"""The Kubernetes client against the lab's real API server: kubernetes.core's auth options (kubeconfig as a dict,
proxy, impersonation), retries of transient answers (real proxy injecting 429/503), and readiness as strict as
`kubectl rollout status` (the real controller-manager frozen with SIGSTOP mid-rollout)."""

import contextlib
import os
import signal

import pytest
import yaml

from lab.proxies import ConnectProxy, FaultProxy

pytestmark = pytest.mark.lab


def test_kubeconfig_given_as_a_dict(tf_lab):
    config = yaml.safe_load(tf_lab.kubeconfig.read_text())
    result = tf_lab.run("model_info", namespace="default", kubeconfig=config)
    assert not result.get("failed"), result.get("msg")
    assert result["models"] == []


def test_requests_go_through_the_proxy(tf_lab):
    with ConnectProxy() as proxy:
        result = tf_lab.run("model_info", namespace="default", proxy=proxy.url)
    assert not result.get("failed"), result.get("msg")
    assert proxy.tunnels and set(proxy.tunnels) == {tf_lab.cluster.server.removeprefix("https://")}


def test_impersonation_reaches_the_api_server(tf_lab):
    denied = tf_lab.run("model_info", namespace="default", impersonate_user="jane")
    assert denied["failed"] and "403" in denied["msg"] and 'User "jane" cannot' in denied["msg"]
    allowed = tf_lab.run(
        "model_info", namespace="default", impersonate_user="jane", impersonate_groups=["system:masters"]
    )
    assert not allowed.get("failed"), allowed.get("msg")


def test_throttling_and_server_errors_are_retried(tf_lab, tf_namespace):
    with FaultProxy(tf_lab.cluster, faults=[429, 503, 500]) as front:
        args = {"kubeconfig": None, "host": front.url, "api_key": "the-proxy-authenticates", "namespace": tf_namespace}
        result = tf_lab.run("model_info", **args)
        assert not result.get("failed"), result.get("msg")
        assert front.seen[:4] == [429, 503, 500, 200], front.seen
        assert [m["metadata"]["name"] for m in result["models"]] == ["qwen"]
        assert sum("retrying in" in note for note in result["progress"]) == 3, result["progress"]
        front.inject(*[503] * 5)
        failed = tf_lab.run("model_info", **args)
    assert failed["failed"] and failed["msg"].startswith("Kubernetes API error 503")
    assert front.seen.count(503) == 1 + 5, "five attempts in all, then the error"


@contextlib.contextmanager
def frozen(cluster, component):
    """SIGSTOP a control-plane component (a real fault: it stops reconciling), SIGCONT afterwards."""
    pid = cluster.status()["components"][component]["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_rollout_is_not_ready_while_the_old_pod_serves(tf_lab, tf_namespace):
    """Change the pod template while the deployment controller is frozen: the old pod stays Ready, but the new
    spec is not rolled out, so the deployment is Progressing (and not routed) until the controller catches up."""
    args = {"name": "qwen", "namespace": tf_namespace, "model": "qwen", "endpoint": "public", "gpu_type": "NVIDIA-GB10"}
    first = tf_lab.ok("model_deployment", context_length=4096, **args)
    assert first["status"]["phase"] == "Ready"
    with frozen(tf_lab.cluster, "kube-controller-manager"):
        changed = tf_lab.ok("model_deployment", context_length=2048, wait=False, **args)
        assert changed["changed"]
        assert changed["status"]["phase"] == "Progressing", changed["status"]
        assert changed["status"]["message"] == "waiting for the deployment controller to observe the new spec"
        assert changed["status"]["readyReplicas"] == 1, "the old pod still serves"
    done = tf_lab.ok("model_deployment", context_length=2048, **args)
    assert done["status"]["phase"] == "Ready"
    assert done["status"]["message"] == "1/1 updated and available"
