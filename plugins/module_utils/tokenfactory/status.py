# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The `status` of ModelDeployments and Endpoints, computed in one place.

The model_deployment and endpoint modules write it when they run; the status keeper (services/status_keeper)
recomputes it between runs with these same functions, so both write the same status from the same cluster state. A
ModelDeployment's plan is stored whole in status.plan (planner.PLAN_KEYS, with the spec generation it was made from);
the other keys report what the cluster shows now and the plan's facts the gateway and the info modules read, all taken
from that plan.
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ENDPOINT_SLICE, SERVICE
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import PENDING, READY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import (
    ENGINES,
    engine_of,
    upstream_url,
)


def deployment_status(client, md, plan, endpoint, cluster, refused=None):
    """The status of ModelDeployment md (the plan decided for it, its Endpoint and ComputeCluster): what its
    engine's workload and pods report now (phase, message, ready replicas, nodes) and the plan, stored whole.
    refused: {generation, field, reason} of a newer spec the keeper could not plan (the plan stays the old one)."""
    seen = ENGINES[plan["engine"]].observe(client, md, plan)
    phase, message, nodes = seen["phase"], seen["message"], seen["nodes"]
    if plan["note"] and phase != READY:
        message = plan["note"] if phase != PENDING else message
    fabrics = sorted({n.get("fabric") for n in cluster["status"]["nodes"] if n["name"] in nodes and n.get("fabric")})
    placement = {key: plan[key] for key in ("gpuType", "gpusPerReplica", "gpusPerPod", "nodesPerReplica")}
    placement.update({"unifiedMemory": plan["unifiedMemory"], "nodes": nodes})
    if fabrics:
        placement["fabric"] = fabrics[0]
    status = {
        "phase": phase,
        "message": message,
        "servedModelName": plan["servedName"],
        "upstreamURL": upstream_url(md, plan),
        "endpointBaseURL": endpoint.get("status", {}).get("baseURL", ""),
        "computeCluster": cluster["metadata"]["name"],
        "contextLength": plan["contextLength"],
        "gpuMemoryUtilization": plan["gpuMemoryUtilization"],
        "replicas": plan["replicas"],
        "readyReplicas": seen["readyReplicas"],
        "placement": placement,
        "capacity": plan["capacity"],
        "children": plan["children"],
        "observedGeneration": md["metadata"].get("generation", 1),
        "plan": plan,
    }
    if refused:
        status["refused"] = refused
    return status


def layout_plan(md):
    """The plan of a ModelDeployment never planned (no status.plan): its engine's layout of one node per replica,
    enough to find and observe the workload (rollout_info)."""
    spec = md["spec"]
    plan = {"nodesPerReplica": 1, "note": "", "replicas": spec.get("replicas", 1)}
    plan.update(engine_of(spec).layout(spec, plan, md["metadata"]["name"]))
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
