"""Node and object samples shaped like the lab's simulated GB10 / H100 nodes (for unit tests only)."""

import copy

GB10_LABELS = {
    "kubernetes.io/arch": "arm64",
    "nvidia.com/gpu.product": "NVIDIA-GB10",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/gpu.family": "blackwell",
    "nvidia.com/gpu.compute.major": "12",
    "nvidia.com/gpu.compute.minor": "1",
}


def node(name, labels, gpus=1, memory="119Gi", cpu="20", ready=True):
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def gb10(name, fabric=None):
    labels = dict(GB10_LABELS)
    if fabric:
        labels["tokenfactory.io/fabric"] = fabric
    return node(name, labels)


def h100(name):
    labels = {
        "kubernetes.io/arch": "amd64",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.memory": "81559",
    }
    return node(name, labels, gpus=8, memory="2Ti", cpu="224")


QWEN_05B = {
    "provider": "huggingface",
    "source": "Qwen/Qwen2-0.5B-Instruct",
    "servedName": "Qwen/Qwen2-0.5B-Instruct",
    "architecture": {
        "parametersBillions": "0.494",
        "numLayers": 24,
        "numKVHeads": 2,
        "headDim": 64,
        "maxContextLength": 32768,
        "dtype": "bfloat16",
    },
}


def cluster(inventory, name="spark", profile="gpu"):
    return {"metadata": {"name": name}, "spec": {"profile": profile}, "status": copy.deepcopy(inventory)}


def md_params(**overrides):
    """Module options of model_deployment with the module's defaults."""
    params = {
        "model": "qwen",
        "endpoint": "public",
        "engine": "vllm",
        "image": None,
        "version": None,
        "replicas": 1,
        "gpus_per_replica": 1,
        "gpu_type": "NVIDIA-GB10",
        "resources": None,
        "weights_volume_size": "50Gi",
        "context_length": None,
        "gpu_memory_utilization": None,
        "kv_cache_dtype": "auto",
        "prefix_caching": True,
        "extra_args": [],
        "env": {},
        "autoscaling": None,
        "disruption_budget": None,
        "tenants": [],
        "rate_limits": None,
        "pricing": None,
        "upstream_url": None,
    }
    params.update(overrides)
    return params
