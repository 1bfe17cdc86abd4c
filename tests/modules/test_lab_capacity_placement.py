"""GPU supply policy, memory capacity, paired-Spark placement, NIM/Dynamo renderings (stand-in CRDs) and CRD
removal, against real API servers with simulated GB10 nodes (spark-single and spark-pair lab profiles)."""

import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s import client as k8s
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.dynamo import DYNAMO_GRAPH
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.nim import NIM_SERVICE
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import poll

from lab.k8s.cluster import LabCluster
from tests.modules.fixtures import start_tf_lab
from tests.modules.lab_helpers import snapshot
from tests.modules.standin_crds import install_standins

pytestmark = pytest.mark.lab

ONE_GPU = {"model": "qwen", "endpoint": "public", "gpu_type": "NVIDIA-GB10", "context_length": 4096, "wait_timeout": 60}


def test_second_one_gpu_deployment_on_a_one_gpu_spark(tf_lab, tf_namespace):
    """Policy: fail before creating anything (default), or queue: created and Pending until the GPU is free."""
    ns = tf_namespace
    first = tf_lab.ok("model_deployment", name="first", namespace=ns, **ONE_GPU)
    assert first["status"]["phase"] == "Ready"

    before = snapshot(tf_lab.kube, ns)
    refused = tf_lab.run("model_deployment", name="second", namespace=ns, **ONE_GPU)
    assert refused["failed"] is True
    assert refused["msg"] == (
        "capacity: needs 1 x NVIDIA-GB10 but the compute cluster has 1 allocatable and 1 already claimed by other "
        "ModelDeployments (0 free). Delete or scale down another ModelDeployment, add nodes, or set "
        "on_insufficient_gpus=queue to accept it and wait in Pending."
    )
    assert snapshot(tf_lab.kube, ns) == before

    queued = tf_lab.ok("model_deployment", name="second", namespace=ns, on_insufficient_gpus="queue", **ONE_GPU)
    assert queued["status"]["phase"] in ("Pending", "Progressing")
    assert queued["status"]["message"].startswith("queued: needs 1 x NVIDIA-GB10")
    pods = tf_lab.kube.list(k8s.POD, ns, "tokenfactory.io/model-deployment=second")

    def unschedulable():
        pods[:] = tf_lab.kube.list(k8s.POD, ns, "tokenfactory.io/model-deployment=second")
        reasons = [c.get("reason") for p in pods for c in p.get("status", {}).get("conditions", [])]
        return "Unschedulable" in reasons, reasons

    poll("the queued pod to be Unschedulable", unschedulable, 30)
    again = tf_lab.ok("model_deployment", name="second", namespace=ns, on_insufficient_gpus="queue", **ONE_GPU)
    assert again["status"]["phase"] == "Pending"
    assert "Insufficient nvidia.com/gpu" in again["status"]["message"]

    tf_lab.ok("model_deployment", name="first", namespace=ns, state="absent")
    freed = tf_lab.ok("model_deployment", name="second", namespace=ns, **ONE_GPU)
    assert freed["status"]["phase"] == "Ready"
    assert freed["placement"]["nodes"] == ["spark-01"]


def test_a_model_that_does_not_fit_is_refused_with_the_arithmetic(tf_lab, tf_namespace):
    ns = tf_namespace
    tf_lab.ok("model", name="llama70b", namespace=ns, provider="hf", source="meta-llama/Llama-3.3-70B-Instruct")
    before = snapshot(tf_lab.kube, ns)
    result = tf_lab.run(
        "model_deployment", name="llama", namespace=ns, **{**ONE_GPU, "model": "llama70b", "context_length": 32768}
    )
    assert result["failed"] is True
    assert result["msg"].startswith(
        "capacity: the model does not fit on NVIDIA-GB10: each of the 1 GPU(s) of a replica needs 143.5 GiB "
        "(weights 131.5 GiB + KV cache for 1 x 32768 tokens 10.0 GiB + runtime overhead 2.0 GiB) but only 89.2 GiB "
        "is usable (0.75 x 119.0 GiB unified memory shared with the OS)."
    )
    assert snapshot(tf_lab.kube, ns) == before


@pytest.fixture(scope="module")
def pair_lab():
    cluster = LabCluster("spark-pair", f"tf-modules-pair-{uuid.uuid4().hex[:6]}")
    cluster.start()
    yield start_tf_lab(cluster)
    cluster.stop()


def test_paired_sparks_serve_one_replica_across_the_fabric(pair_lab):
    ns = pair_lab.base_objects(pair_lab.namespace())
    (gpus,) = pair_lab.ok("compute_cluster", name="spark", namespace=ns)["inventory"]["gpus"]
    assert (gpus["count"], gpus["fabrics"]) == (2, ["spark-pair"])
    pair_lab.ok("model", name="llama70b", namespace=ns, provider="hf", source="nvidia/Llama-3.3-70B-Instruct-FP4")
    args = {**ONE_GPU, "model": "llama70b", "gpus_per_replica": 2, "context_length": 32768}
    one_spark = pair_lab.run(
        "model_deployment", name="llama", namespace=ns, **{**args, "gpus_per_replica": 1, "capacity_sequences": 8}
    )
    assert one_spark["failed"] is True
    assert "does not fit on NVIDIA-GB10" in one_spark["msg"]

    result = pair_lab.ok("model_deployment", name="llama", namespace=ns, **args)
    assert result["status"]["phase"] == "Ready"
    assert result["placement"] == {
        "gpuType": "NVIDIA-GB10",
        "gpusPerReplica": 2,
        "gpusPerPod": 1,
        "nodesPerReplica": 2,
        "unifiedMemory": True,
        "nodes": ["spark-01", "spark-02"],
        "fabric": "spark-pair",
    }
    assert result["children"] == ["Service/llama-ranks", "StatefulSet/llama", "Service/llama"]
    pods = pair_lab.kube.list(k8s.POD, ns, "tokenfactory.io/model-deployment=llama")
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["spark-01", "spark-02"]
    assert pair_lab.ok("model_deployment", name="llama", namespace=ns, **args)["changed"] is False
    pair_lab.ok("model_deployment", name="llama", namespace=ns, state="absent")
    assert pair_lab.kube.list(k8s.POD, ns, "tokenfactory.io/model-deployment=llama") == [] or all(
        p["metadata"].get("deletionTimestamp")
        for p in pair_lab.kube.list(k8s.POD, ns, "tokenfactory.io/model-deployment=llama")
    )
    assert pair_lab.kube.get(k8s.STATEFUL_SET, "llama", ns) is None


def test_nim_and_dynamo_against_stand_in_crds_and_engine_switch_prunes(pair_lab):
    """STAND-IN CRDs: the operators are not installable here; the test plays the operator by setting status."""
    install_standins(pair_lab.kube)
    ns = pair_lab.base_objects(pair_lab.namespace())
    nim_args = {**ONE_GPU, "engine": "nim", "image": "nvcr.io/nim/qwen/qwen2-0.5b-instruct", "version": "1.0.0"}
    created = pair_lab.ok("model_deployment", name="qwen", namespace=ns, wait=False, **nim_args)
    assert created["children"] == ["NIMService/qwen"]
    assert created["status"]["phase"] == "Progressing"
    nim = pair_lab.kube.get(NIM_SERVICE, "qwen", ns)
    assert nim["metadata"]["ownerReferences"][0]["kind"] == "ModelDeployment"
    assert nim["spec"]["image"]["repository"] == "nvcr.io/nim/qwen/qwen2-0.5b-instruct"
    pair_lab.kube.apply(
        {
            **{k: nim[k] for k in ("apiVersion", "kind")},
            "metadata": {"name": "qwen", "namespace": ns},
            "status": {"state": "Ready"},
        },
        subresource="status",
    )
    ready = pair_lab.ok("model_deployment", name="qwen", namespace=ns, **nim_args)
    assert ready["status"]["phase"] == "Ready"

    dynamo = pair_lab.ok("model_deployment", name="qwen", namespace=ns, wait=False, **{**ONE_GPU, "engine": "dynamo"})
    assert dynamo["children"] == ["DynamoGraphDeployment/qwen"]
    assert dynamo["upstream_url"] == f"http://qwen-frontend.{ns}.svc:8000"
    assert pair_lab.kube.get(NIM_SERVICE, "qwen", ns) is None, "the NIMService was not pruned"

    vllm = pair_lab.ok("model_deployment", name="qwen", namespace=ns, **ONE_GPU)
    assert vllm["children"] == ["Deployment/qwen", "Service/qwen"]
    assert pair_lab.kube.get(DYNAMO_GRAPH, "qwen", ns) is None
    pair_lab.ok("model_deployment", name="qwen", namespace=ns, state="absent")


def test_crds_absent_removes_every_token_factory_object(pair_lab):
    ns = pair_lab.base_objects(pair_lab.namespace())
    planned = pair_lab.ok("crds", state="absent", check_mode=True)
    assert planned["changed"] is True
    assert pair_lab.kube.get(kinds.MODEL, "qwen", ns) is not None
    assert pair_lab.ok("crds", state="absent")["changed"] is True
    assert pair_lab.kube.get(k8s.CRD, "modeldeployments.tokenfactory.io") is None
    assert pair_lab.ok("crds", state="absent")["changed"] is False
    failed = pair_lab.run("model", name="qwen", namespace=ns, provider="hf", source="Qwen/Qwen2-0.5B-Instruct")
    assert (
        "CustomResourceDefinition models.tokenfactory.io is not installed; run tokenfactory.spark.crds" in failed["msg"]
    )
    pair_lab.ok("crds")
