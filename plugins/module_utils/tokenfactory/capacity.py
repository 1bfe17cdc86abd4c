# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Will a model fit? Weights + KV cache + runtime overhead per GPU against the usable GPU memory.

Policy (docs/modules.md): the engine must hold the weights (split over the replica's GPUs) and the
KV cache for `sequences` full-length sequences (vLLM refuses to start otherwise), plus a fixed runtime
overhead per GPU, within gpu_memory_utilization x GPU memory. On unified-memory GPUs (GB10) the GPU
memory is the node's memory, shared with the OS, so the utilization defaults lower and is capped.
"""

from __future__ import annotations

from decimal import Decimal

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import DTYPES

GIB = 2**30
BYTES_PER_PARAMETER = {dtype: Decimal(size) for dtype, size in DTYPES.items()}
# CUDA context, activations, CUDA graphs, sampler buffers: measured vLLM footprints are 1-3 GiB.
RUNTIME_OVERHEAD_BYTES = 2 * GIB
DEFAULT_UTILIZATION = {"discrete": 0.90, "unified": 0.75}
MAX_UTILIZATION = {"discrete": 0.95, "unified": 0.85}

# Architecture facts of a few well-known models (from their config.json): the model module's fallback when it
# cannot reach the model's files (model_architecture.py); any other model's facts are derived from its files.
KNOWN_ARCHITECTURES = {
    "Qwen/Qwen2-0.5B-Instruct": ("0.494", 24, 2, 64, 32768, "bfloat16"),
    "Qwen/Qwen2.5-7B-Instruct": ("7.62", 28, 4, 128, 32768, "bfloat16"),
    "meta-llama/Llama-3.1-8B-Instruct": ("8.03", 32, 8, 128, 131072, "bfloat16"),
    "meta-llama/Llama-3.3-70B-Instruct": ("70.6", 80, 8, 128, 131072, "bfloat16"),
    "nvidia/Llama-3.3-70B-Instruct-FP4": ("70.6", 80, 8, 128, 131072, "nvfp4"),
}


class CapacityError(Exception):
    """The deployment cannot fit; the message explains the arithmetic and what to change."""


def known_architecture(source):
    facts = KNOWN_ARCHITECTURES.get(source)
    if facts is None:
        return None
    keys = ("parametersBillions", "numLayers", "numKVHeads", "headDim", "maxContextLength", "dtype")
    return dict(zip(keys, facts, strict=True))


def gib(amount):
    return f"{Decimal(amount) / GIB:.1f} GiB"


def memory_kind(unified):
    return "unified" if unified else "discrete"


def weights_bytes(architecture):
    parameters = Decimal(architecture["parametersBillions"]) * 10**9
    return int(parameters * BYTES_PER_PARAMETER[architecture["dtype"]])


def kv_bytes_per_token(architecture, kv_cache_dtype="auto"):
    element = 1 if kv_cache_dtype == "fp8" else (4 if architecture["dtype"] == "float32" else 2)
    return 2 * architecture["numLayers"] * architecture["numKVHeads"] * architecture["headDim"] * element


def estimate(architecture, context_length, sequences=1, gpus_per_replica=1, kv_cache_dtype="auto"):
    """Bytes needed on each GPU of one replica (tensor parallel splits weights and KV evenly)."""
    weights = weights_bytes(architecture)
    kv = kv_bytes_per_token(architecture, kv_cache_dtype) * context_length * sequences
    per_gpu_weights = -(-weights // gpus_per_replica)
    per_gpu_kv = -(-kv // gpus_per_replica)
    return {
        "weightsBytes": weights,
        "kvCacheBytes": kv,
        "weightsBytesPerGPU": per_gpu_weights,
        "kvCacheBytesPerGPU": per_gpu_kv,
        "overheadBytesPerGPU": RUNTIME_OVERHEAD_BYTES,
        "requiredBytesPerGPU": per_gpu_weights + per_gpu_kv + RUNTIME_OVERHEAD_BYTES,
    }


def resolve_utilization(requested, unified, gpu_type):
    """The --gpu-memory-utilization to use: the default for the memory kind, or the requested value if safe."""
    kind = memory_kind(unified)
    if requested is None:
        return DEFAULT_UTILIZATION[kind]
    ceiling = MAX_UTILIZATION[kind]
    if not 0.05 <= requested <= ceiling:
        why = " (unified memory is shared with the OS and kubelet)" if unified else ""
        raise CapacityError(
            f"gpu_memory_utilization: {requested} is not allowed on {gpu_type}{why}; allowed 0.05..{ceiling}"
        )
    return requested


def check_fit(needs, gpu_memory_bytes, utilization, gpu_type, unified, context_length, sequences, gpus_per_replica):
    """Return the usable bytes per GPU, or raise CapacityError explaining why the model does not fit."""
    usable = int(gpu_memory_bytes * utilization)
    if needs["requiredBytesPerGPU"] <= usable:
        return usable
    memory = "unified memory shared with the OS" if unified else "GPU memory"
    raise CapacityError(
        f"capacity: the model does not fit on {gpu_type}: each of the {gpus_per_replica} GPU(s) of a replica needs "
        f"{gib(needs['requiredBytesPerGPU'])} (weights {gib(needs['weightsBytesPerGPU'])} + KV cache for "
        f"{sequences} x {context_length} tokens {gib(needs['kvCacheBytesPerGPU'])} + runtime overhead "
        f"{gib(needs['overheadBytesPerGPU'])}) but only {gib(usable)} is usable "
        f"({utilization} x {gib(gpu_memory_bytes)} {memory}). Lower context_length, use a smaller or quantized "
        f"model (dtype fp8/nvfp4), kv_cache_dtype fp8, or raise gpus_per_replica."
    )


def check_gpu_supply(gpu_type, wanted, allocatable, committed, policy):
    """GPUs of gpu_type: allocatable in the cluster minus those other ModelDeployments already claim.

    policy 'fail' refuses the deployment; 'queue' accepts it and its pods stay Pending until GPUs free up.
    Returns a note for the status message ('' when it fits).
    """
    free = allocatable - committed
    if wanted <= free:
        return ""
    detail = (
        f"needs {wanted} x {gpu_type} but the compute cluster has {allocatable} allocatable and "
        f"{committed} already claimed by other ModelDeployments ({max(free, 0)} free)"
    )
    if policy == "queue":
        return f"queued: {detail}; pods stay Pending until GPUs are released"
    raise CapacityError(
        f"capacity: {detail}. Delete or scale down another ModelDeployment, add nodes, "
        f"or set on_insufficient_gpus=queue to accept it and wait in Pending."
    )
