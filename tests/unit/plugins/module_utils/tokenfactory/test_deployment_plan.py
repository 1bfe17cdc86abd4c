"""Options -> spec validation and placement/capacity planning of model_deployment (no cluster needed)."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import CapacityError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import (
    deployment_spec,
    service_name,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import plan_deployment as planner
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import inventory
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError

from tests.unit.plugins.module_utils.tokenfactory.samples import QWEN_05B, cluster, gb10, md_params

SINGLE = cluster(inventory([gb10("spark-1")]))


def plan_deployment(*args, **kwargs):
    return planner(*args, name="qwen", **kwargs)


PAIR = cluster(inventory([gb10("spark-1", "pair-a"), gb10("spark-2", "pair-a")]))


def test_full_spec_uses_the_gateway_field_names():
    spec = deployment_spec(
        md_params(
            tenants=["acme", "globex"],
            rate_limits={
                "per_key": {"requests_per_minute": 60, "tokens_per_minute": None},
                "per_tenant": None,
                "per_deployment": {"requests_per_minute": None, "tokens_per_minute": 1000000},
            },
            pricing={"currency": "USD", "input_per_1m": "0.15", "output_per_1m": "0.60"},
            env={"VLLM_LOGGING_LEVEL": "INFO"},
        )
    )
    assert spec["tenants"] == ["acme", "globex"]
    assert spec["rateLimits"] == {"perKey": {"requestsPerMinute": 60}, "perDeployment": {"tokensPerMinute": 1000000}}
    assert spec["pricing"] == {"currency": "USD", "inputPer1M": "0.15", "outputPer1M": "0.60"}
    assert spec["env"] == [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}]


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"extra_args": ["--max-model-len=4096"]}, "extra_args[0]", "set by the module from context_length"),
        ({"env": {"HF_TOKEN": "x"}}, "env.HF_TOKEN", "managed by the module"),
        ({"env": {"1BAD": "x"}}, "env.1BAD", "not a valid environment variable name"),
        ({"pricing": {"currency": "usd", "input_per_1m": "1", "output_per_1m": "1"}}, "pricing.currency", "ISO 4217"),
        (
            {"pricing": {"currency": "USD", "input_per_1m": "-1", "output_per_1m": "1"}},
            "pricing.input_per_1m",
            "decimal",
        ),
        (
            {"autoscaling": {"min_replicas": 3, "max_replicas": 2}},
            "autoscaling",
            "min_replicas 3 must be <= max_replicas 2",
        ),
        ({"resources": {"requests": {"cpu": "lots", "memory": None}}}, "resources.requests.cpu", "Kubernetes quantity"),
        ({"weights_volume_size": "10Mi"}, "weights_volume_size", "below the minimum 1Gi"),
        ({"tenants": ["acme", "acme"]}, "tenants", "more than once"),
        ({"tenants": ["Acme Corp"]}, "tenants[0]", "DNS-1123"),
        ({"replicas": 100}, "replicas", "allowed 0..64"),
        ({"upstream_url": "ftp://x"}, "upstream_url", "http:// or https://"),
    ],
)
def test_bad_options_name_the_field(overrides, field, fragment):
    with pytest.raises(ValidationError) as err:
        deployment_spec(md_params(**overrides))
    assert err.value.field == field
    assert fragment in str(err.value)


@pytest.mark.parametrize("name", ["9lives", "Qwen", "a" * 64, "qwen_2", "qwen-"])
def test_names_must_be_service_names(name):
    with pytest.raises(ValidationError, match=r"DNS-1035|must not end"):
        service_name("name", name)


def test_plan_for_one_spark():
    plan = plan_deployment(deployment_spec(md_params(context_length=8192)), QWEN_05B, SINGLE, [])
    assert plan["gpuMemoryUtilization"] == 0.75
    assert plan["contextLength"] == 8192
    assert plan["nodesPerReplica"] == 1
    assert plan["capacity"]["usableBytesPerGPU"] == int(119 * 2**30 * 0.75)
    assert plan["note"] == ""


def test_second_one_gpu_deployment_on_one_spark_fails_or_queues():
    other = {"spec": {"gpuType": "NVIDIA-GB10", "replicas": 1, "gpusPerReplica": 1}}
    spec = deployment_spec(md_params())
    with pytest.raises(CapacityError, match="1 allocatable and 1 already claimed"):
        plan_deployment(spec, QWEN_05B, SINGLE, [other])
    assert plan_deployment(spec, QWEN_05B, SINGLE, [other], {"onInsufficientGpus": "queue"})["note"].startswith(
        "queued:"
    )


def test_gpu_type_must_be_in_the_inventory():
    with pytest.raises(
        ValidationError, match="'NVIDIA-H100' is not in the inventory of ComputeCluster spark; available: NVIDIA-GB10"
    ):
        plan_deployment(deployment_spec(md_params(gpu_type="NVIDIA-H100")), QWEN_05B, SINGLE, [])


def test_context_longer_than_the_model_is_refused():
    with pytest.raises(ValidationError, match="65536 exceeds the model's maximum context length 32768"):
        plan_deployment(deployment_spec(md_params(context_length=65536)), QWEN_05B, SINGLE, [])


def test_two_gpus_need_a_fabric_pair():
    spec = deployment_spec(md_params(gpus_per_replica=2))
    with pytest.raises(ValidationError, match=r"needs 2 nodes sharing a tokenfactory\.io/fabric label"):
        plan_deployment(spec, QWEN_05B, SINGLE, [])
    plan = plan_deployment(spec, QWEN_05B, PAIR, [])
    assert (plan["nodesPerReplica"], plan["gpusPerPod"]) == (2, 1)
    with pytest.raises(ValidationError, match="exactly 1 replica"):
        plan_deployment(deployment_spec(md_params(gpus_per_replica=2, replicas=2)), QWEN_05B, PAIR, [])
