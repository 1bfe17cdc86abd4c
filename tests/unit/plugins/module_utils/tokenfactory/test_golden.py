"""Rendered workloads and CRDs are compared with golden files, so a refactoring cannot change them unnoticed.

An intended change to a rendered object: rerun with TF_WRITE_GOLDEN=1, review the diff of golden/*.json, commit it.
"""

import json
import os
import pathlib

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.crds import all_crds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import render, upstream_url
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import inventory
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B, cluster, gb10, h100, md_params

GOLDEN = pathlib.Path(__file__).parent / "golden"
SINGLE = cluster(inventory([gb10("spark-1")]))
PAIR = cluster(inventory([gb10("spark-1", "pair-a"), gb10("spark-2", "pair-a")]))
H100 = cluster(inventory([h100("h100-1")]))
HF = {"spec": {"type": "huggingface", "credentialsSecret": {"name": "hf-credentials", "key": "token"}}}
NGC = {"spec": {"type": "ngc", "credentialsSecret": {"name": "ngc-key", "key": "NGC_API_KEY"}}}
S3 = {"spec": {"type": "s3", "credentialsSecret": {"name": "s3-creds", "key": "secret"}}}
S3_MODEL = {**QWEN_05B, "source": "s3://weights/qwen2", "revision": "v1"}
EVERY_OPTION = {
    "context_length": 8192,
    "prefix_caching": False,
    "kv_cache_dtype": "fp8",
    "extra_args": ["--enforce-eager"],
    "env": {"VLLM_LOGGING_LEVEL": "DEBUG", "A_VAR": "1"},
    "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": None, "memory": "32Gi"}},
    "weights_volume_size": "80Gi",
    "image": "registry.local/vllm",
    "version": "0.11.0",
    "gpu_memory_utilization": 0.6,
    "tenants": ["acme"],
    "rate_limits": {
        "per_key": {"requests_per_minute": 60, "tokens_per_minute": None},
        "per_tenant": None,
        "per_deployment": None,
    },
    "pricing": {"currency": "EUR", "input_per_1m": "0.1", "output_per_1m": "0.2"},
}
SCENARIOS = {
    "vllm-default": ({}, QWEN_05B, HF, SINGLE),
    "vllm-no-credentials": ({"context_length": 4096}, QWEN_05B, None, SINGLE),
    "vllm-options": (EVERY_OPTION, {**QWEN_05B, "revision": "main"}, HF, SINGLE),
    "vllm-autoscaling-budget": (
        {
            "autoscaling": {"min_replicas": 1, "max_replicas": 1, "target_waiting_requests": 2},
            "disruption_budget": {"min_available": 1},
        },
        QWEN_05B,
        HF,
        SINGLE,
    ),
    "vllm-s3": ({}, S3_MODEL, S3, SINGLE),
    "vllm-h100-tp4": ({"gpus_per_replica": 4, "gpu_type": "NVIDIA-H100-80GB-HBM3", "replicas": 2}, QWEN_05B, HF, H100),
    "vllm-multinode": ({"gpus_per_replica": 2, "context_length": 8192}, QWEN_05B, HF, PAIR),
    "vllm-multinode-budget": ({"gpus_per_replica": 2, "disruption_budget": {"min_available": 1}}, QWEN_05B, HF, PAIR),
    "vllm-upstream-url": ({"upstream_url": "http://engine.example:8000/v1/"}, QWEN_05B, HF, SINGLE),
    "nim": (
        {"engine": "nim", "image": "nvcr.io/nim/qwen/qwen2", "version": "1.0", "env": {"NIM_LOG_LEVEL": "INFO"}},
        QWEN_05B,
        NGC,
        SINGLE,
    ),
    "nim-default-image-autoscaling": (
        {"engine": "nim", "autoscaling": {"min_replicas": 1, "max_replicas": 1}},
        QWEN_05B,
        None,
        SINGLE,
    ),
    "dynamo": (
        {"engine": "dynamo", "extra_args": ["--enforce-eager"], "env": {"DYN_LOG": "debug"}},
        QWEN_05B,
        HF,
        SINGLE,
    ),
    "dynamo-no-credentials": ({"engine": "dynamo", "context_length": 2048}, QWEN_05B, None, SINGLE),
}


def rendered(overrides, model, provider, compute_cluster):
    spec = deployment_spec(md_params(**overrides))
    plan = plan_deployment(spec, model, compute_cluster, [], name="qwen")
    md = {
        "apiVersion": "tokenfactory.io/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen", "namespace": "tf", "uid": "1234", "generation": 3},
        "spec": spec,
    }
    children = render(md, model, provider, plan)
    assert [f"{c['kind']}/{c['metadata']['name']}" for c in children] == plan["children"], "plan and render agree"
    return {"spec": spec, "children": children, "upstreamURL": upstream_url(md, plan)}


def compare(name, actual):
    path = GOLDEN / f"{name}.json"
    text = json.dumps(actual, indent=1, sort_keys=True) + "\n"
    if os.environ.get("TF_WRITE_GOLDEN"):
        path.write_text(text)
    assert json.loads(text) == json.loads(path.read_text()), f"{name} differs from {path} (TF_WRITE_GOLDEN=1 rewrites)"


def test_rendered_workloads_match_the_golden_file():
    compare("rendered", {name: rendered(*scenario) for name, scenario in SCENARIOS.items()})


def test_crds_match_the_golden_file():
    compare("crds", all_crds())
