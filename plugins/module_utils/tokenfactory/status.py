# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The `status` of ModelDeployments and Endpoints, computed in one place.

The model_deployment and endpoint modules write it when they run; the status keeper (keeper.py) recomputes it
between runs with these same functions, so both write the same status from the same cluster state. The keeper does
not plan: it reads the plan the module decided back from the status the module wrote (stored_plan).
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ENDPOINT_SLICE, SERVICE
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import PENDING, READY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import engine_of, upstream_url

# What stored_plan reads back from a ModelDeployment's status (and its placement).
PLANNED = ("servedModelName", "contextLength", "gpuMemoryUtilization", "capacity", "placement")
PLACED = ("gpusPerPod", "nodesPerReplica", "unifiedMemory")


def deployment_status(client, md, spec, plan, endpoint, cluster):
    """The status of ModelDeployment md (its spec, the plan decided for it, its Endpoint and ComputeCluster): what
    its engine's workload and pods report now (phase, message, ready replicas, nodes) and the plan's facts."""
    seen = engine_of(spec).observe(client, md, plan)
    phase, message, nodes = seen["phase"], seen["message"], seen["nodes"]
    if plan["note"] and phase != READY:
        message = plan["note"] if phase != PENDING else message
    fabrics = sorted({n.get("fabric") for n in cluster["status"]["nodes"] if n["name"] in nodes and n.get("fabric")})
    placement = {
        "gpuType": spec["gpuType"],
        "gpusPerReplica": spec["gpusPerReplica"],
        "gpusPerPod": plan["gpusPerPod"],
        "nodesPerReplica": plan["nodesPerReplica"],
        "unifiedMemory": plan["gpuGroup"]["unifiedMemory"],
        "nodes": nodes,
    }
    if fabrics:
        placement["fabric"] = fabrics[0]
    return {
        "phase": phase,
        "message": message,
        "servedModelName": plan["servedName"],
        "upstreamURL": upstream_url(md, plan),
        "endpointBaseURL": endpoint.get("status", {}).get("baseURL", ""),
        "computeCluster": cluster["metadata"]["name"],
        "contextLength": plan["contextLength"],
        "gpuMemoryUtilization": plan["gpuMemoryUtilization"],
        "replicas": spec["autoscaling"]["minReplicas"] if "autoscaling" in spec else spec["replicas"],
        "readyReplicas": seen["readyReplicas"],
        "placement": placement,
        "capacity": plan["capacity"],
        "children": plan["children"],
        "observedGeneration": md["metadata"].get("generation", 1),
    }


def layout_plan(md):
    """The part of the plan that names the workload: from the stored spec and status.placement.nodesPerReplica."""
    spec, status = md["spec"], md.get("status") or {}
    plan = {"nodesPerReplica": (status.get("placement") or {}).get("nodesPerReplica", 1), "note": ""}
    plan.update(engine_of(spec).layout(spec, plan, md["metadata"]["name"]))
    return plan


def stored_plan(md):
    """The plan the module decided for md's current spec, as the status it wrote records it; None when there is
    none to read (no status yet, or the spec changed since the module last ran: only the module plans).

    The planner's queue note is not kept: between runs a queued deployment's pods say why it waits (the scheduler's
    message) and it becomes Ready once they run."""
    status = md.get("status") or {}
    placement = status.get("placement") or {}
    if status.get("observedGeneration") != md["metadata"].get("generation", 1):
        return None
    if any(key not in status for key in PLANNED) or any(key not in placement for key in PLACED):
        return None
    plan = layout_plan(md)
    plan.update(
        {
            "servedName": status["servedModelName"],
            "contextLength": status["contextLength"],
            "gpuMemoryUtilization": status["gpuMemoryUtilization"],
            "gpusPerPod": placement["gpusPerPod"],
            "gpuGroup": {"unifiedMemory": placement["unifiedMemory"]},
            "capacity": status["capacity"],
        }
    )
    return plan


def base_url(spec):
    """The OpenAI base URL of an Endpoint: its externalURL, else http(s)://<hostname>[:port]/v1."""
    if spec.get("externalURL"):
        root = spec["externalURL"]
        return root if root.endswith("/v1") else f"{root}/v1"
    scheme = "https" if spec.get("tls") else "http"
    port = spec.get("port")
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{spec['hostname']}{f':{port}' if port and port != default else ''}/v1"


def gateway_state(client, gateway):
    """(phase, message, ready addresses) of the gateway Service behind the Endpoint: Ready once one of its pods is
    ready to take traffic (an EndpointSlice lists it ready), Pending while none is (or the Service is missing)."""
    name, namespace = gateway["serviceName"], gateway["namespace"]
    where = f"gateway Service {namespace}/{name}"
    if client.get(SERVICE, name, namespace) is None:
        return PENDING, f"{where} does not exist (deploy the gateway role)", 0
    slices = client.list(ENDPOINT_SLICE, namespace, f"kubernetes.io/service-name={name}")
    ready = sum(
        1
        for piece in slices
        for address in piece.get("endpoints") or []
        if (address.get("conditions") or {}).get("ready", True)
    )
    if ready:
        return READY, f"{where}: {ready} ready gateway pod(s)", ready
    return PENDING, f"{where} has no ready gateway pod", 0


def endpoint_status(client, spec):
    """The status of an Endpoint with this spec: whether its gateway serves, and its base URL."""
    phase, message, ready = gateway_state(client, spec["gateway"])
    return {
        "phase": phase,
        "message": message,
        "gatewayReadyPods": ready,
        "baseURL": base_url(spec),
        "computeCluster": spec["computeCluster"],
    }
