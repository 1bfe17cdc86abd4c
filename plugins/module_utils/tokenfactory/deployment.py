# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""ModelDeployment logic without I/O: options -> spec, placement + capacity plan, observed status."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import (
    check_fit,
    check_gpu_supply,
    estimate,
    resolve_utilization,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import conditions
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.render import (
    MANAGED_VLLM_FLAGS,
    RESERVED_ENV,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    env_name,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import FIELDS
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import check_value, kind_fields

DNS_1035 = "abcdefghijklmnopqrstuvwxyz"


def service_name(field, value):
    """The name becomes a Service name: DNS-1035 label (starts with a letter, <= 63)."""
    if len(value) > 63 or value[:1] not in DNS_1035 or not value.replace("-", "").isalnum() or value != value.lower():
        raise ValidationError(
            field, f"{value!r} must be a DNS-1035 label (lowercase letters, digits, '-', start with a letter, <= 63)"
        )
    if value.endswith("-"):
        raise ValidationError(field, f"{value!r} must not end with '-'")
    return value


def _extra_args(args):
    args = check_value("extra_args", FIELDS["ModelDeployment"]["extra_args"], args)
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in MANAGED_VLLM_FLAGS:
            raise ValidationError(
                f"extra_args[{index}]",
                f"{flag} is set by the module from {MANAGED_VLLM_FLAGS[flag]}; remove it from extra_args",
            )
    return args


def _env(env):
    out = []
    for key in sorted(env):
        env_name(f"env.{key}", key)
        if key in RESERVED_ENV:
            raise ValidationError(
                f"env.{key}", f"is managed by the module (reserved: {', '.join(sorted(RESERVED_ENV))})"
            )
        out.append({"name": key, "value": str(env[key])})
    return out


def deployment_spec(params):
    """Validated ModelDeployment spec from module options (ValidationError names the option)."""
    spec = kind_fields("ModelDeployment", params, skip=("extra_args", "env"))
    spec["extraArgs"] = _extra_args(params["extra_args"])
    spec["env"] = _env(params["env"])
    if len(set(spec["tenants"])) != len(spec["tenants"]):
        raise ValidationError("tenants", "lists a tenant more than once")
    scaling = spec.get("autoscaling")
    if scaling and scaling["minReplicas"] > scaling["maxReplicas"]:
        raise ValidationError(
            "autoscaling", f"min_replicas {scaling['minReplicas']} must be <= max_replicas {scaling['maxReplicas']}"
        )
    budget = spec.get("disruptionBudget")
    if budget and budget["minAvailable"] > max(spec["replicas"], (scaling or {}).get("minReplicas", 0)):
        raise ValidationError(
            "disruption_budget.min_available", f"{budget['minAvailable']} exceeds replicas {spec['replicas']}"
        )
    return spec


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


def claimed_gpus(md):
    spec = md.get("spec", {})
    replicas = spec.get("autoscaling", {}).get("minReplicas", spec.get("replicas", 0))
    return replicas * spec.get("gpusPerReplica", 0)


def plan_deployment(spec, model_spec, cluster, others, on_insufficient_gpus, capacity_check=True, sequences=1):
    """Placement and sizing decisions, each failing with an explanation before anything is written."""
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
        _check_multinode(spec, group, gpus, per_node, nodes_per_replica, cluster)
    utilization = resolve_utilization(spec.get("gpuMemoryUtilization"), group["unifiedMemory"], group["product"])
    needs = estimate(architecture, context, sequences, gpus, spec.get("kvCacheDtype", "auto"))
    plan = {
        "contextLength": context,
        "gpuMemoryUtilization": utilization,
        "gpusPerPod": min(gpus, per_node),
        "nodesPerReplica": nodes_per_replica,
        "capacity": dict(needs),
        "note": "",
    }
    if capacity_check:
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
        wanted = claimed_gpus({"spec": spec})
        committed = sum(claimed_gpus(o) for o in others if o["spec"].get("gpuType") == group["product"])
        plan["note"] = check_gpu_supply(group["product"], wanted, group["allocatable"], committed, on_insufficient_gpus)
    return plan


def _check_multinode(spec, group, gpus, per_node, nodes_per_replica, cluster):
    where = f"{gpus} GPUs span {nodes_per_replica} {group['product']} nodes ({per_node} GPU(s) each)"
    if gpus % per_node:
        raise ValidationError("gpus_per_replica", f"{where}: must be a multiple of {per_node}")
    if spec["engine"] != "vllm":
        raise ValidationError("gpus_per_replica", f"{where}: multi-node replicas are rendered for engine vllm only")
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
            f"{where}: needs {nodes_per_replica} nodes sharing a tokenfactory.io/fabric label (found {found})",
        )


def pod_state(pods):
    """(nodes the pods run on, scheduler complaint or '')."""
    nodes = sorted({p["spec"]["nodeName"] for p in pods if p.get("spec", {}).get("nodeName")})
    for pod in pods:
        for condition in conditions(pod):
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return (
                    nodes,
                    f"{pod['metadata']['name']}: {condition.get('reason')}: {condition.get('message', '')}".strip(),
                )
    return nodes, ""


def workload_phase(spec, workload, pods, plan):
    """(phase, message) of a vLLM Deployment/StatefulSet from what the cluster reports."""
    desired = (workload or {}).get("spec", {}).get("replicas", spec["replicas"])
    ready = (workload or {}).get("status", {}).get("readyReplicas", 0)
    nodes, unscheduled = pod_state(pods)
    if desired == 0:
        return "Pending", "scaled to zero replicas", nodes
    if workload is not None and ready >= desired:
        return "Ready", f"{ready}/{desired} ready", nodes
    if unscheduled:
        prefix = f"{plan['note']}; " if plan.get("note") else ""
        return "Pending", f"{prefix}{unscheduled}", nodes
    return "Progressing", f"{ready}/{desired} ready", nodes


def operator_phase(child, operator):
    state = (child or {}).get("status", {}).get("state", "")
    if state.lower() in ("ready", "successful"):
        return "Ready", f"{operator} reports {state}"
    return "Progressing", f"waiting for the {operator} operator (state: {state or 'none reported'})"
