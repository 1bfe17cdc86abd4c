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
    currency,
    decimal_string,
    dns_subdomain,
    env_name,
    positive_range,
    quantity,
    url,
)

DNS_1035 = "abcdefghijklmnopqrstuvwxyz"
LIMIT_FIELDS = (("requests_per_minute", "requestsPerMinute"), ("tokens_per_minute", "tokensPerMinute"))
SCOPES = (("per_key", "perKey"), ("per_tenant", "perTenant"), ("per_deployment", "perDeployment"))


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
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in MANAGED_VLLM_FLAGS:
            raise ValidationError(
                f"extra_args[{index}]",
                f"{flag} is set by the module from {MANAGED_VLLM_FLAGS[flag]}; remove it from extra_args",
            )
    return list(args)


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


def _rate_limits(limits):
    spec = {}
    for option, field in SCOPES:
        scope = (limits or {}).get(option) or {}
        entry = {}
        for sub_option, sub_field in LIMIT_FIELDS:
            value = scope.get(sub_option)
            if value is not None:
                entry[sub_field] = positive_range(f"rate_limits.{option}.{sub_option}", value, 1, 10_000_000_000)
        if entry:
            spec[field] = entry
    return spec


def _resources(resources):
    spec = {}
    for side in ("requests", "limits"):
        entry = {}
        for key in ("cpu", "memory"):
            value = ((resources or {}).get(side) or {}).get(key)
            if value is not None:
                entry[key] = quantity(f"resources.{side}.{key}", value, minimum="1m" if key == "cpu" else "1Mi")
        if entry:
            spec[side] = entry
    return spec


def deployment_spec(params):
    """Validated ModelDeployment spec from module options (ValidationError names the option)."""
    spec = {
        "model": dns_subdomain("model", params["model"]),
        "endpoint": dns_subdomain("endpoint", params["endpoint"]),
        "engine": params["engine"],
        "replicas": positive_range("replicas", params["replicas"], 0, 64),
        "gpusPerReplica": positive_range("gpus_per_replica", params["gpus_per_replica"], 1, 64),
        "gpuType": params["gpu_type"],
        "prefixCaching": params["prefix_caching"],
        "kvCacheDtype": params["kv_cache_dtype"],
        "weightsVolumeSize": quantity("weights_volume_size", params["weights_volume_size"], minimum="1Gi"),
        "tenants": [dns_subdomain(f"tenants[{i}]", t) for i, t in enumerate(params["tenants"])],
        "extraArgs": _extra_args(params["extra_args"]),
        "env": _env(params["env"]),
    }
    if len(set(spec["tenants"])) != len(spec["tenants"]):
        raise ValidationError("tenants", "lists a tenant more than once")
    for option, field in (("image", "image"), ("version", "version")):
        if params[option]:
            spec[field] = params[option]
    if params["context_length"] is not None:
        spec["contextLength"] = positive_range("context_length", params["context_length"], 16, 10_000_000)
    if params["gpu_memory_utilization"] is not None:
        spec["gpuMemoryUtilization"] = params["gpu_memory_utilization"]
    resources = _resources(params["resources"])
    if resources:
        spec["resources"] = resources
    scaling = params["autoscaling"]
    if scaling:
        low = positive_range("autoscaling.min_replicas", scaling["min_replicas"], 1, 64)
        high = positive_range("autoscaling.max_replicas", scaling["max_replicas"], 1, 64)
        if low > high:
            raise ValidationError("autoscaling", f"min_replicas {low} must be <= max_replicas {high}")
        spec["autoscaling"] = {"minReplicas": low, "maxReplicas": high}
        if scaling.get("target_waiting_requests") is not None:
            spec["autoscaling"]["targetWaitingRequests"] = positive_range(
                "autoscaling.target_waiting_requests", scaling["target_waiting_requests"], 1, 10_000
            )
    budget = params["disruption_budget"]
    if budget:
        minimum = positive_range("disruption_budget.min_available", budget["min_available"], 0, 64)
        if minimum > max(spec["replicas"], (scaling or {}).get("min_replicas", 0)):
            raise ValidationError("disruption_budget.min_available", f"{minimum} exceeds replicas {spec['replicas']}")
        spec["disruptionBudget"] = {"minAvailable": minimum}
    limits = _rate_limits(params["rate_limits"])
    if limits:
        spec["rateLimits"] = limits
    pricing = params["pricing"]
    if pricing:
        spec["pricing"] = {
            "currency": currency("pricing.currency", pricing["currency"]),
            "inputPer1M": decimal_string("pricing.input_per_1m", pricing["input_per_1m"]),
            "outputPer1M": decimal_string("pricing.output_per_1m", pricing["output_per_1m"]),
        }
    if params["upstream_url"]:
        spec["upstreamURL"] = url("upstream_url", params["upstream_url"])
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
