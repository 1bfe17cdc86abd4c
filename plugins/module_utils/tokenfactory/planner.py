# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The plan of a ModelDeployment, decided once before anything is written: GPU group, placement, replicas, sizing,
capacity, and (from its engine) the workload and child names.

The plan is one JSON object (PLAN_KEYS), persisted whole as `status.plan` with the spec generation it was made from
(`generation`). The module, the status keeper (services/status_keeper), status.py and every engine read it; none
re-decides a fact of it: gpus_per_replica goes option -> spec.gpusPerReplica -> plan (gpusPerReplica, gpusPerPod,
nodesPerReplica) -> pod."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import (
    check_fit,
    check_gpu_supply,
    estimate,
    resolve_utilization,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES, engine_of
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import FABRIC_LABEL


def gpu_group(spec, cluster):
    groups = {g["product"]: g for g in cluster.get("status", {}).get("gpus", [])}
    if spec["gpuType"] not in groups:
        available = ", ".join(sorted(groups)) or f"none (profile {cluster['spec'].get('profile')})"
        raise ValidationError(
            "gpu_type",
            f"{spec['gpuType']!r} is not in the inventory of ComputeCluster {cluster['metadata']['name']}; "
            f"available: {available}",
        )
    return groups[spec["gpuType"]]


# The facts of a plan, each decided here once; `generation` is the spec generation it was made from.
PLAN_KEYS = (
    "generation",
    "engine",
    "gpuType",
    "gpusPerReplica",
    "gpusPerPod",
    "nodesPerReplica",
    "replicas",
    "unifiedMemory",
    "arch",
    "servedName",
    "contextLength",
    "gpuMemoryUtilization",
    "capacity",
    "note",
    "policy",
    "workload",
    "children",
    "service",
)
# The module options that are not in the spec but decide the plan (the keeper replans with the stored ones).
DEFAULT_POLICY = {"onInsufficientGpus": "fail", "capacityCheck": True, "capacitySequences": 1}


def desired_replicas(spec):
    """The replicas a deployment asks for: the autoscaling minimum when it autoscales, else spec.replicas."""
    return spec["autoscaling"]["minReplicas"] if "autoscaling" in spec else spec["replicas"]


def claimed_gpus(md):
    """GPUs another ModelDeployment holds: from its persisted plan, else (never planned) from its spec."""
    plan = (md.get("status") or {}).get("plan")
    if plan:
        return plan["replicas"] * plan["gpusPerReplica"]
    return desired_replicas(md["spec"]) * md["spec"]["gpusPerReplica"]


def stored_plan(md):
    """The plan persisted in md's status (status.plan, with the generation it was made from), or None."""
    plan = (md.get("status") or {}).get("plan")
    return plan if plan and all(key in plan for key in PLAN_KEYS) else None


def is_current(md):
    """Whether md's persisted plan was made from its current spec generation."""
    plan = stored_plan(md)
    return plan is not None and plan["generation"] == md["metadata"].get("generation", 1)


def plan_deployment(spec, model_spec, cluster, others, policy=None, *, name, generation=1):
    """Placement and sizing decisions, each failing with an explanation before anything is written; policy is
    DEFAULT_POLICY's keys (the module's capacity options), generation the spec generation it is made for."""
    policy = {**DEFAULT_POLICY, **(policy or {})}
    sequences = policy["capacitySequences"]
    engine = engine_of(spec)
    group = gpu_group(spec, cluster)
    architecture = model_spec["architecture"]
    context = spec.get("contextLength", architecture["maxContextLength"])
    if context > architecture["maxContextLength"]:
        raise ValidationError(
            "context_length", f"{context} exceeds the model's maximum context length {architecture['maxContextLength']}"
        )
    gpus = spec["gpusPerReplica"]
    per_node = max(group.get("gpusPerNode", 1), 1)
    nodes_per_replica = -(-gpus // per_node)
    if nodes_per_replica > 1:
        _check_multinode(spec, engine, group, gpus, per_node, nodes_per_replica, cluster)
    utilization = resolve_utilization(spec.get("gpuMemoryUtilization"), group["unifiedMemory"], group["product"])
    needs = estimate(architecture, context, sequences, gpus, spec.get("kvCacheDtype", "auto"))
    plan = {
        "generation": generation,
        "engine": engine.NAME,
        "gpuType": group["product"],
        "gpusPerReplica": gpus,
        "replicas": desired_replicas(spec),
        "unifiedMemory": group["unifiedMemory"],
        "arch": group.get("arch", "arm64"),
        "policy": policy,
        "servedName": model_spec["servedName"],
        "contextLength": context,
        "gpuMemoryUtilization": utilization,
        "gpusPerPod": min(gpus, per_node),
        "nodesPerReplica": nodes_per_replica,
        "capacity": dict(needs),
        "note": "",
    }
    if policy["capacityCheck"]:
        memory = group.get("memoryBytesPerGPU")
        if not memory:
            raise ValidationError(
                "gpu_type",
                f"GPU memory of {group['product']} is unknown (no nvidia.com/gpu.memory node label); "
                "label the nodes or set capacity_check=false",
            )
        usable = check_fit(
            needs, memory, utilization, group["product"], group["unifiedMemory"], context, sequences, gpus
        )
        plan["capacity"]["usableBytesPerGPU"] = usable
        wanted = plan["replicas"] * gpus
        committed = sum(claimed_gpus(o) for o in others if o["spec"].get("gpuType") == group["product"])
        plan["note"] = check_gpu_supply(
            group["product"], wanted, group["allocatable"], committed, policy["onInsufficientGpus"]
        )
    plan.update(engine.layout(spec, plan, name))
    return plan


def _check_multinode(spec, engine, group, gpus, per_node, nodes_per_replica, cluster):
    where = f"{gpus} GPUs span {nodes_per_replica} {group['product']} nodes ({per_node} GPU(s) each)"
    if gpus % per_node:
        raise ValidationError("gpus_per_replica", f"{where}: must be a multiple of {per_node}")
    if not engine.MULTINODE:
        multinode = ", ".join(sorted(e.NAME for e in ENGINES.values() if e.MULTINODE))
        raise ValidationError(
            "gpus_per_replica", f"{where}: multi-node replicas are rendered for engine {multinode} only"
        )
    if spec["replicas"] != 1 or "autoscaling" in spec:
        raise ValidationError("replicas", f"{where}: a multi-node deployment has exactly 1 replica and no autoscaling")
    nodes = cluster["status"].get("nodes", [])
    per_fabric = {}
    for node in nodes:
        if node.get("gpuProduct") == group["product"] and node.get("fabric") and node.get("ready"):
            per_fabric.setdefault(node["fabric"], []).append(node["name"])
    if not any(len(members) >= nodes_per_replica for members in per_fabric.values()):
        found = ", ".join(f"{f}: {len(m)} node(s)" for f, m in sorted(per_fabric.items())) or "none"
        raise ValidationError(
            "gpus_per_replica",
            f"{where}: needs {nodes_per_replica} nodes sharing a {FABRIC_LABEL} label (found {found})",
        )
