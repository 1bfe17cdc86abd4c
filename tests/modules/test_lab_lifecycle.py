"""Every module against a real kube-apiserver (lab, simulated GB10 node): check mode, create, diff,
idempotence, info, delete, deletion cascade, secrets never returned."""

import json

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s import client as k8s
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import gone, poll

from tests.modules.lab_helpers import self_signed, snapshot

pytestmark = pytest.mark.lab

DEPLOYMENT_ARGS = {
    "model": "qwen",
    "endpoint": "public",
    "gpu_type": "NVIDIA-GB10",
    "context_length": 8192,
    "tenants": ["acme"],
    "rate_limits": {"per_key": {"requests_per_minute": 60, "tokens_per_minute": 100000}},
    "pricing": {"currency": "USD", "input_per_1m": "0.15", "output_per_1m": "0.60"},
    "autoscaling": {"min_replicas": 1, "max_replicas": 2},
    "disruption_budget": {"min_available": 1},
    "wait_timeout": 90,
}


def lifecycle(lab, module, rtype, namespace, name, args, changed_args):
    """check-mode create writes nothing; create; no-op rerun; diff of a change; check-mode delete; delete."""
    before = snapshot(lab.kube, namespace)
    planned = lab.ok(module, check_mode=True, diff=True, name=name, namespace=namespace, **args)
    assert planned["changed"] is True
    assert planned["diff"][0]["before"] == {}
    assert snapshot(lab.kube, namespace) == before, "check mode wrote something"

    created = lab.ok(module, name=name, namespace=namespace, **args)
    assert created["changed"] is True
    assert lab.kube.get(rtype, name, namespace) is not None
    again = lab.ok(module, name=name, namespace=namespace, **args)
    assert again["changed"] is False, f"{module} is not idempotent: {again.get('diff')}"

    changed = lab.ok(module, diff=True, name=name, namespace=namespace, **{**args, **changed_args})
    assert changed["changed"] is True
    assert any(d["before"] != d["after"] for d in changed["diff"])

    info = lab.ok(f"{module}_info", name=name, namespace=namespace)
    (listed,) = next(v for k, v in info.items() if isinstance(v, list) and k != "progress")
    assert listed["metadata"]["name"] == name

    assert lab.ok(module, check_mode=True, name=name, namespace=namespace, state="absent")["changed"] is True
    assert lab.kube.get(rtype, name, namespace) is not None, "check-mode delete deleted"
    return created


def delete(lab, module, rtype, namespace, name):
    assert lab.ok(module, name=name, namespace=namespace, state="absent")["changed"] is True
    assert lab.kube.get(rtype, name, namespace) is None
    assert lab.ok(module, name=name, namespace=namespace, state="absent")["changed"] is False


def test_crds_are_idempotent_and_check_mode_is_clean(tf_lab):
    assert tf_lab.ok("crds")["changed"] is False
    assert tf_lab.ok("crds", check_mode=True, diff=True)["changed"] is False


def test_compute_cluster_records_the_gb10_inventory(tf_lab):
    namespace = tf_lab.namespace()
    created = lifecycle(
        tf_lab, "compute_cluster", kinds.COMPUTE_CLUSTER, namespace, "spark", {}, {"description": "lab spark"}
    )
    (gpus,) = created["inventory"]["gpus"]
    assert gpus["product"] == "NVIDIA-GB10"
    assert gpus["unifiedMemory"] is True
    assert gpus["computeCapability"] == "12.1"
    assert gpus["memoryBytesPerGPU"] == 119 * 2**30
    stored = tf_lab.kube.get(kinds.COMPUTE_CLUSTER, "spark", namespace)
    assert stored["status"]["gpus"] == created["inventory"]["gpus"]
    delete(tf_lab, "compute_cluster", kinds.COMPUTE_CLUSTER, namespace, "spark")


def test_provider_token_is_stored_in_an_owned_secret_and_never_returned(tf_lab):
    namespace = tf_lab.namespace()
    args = {"type": "huggingface", "token": "hf_do_not_leak_42"}
    created = lifecycle(tf_lab, "provider", kinds.PROVIDER, namespace, "hf", args, {"display_name": "Hugging Face"})
    assert "hf_do_not_leak_42" not in json.dumps(created)
    changed = tf_lab.ok("provider", diff=True, name="hf", namespace=namespace, type="huggingface", token="hf_new_99")
    assert "hf_new_99" not in json.dumps(changed)
    secret = tf_lab.kube.get(k8s.SECRET, "hf-credentials", namespace)
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "Provider"
    delete(tf_lab, "provider", kinds.PROVIDER, namespace, "hf")
    poll("hf-credentials", gone(tf_lab.kube, k8s.SECRET, "hf-credentials", namespace), 30)


def test_model_and_endpoint(tf_lab):
    namespace = tf_lab.namespace()
    tf_lab.ok("compute_cluster", name="spark", namespace=namespace)
    tf_lab.ok("provider", name="hf", namespace=namespace, type="huggingface")
    model = lifecycle(
        tf_lab,
        "model",
        kinds.MODEL,
        namespace,
        "qwen",
        {"provider": "hf", "source": "Qwen/Qwen2-0.5B-Instruct"},
        {"revision": "main"},
    )
    assert model["served_name"] == "Qwen/Qwen2-0.5B-Instruct"
    assert model["model"]["spec"]["architecture"]["numLayers"] == 24

    cert, key = self_signed("llm.example.com")
    endpoint_args = {"hostname": "llm.example.com", "compute_cluster": "spark", "tls_cert": cert, "tls_key": key}
    created = lifecycle(tf_lab, "endpoint", kinds.ENDPOINT, namespace, "public", endpoint_args, {"port": 8443})
    assert created["base_url"] == "https://llm.example.com/v1"
    assert key.splitlines()[1] not in json.dumps(created)
    stored = tf_lab.kube.get(kinds.ENDPOINT, "public", namespace)
    assert stored["status"]["baseURL"] == "https://llm.example.com:8443/v1"
    assert tf_lab.kube.get(k8s.SECRET, "public-tls", namespace)["type"] == "kubernetes.io/tls"
    delete(tf_lab, "endpoint", kinds.ENDPOINT, namespace, "public")
    poll("public-tls", gone(tf_lab.kube, k8s.SECRET, "public-tls", namespace), 30)
    delete(tf_lab, "model", kinds.MODEL, namespace, "qwen")


def test_model_deployment_lifecycle_status_and_cascade(tf_lab, tf_namespace):
    namespace = tf_namespace
    created = lifecycle(
        tf_lab,
        "model_deployment",
        kinds.MODEL_DEPLOYMENT,
        namespace,
        "qwen",
        DEPLOYMENT_ARGS,
        {"rate_limits": {"per_key": {"requests_per_minute": 120}}},
    )
    assert created["status"]["phase"] == "Ready"
    assert created["placement"]["nodes"] == ["spark-01"]
    assert created["base_url"] == "https://llm.example.com/v1"
    assert created["upstream_url"] == f"http://qwen.{namespace}.svc:8000"
    assert created["served_model_name"] == "Qwen/Qwen2-0.5B-Instruct"
    assert any("Ready" in message for message in created["progress"])

    stored = tf_lab.kube.get(kinds.MODEL_DEPLOYMENT, "qwen", namespace)
    # The fields the gateway reads (docs/modules.md, CRD field names), as stored in the cluster.
    assert stored["spec"]["tenants"] == ["acme"]
    assert stored["spec"]["rateLimits"] == {"perKey": {"requestsPerMinute": 120}}
    assert stored["spec"]["pricing"] == {"currency": "USD", "inputPer1M": "0.15", "outputPer1M": "0.60"}
    assert stored["status"]["servedModelName"] == "Qwen/Qwen2-0.5B-Instruct"
    assert stored["status"]["upstreamURL"] == created["upstream_url"]

    uid = stored["metadata"]["uid"]
    children = [(k8s.DEPLOYMENT, "qwen"), (k8s.SERVICE, "qwen"), (k8s.HPA, "qwen"), (k8s.PDB, "qwen")]
    for rtype, name in children:
        child = tf_lab.kube.get(rtype, name, namespace)
        assert child["metadata"]["ownerReferences"][0]["uid"] == uid, f"{rtype.kind} not owned"

    removed = tf_lab.ok("model_deployment", name="qwen", namespace=namespace, state="absent")
    assert removed["deleted_children"] == [f"{rtype.kind}/{name}" for rtype, name in children]
    for rtype, name in children:
        assert tf_lab.kube.get(rtype, name, namespace) is None, f"{rtype.kind} survived the cascade"
    assert tf_lab.ok("model_deployment", name="qwen", namespace=namespace, state="absent")["changed"] is False


def test_removing_autoscaling_prunes_the_hpa(tf_lab, tf_namespace):
    args = dict(DEPLOYMENT_ARGS, name="qwen", namespace=tf_namespace)
    tf_lab.ok("model_deployment", **args)
    assert tf_lab.kube.get(k8s.HPA, "qwen", tf_namespace) is not None
    slimmer = {k: v for k, v in args.items() if k not in ("autoscaling", "disruption_budget")}
    result = tf_lab.ok("model_deployment", **slimmer)
    assert result["children"] == ["Deployment/qwen", "Service/qwen"]
    assert tf_lab.kube.get(k8s.HPA, "qwen", tf_namespace) is None
    assert tf_lab.kube.get(k8s.PDB, "qwen", tf_namespace) is None
    assert tf_lab.kube.get(k8s.DEPLOYMENT, "qwen", tf_namespace)["spec"]["replicas"] == 1
