"""Bad input against the real API server: each case fails with a message naming the field (and what is
allowed) and leaves the namespace exactly as it was (nothing half-created)."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s import client as k8s
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from tests.modules.lab_helpers import self_signed, snapshot

pytestmark = pytest.mark.lab

CERT, KEY = self_signed("llm.example.com")
OTHER_CERT = self_signed("llm.example.com")[0]
MD = {"name": "qwen", "model": "qwen", "endpoint": "public", "gpu_type": "NVIDIA-GB10", "context_length": 4096}
EP = {"name": "edge", "hostname": "edge.example.com", "compute_cluster": "spark"}
MODEL = {"name": "other", "provider": "hf", "source": "Qwen/Qwen2-0.5B-Instruct"}

CASES = [
    ("model_deployment", {**MD, "engine": "tgi"}, "value of engine must be one of: vllm, nim, dynamo, got: tgi"),
    (
        "model_deployment",
        {**MD, "gpu_type": "NVIDIA-H100"},
        "gpu_type: 'NVIDIA-H100' is not in the inventory of ComputeCluster spark; available: NVIDIA-GB10",
    ),
    (
        "model_deployment",
        {**MD, "model": "missing"},
        "model: Model 'missing' not found in namespace {ns} (existing: qwen)",
    ),
    (
        "model_deployment",
        {**MD, "endpoint": "nope"},
        "endpoint: Endpoint 'nope' not found in namespace {ns} (existing: public)",
    ),
    (
        "model_deployment",
        {**MD, "context_length": 65536},
        "context_length: 65536 exceeds the model's maximum context length 32768",
    ),
    (
        "model_deployment",
        {**MD, "gpu_memory_utilization": 0.95},
        "gpu_memory_utilization: 0.95 is not allowed on NVIDIA-GB10 "
        "(unified memory is shared with the OS and kubelet); allowed 0.05..0.85",
    ),
    (
        "model_deployment",
        {**MD, "extra_args": ["--max-model-len", "4096"]},
        "extra_args[0]: --max-model-len is set by the module from context_length",
    ),
    ("model_deployment", {**MD, "env": {"HF_TOKEN": "x"}}, "env.HF_TOKEN: is managed by the module"),
    (
        "model_deployment",
        {**MD, "pricing": {"currency": "usd", "input_per_1m": "1", "output_per_1m": "2"}},
        "pricing.currency: 'usd' must be an ISO 4217 code in capitals",
    ),
    (
        "model_deployment",
        {**MD, "pricing": {"input_per_1m": "cheap", "output_per_1m": "2"}},
        "pricing.input_per_1m: 'cheap' must be a non-negative decimal",
    ),
    (
        "model_deployment",
        {**MD, "autoscaling": {"min_replicas": 3, "max_replicas": 2}},
        "autoscaling: min_replicas 3 must be <= max_replicas 2",
    ),
    ("model_deployment", {**MD, "name": "Qwen_Model"}, "name: 'Qwen_Model' must be a DNS-1035 label"),
    (
        "model_deployment",
        {**MD, "replicas": 2},
        "capacity: needs 2 x NVIDIA-GB10 but the compute cluster has 1 allocatable and 0 already claimed",
    ),
    (
        "model_deployment",
        {**MD, "gpus_per_replica": 2},
        "gpus_per_replica: 2 GPUs span 2 NVIDIA-GB10 nodes (1 GPU(s) each): "
        "needs 2 nodes sharing a tokenfactory.io/fabric label (found none)",
    ),
    (
        "model_deployment",
        {**MD, "resources": {"requests": {"memory": "lots"}}},
        "resources.requests.memory: 'lots' is not a Kubernetes quantity",
    ),
    (
        "model_deployment",
        {**MD, "rate_limits": {"per_key": {"requests_per_minute": 1_000_000_001}}},
        "rate_limits.per_key.requests_per_minute: 1000000001 is out of range; allowed 0..1000000000 per minute "
        "(0 = unlimited)",
    ),
    ("model_deployment", {**MD, "tenants": ["Acme Corp"]}, "tenants[0]: 'Acme Corp' is not a DNS-1123 name"),
    (
        "model_deployment",
        {k: v for k, v in MD.items() if k != "gpu_type"},
        "state is present but all of the following are missing: gpu_type",
    ),
    (
        "model_deployment",
        {**MD, "upstream_url": "ftp://engine"},
        "upstream_url: 'ftp://engine' must be an http:// or https:// URL",
    ),
    (
        "model_deployment",
        {**MD, "disruption_budget": {"min_available": 3}},
        "disruption_budget.min_available: 3 exceeds replicas 1",
    ),
    (
        "model_deployment",
        {**MD, "kv_cache_dtype": "fp4"},
        "value of kv_cache_dtype must be one of: auto, fp8, got: fp4",
    ),
    ("model_deployment", {**MD, "weights_volume_size": "1Mi"}, "weights_volume_size: 1Mi is below the minimum 1Gi"),
    (
        "model_deployment",
        {**MD, "engine": "nim"},
        "crds: CustomResourceDefinition nimservices.apps.nvidia.com is not installed; "
        "engine nim needs the NVIDIA NIM Operator",
    ),
    (
        "model",
        {**MODEL, "source": "s3://bucket/x"},
        "source: 's3://bucket/x' is not a Hugging Face repo id like Qwen/Qwen2-0.5B-Instruct "
        "(provider type huggingface)",
    ),
    ("model", {**MODEL, "provider": "ngc"}, "provider: Provider 'ngc' not found in namespace {ns} (existing: hf)"),
    (
        "model",
        {
            **MODEL,
            "architecture": {
                "parameters_billions": "1",
                "num_layers": 2,
                "num_kv_heads": 2,
                "head_dim": 64,
                "max_context_length": 512,
                "dtype": "fp16",
            },
        },
        "value of dtype must be one of: float32, bfloat16, float16, fp8, nvfp4, int4, got: fp16 found in architecture",
    ),
    (
        "model",
        {**MODEL, "served_name": "bad name!"},
        "served_name: 'bad name!' may contain only letters, digits and . _ / : -",
    ),
    (
        "endpoint",
        {**EP, "tls_cert": "not a certificate", "tls_key": KEY},
        "tls_cert: is not PEM; expected a block starting with '-----BEGIN CERTIFICATE-----'",
    ),
    ("endpoint", {**EP, "tls_cert": OTHER_CERT, "tls_key": KEY}, "tls_key: does not match the public key of tls_cert"),
    (
        "endpoint",
        {**EP, "compute_cluster": "dgx"},
        "compute_cluster: ComputeCluster 'dgx' not found in namespace {ns} (existing: spark)",
    ),
    ("endpoint", {**EP, "hostname": "llm"}, "hostname: 'llm' must be a fully qualified DNS name like llm.example.com"),
    ("endpoint", {**EP, "tls_cert": CERT}, "parameters are required together: tls_cert, tls_key"),
    (
        "endpoint",
        {**EP, "tls_secret": "missing-tls"},
        "tls_secret: Secret 'missing-tls' not found; a kubernetes.io/tls Secret is required",
    ),
    (
        "endpoint",
        {**EP, "external_url": "llm.example.com"},
        "external_url: 'llm.example.com' must be an http:// or https:// URL",
    ),
    ("provider", {"name": "gh", "type": "github"}, "value of type must be one of: huggingface, ngc, s3, got: github"),
    (
        "provider",
        {"name": "gh", "type": "ngc", "token": "nvapi-123", "credentials_secret": "ngc-key"},
        "parameters are mutually exclusive: token|credentials_secret",
    ),
    (
        "provider",
        {"name": "gh", "type": "ngc", "credentials_secret": "nope"},
        "credentials_secret: Secret 'nope' not found in namespace {ns}",
    ),
    ("provider", {"name": "Bad_Name", "type": "ngc"}, "name: 'Bad_Name' is not a DNS-1123 name"),
    (
        "compute_cluster",
        {"name": "x86", "node_selector": {"kubernetes.io/arch": "amd64"}},
        "node_selector: no node matches {{'kubernetes.io/arch': 'amd64'}}",
    ),
    ("compute_cluster", {"name": "x86", "profile": "tpu"}, "value of profile must be one of: gpu, cpu, got: tpu"),
    (
        "model",
        {"name": "qwen", "state": "absent"},
        "state: Model 'qwen' is still used by ModelDeployment(s) live; delete those first",
    ),
]


@pytest.fixture(scope="module")
def bad_input_namespace(tf_lab):
    """Base objects plus one running deployment ('live', 1 GPU claimed) in its own namespace... on a 1-GPU lab
    that would make every capacity message depend on it, so 'live' runs with capacity_check off and 0 replicas."""
    namespace = tf_lab.base_objects(tf_lab.namespace())
    tf_lab.ok(
        "model_deployment",
        name="live",
        namespace=namespace,
        model="qwen",
        endpoint="public",
        gpu_type="NVIDIA-GB10",
        replicas=0,
        context_length=4096,
        wait=False,
    )
    yield namespace
    tf_lab.ok("model_deployment", name="live", namespace=namespace, state="absent")


def test_there_are_at_least_25_distinct_cases():
    assert len({case[2] for case in CASES}) == len(CASES) >= 25


@pytest.mark.parametrize(("module", "args", "message"), CASES, ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)])
def test_bad_input_fails_clearly_and_changes_nothing(tf_lab, bad_input_namespace, module, args, message):
    namespace = bad_input_namespace
    before = snapshot(tf_lab.kube, namespace)
    result = tf_lab.run(module, namespace=namespace, **args)
    assert result.get("failed") is True, result
    assert message.format(ns=namespace) in result["msg"]
    assert result.get("changed", False) is False
    assert snapshot(tf_lab.kube, namespace) == before, "a failed run changed the cluster"


@pytest.mark.parametrize(
    ("spec_patch", "server_message"),
    [
        ({"engine": "tgi"}, 'spec.engine: Unsupported value: "tgi"'),
        ({"autoscaling": {"minReplicas": 3, "maxReplicas": 2}}, "minReplicas must be <= maxReplicas"),
        ({"pricing": {"currency": "USD", "inputPer1M": "free", "outputPer1M": "1"}}, "spec.pricing.inputPer1M"),
        ({"rateLimits": {"perKey": {"requestsPerMinute": 1_000_000_001}}}, "spec.rateLimits.perKey.requestsPerMinute"),
        ({"colour": "blue"}, ".spec.colour: field not declared in schema"),
    ],
)
def test_crd_schema_rejects_bad_objects_written_directly(tf_lab, bad_input_namespace, spec_patch, server_message):
    """Objects written without the modules (kubectl, GitOps) are validated by the CRD's OpenAPI schema."""
    spec = {
        "model": "qwen",
        "endpoint": "public",
        "engine": "vllm",
        "replicas": 1,
        "gpusPerReplica": 1,
        "gpuType": "NVIDIA-GB10",
        **spec_patch,
    }
    body = {
        "apiVersion": "tokenfactory.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "direct", "namespace": bad_input_namespace},
        "spec": spec,
    }
    with pytest.raises(k8s.K8sError) as err:
        tf_lab.kube.apply(body)
    assert err.value.status in (422, 500)  # SSA reports undeclared fields while building the typed patch
    assert server_message in str(err.value)
    assert tf_lab.kube.get(kinds.MODEL_DEPLOYMENT, "direct", bad_input_namespace) is None
