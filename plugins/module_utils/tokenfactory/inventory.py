# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""GPU/CPU inventory of a cluster from node labels and capacity (GPU feature discovery labels)."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.objects import conditions
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import parse_quantity

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
FABRIC_LABEL = "tokenfactory.io/fabric"
# GPUs whose memory is the node's LPDDR (no separate HBM): usable GPU memory = node memory.
UNIFIED_MEMORY_PRODUCTS = frozenset({"NVIDIA-GB10"})
# Peak memory bandwidth in GB/s (NVIDIA data sheets), by nvidia.com/gpu.product: the decode-rate bound.
MEMORY_BANDWIDTH_GBPS = {
    "NVIDIA-GB10": 273,
    "NVIDIA-H100-80GB-HBM3": 3350,
    "NVIDIA-A100-SXM4-80GB": 2039,
    "NVIDIA-L40S": 864,
}


def _int_label(labels, key):
    try:
        return int(labels[key])
    except (KeyError, ValueError):
        return None


def _ready(node):
    for condition in conditions(node):
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_entry(node):
    labels = node["metadata"].get("labels", {})
    status = node.get("status", {})
    capacity, allocatable = status.get("capacity", {}), status.get("allocatable", {})
    product = labels.get(PRODUCT_LABEL)
    gpu_count = int(capacity.get(GPU_RESOURCE, "0"))
    memory_bytes = int(parse_quantity("node memory", capacity.get("memory", "0")))
    unified = product in UNIFIED_MEMORY_PRODUCTS
    gpu_memory = None
    if gpu_count and unified:
        gpu_memory = memory_bytes // gpu_count
    elif gpu_count and _int_label(labels, "nvidia.com/gpu.memory"):
        gpu_memory = _int_label(labels, "nvidia.com/gpu.memory") * 2**20
    major, minor = (
        _int_label(labels, "nvidia.com/gpu.compute.major"),
        _int_label(labels, "nvidia.com/gpu.compute.minor"),
    )
    entry = {
        "name": node["metadata"]["name"],
        "arch": labels.get("kubernetes.io/arch", "unknown"),
        "ready": _ready(node),
        "gpuProduct": product if gpu_count else None,
        "gpuFamily": labels.get("nvidia.com/gpu.family") if gpu_count else None,
        "gpuCount": gpu_count,
        "gpuAllocatable": int(allocatable.get(GPU_RESOURCE, "0")),
        "computeCapability": f"{major}.{minor}" if gpu_count and major is not None and minor is not None else None,
        "gpuMemoryBytes": gpu_memory,
        "unifiedMemory": unified if gpu_count else False,
        "cpuMillicores": int(parse_quantity("node cpu", allocatable.get("cpu", "0")) * 1000),
        "memoryBytes": memory_bytes,
        "fabric": labels.get(FABRIC_LABEL),
    }
    return {k: v for k, v in entry.items() if v is not None}


def gpu_groups(nodes):
    """One entry per GPU product over ready nodes: counts, memory per GPU, nodes, fabrics."""
    groups = {}
    for node in nodes:
        product = node.get("gpuProduct")
        if not product or not node["ready"]:
            continue
        group = groups.setdefault(
            product,
            {
                "product": product,
                "family": node.get("gpuFamily"),
                "computeCapability": node.get("computeCapability"),
                "arch": node["arch"],
                "count": 0,
                "allocatable": 0,
                "gpusPerNode": node["gpuCount"],
                "memoryBytesPerGPU": node.get("gpuMemoryBytes"),
                "unifiedMemory": node["unifiedMemory"],
                "nodes": [],
                "fabrics": [],
            },
        )
        group["count"] += node["gpuCount"]
        group["allocatable"] += node["gpuAllocatable"]
        group["gpusPerNode"] = min(group["gpusPerNode"], node["gpuCount"])
        if node.get("gpuMemoryBytes") is not None:
            current = group["memoryBytesPerGPU"]
            group["memoryBytesPerGPU"] = (
                node["gpuMemoryBytes"] if current is None else min(current, node["gpuMemoryBytes"])
            )
        group["nodes"].append(node["name"])
        if node.get("fabric") and node["fabric"] not in group["fabrics"]:
            group["fabrics"].append(node["fabric"])
    return [{k: v for k, v in g.items() if v is not None} for g in sorted(groups.values(), key=lambda g: g["product"])]


def inventory(nodes):
    entries = sorted((node_entry(n) for n in nodes), key=lambda e: e["name"])
    return {
        "nodes": entries,
        "gpus": gpu_groups(entries),
        "totals": {
            "nodes": len(entries),
            "readyNodes": sum(1 for e in entries if e["ready"]),
            "gpus": sum(e["gpuAllocatable"] for e in entries if e["ready"]),
            "cpuMillicores": sum(e["cpuMillicores"] for e in entries),
            "memoryBytes": sum(e["memoryBytes"] for e in entries),
        },
    }
