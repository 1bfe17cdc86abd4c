# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""vLLM: a Deployment of `vllm serve` pods and a Service, or a StatefulSet of ranks when one replica spans
paired nodes; plus an HPA (autoscaling) and a PodDisruptionBudget (disruption budget)."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import (
    DEPLOYMENT,
    HPA,
    PDB,
    SERVICE,
    STATEFUL_SET,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import pods as engine_pods
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    ENGINE_PORT,
    POD_INDEX_LABEL,
    child_metadata,
    image_of,
    pod_metadata,
    pod_spec,
    selector_labels,
    service,
    service_upstream,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import FABRIC_LABEL

NAME = "vllm"
# NVIDIA's multi-arch vLLM container (arm64 + sm_121 for DGX Spark).
DEFAULT_IMAGE = ("nvcr.io/nvidia/vllm", "25.11-py3")
REQUIRED_CRD = None
MULTINODE = True
# Its OpenAI server takes stream_options.continuous_usage_stats: usage on every chunk, so the gateway meters a
# stream cut short by what was served.
RUNNING_USAGE = True
CHILD_TYPES = (DEPLOYMENT, STATEFUL_SET, SERVICE, HPA, PDB)
# vLLM flags the module derives from spec fields; extraArgs may not override them.
MANAGED_FLAGS = {
    "--served-model-name": "the Model's served_name",
    "--max-model-len": "context_length",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--tensor-parallel-size": "gpus_per_replica",
    "--port": "(fixed 8000)",
    "--host": "(fixed 0.0.0.0)",
    "--enable-prefix-caching": "prefix_caching",
    "--no-enable-prefix-caching": "prefix_caching",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--revision": "the Model's revision",
    "--nnodes": "gpus_per_replica",
    "--node-rank": "(set per pod)",
    "--master-addr": "(set per pod)",
}


def ranks_service_name(name):
    return f"{name}-ranks"


def layout(spec, plan, name):
    """What this deployment consists of: the workload the module watches and every child, by kind and name."""
    multinode = plan["nodesPerReplica"] > 1
    workload = {"kind": STATEFUL_SET.kind if multinode else DEPLOYMENT.kind, "name": name}
    children = [f"{workload['kind']}/{name}", f"Service/{name}"]
    if multinode:
        children.insert(0, f"Service/{ranks_service_name(name)}")
    if "autoscaling" in spec:
        children.append(f"{HPA.kind}/{name}")
    if "disruptionBudget" in spec:
        children.append(f"{PDB.kind}/{name}")
    return {"workload": workload, "children": children, "service": name}


def possible_children(name):
    return [(rtype, child) for rtype in CHILD_TYPES for child in (name, ranks_service_name(name))]


def sizing_args(spec, plan):
    """Context length, memory share and tensor parallelism: the same flags for vLLM and Dynamo workers."""
    return [
        "--max-model-len",
        str(plan["contextLength"]),
        "--gpu-memory-utilization",
        str(plan["gpuMemoryUtilization"]),
        "--tensor-parallel-size",
        str(plan["gpusPerReplica"]),
    ]


def serve_args(spec, model, plan):
    """Arguments of `vllm serve` (model source first)."""
    source = model["source"]
    args = [
        source,
        "--served-model-name",
        model["servedName"],
        "--host",
        "0.0.0.0",  # noqa: S104 - the container serves its pod IP
        "--port",
        str(ENGINE_PORT),
        *sizing_args(spec, plan),
        "--enable-prefix-caching" if spec.get("prefixCaching", True) else "--no-enable-prefix-caching",
    ]
    if model.get("revision"):
        args += ["--revision", model["revision"]]
    if spec.get("kvCacheDtype", "auto") != "auto":
        args += ["--kv-cache-dtype", spec["kvCacheDtype"]]
    if source.startswith("s3://"):
        args += ["--load-format", "runai_streamer"]
    return args + list(spec.get("extraArgs", []))


def deployment(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    args = serve_args(spec, model, plan)
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": child_metadata(md, name, NAME),
        "spec": {
            "selector": {"matchLabels": selector_labels(name)},
            # A GPU cannot be shared by old and new pod: replace instead of surging.
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": pod_metadata(name, NAME),
                "spec": pod_spec(spec, provider, plan, image_of(spec, DEFAULT_IMAGE), ["vllm", "serve"], args),
            },
        },
    }
    if "autoscaling" not in spec:  # the HPA owns replicas otherwise
        body["spec"]["replicas"] = plan["replicas"]
    return body


def ranks(md, model, provider, plan):
    """One replica spanning plan['nodesPerReplica'] nodes on one fabric (paired Sparks): a StatefulSet of ranks."""
    spec, name, namespace = md["spec"], md["metadata"]["name"], md["metadata"]["namespace"]
    nodes = plan["nodesPerReplica"]
    leader = f"{name}-0.{ranks_service_name(name)}.{namespace}.svc"
    base = " ".join(_quote(a) for a in serve_args(spec, model, plan))
    script = (
        f"exec vllm serve {base} --nnodes {nodes} --node-rank $NODE_RANK --master-addr {leader} "
        '$( [ "$NODE_RANK" = 0 ] || echo --headless )'
    )
    rank_env = [
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}}
    ]
    image = image_of(spec, DEFAULT_IMAGE)
    template = pod_spec(spec, provider, plan, image, ["/bin/sh", "-c"], [script], rank_env)
    peers = {"labelSelector": {"matchLabels": selector_labels(name)}}
    template["affinity"] = {
        # One rank per node, all ranks on nodes that share one fabric (ConnectX link of a Spark pair).
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{**peers, "topologyKey": "kubernetes.io/hostname"}]
        },
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{**peers, "topologyKey": FABRIC_LABEL}]},
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": FABRIC_LABEL, "operator": "Exists"}]}]
            }
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": child_metadata(md, name, NAME),
        "spec": {
            "serviceName": ranks_service_name(name),
            "replicas": nodes,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector_labels(name)},
            "template": {"metadata": pod_metadata(name, NAME), "spec": template},
        },
    }


def _quote(arg):
    safe = all(c.isalnum() or c in "-_./:=@," for c in arg)
    return arg if safe and arg else "'" + arg.replace("'", "'\"'\"'") + "'"


def hpa(md, workload_kind):
    spec, name = md["spec"], md["metadata"]["name"]
    scaling = spec["autoscaling"]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": child_metadata(md, name, NAME),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": workload_kind, "name": name},
            "minReplicas": scaling["minReplicas"],
            "maxReplicas": scaling["maxReplicas"],
            # Queue depth from vLLM's /metrics through a custom-metrics adapter (e.g. prometheus-adapter).
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "vllm_num_requests_waiting"},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": str(scaling.get("targetWaitingRequests", 4)),
                        },
                    },
                }
            ],
        },
    }


def pdb(md):
    name = md["metadata"]["name"]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": child_metadata(md, name, NAME),
        "spec": {
            "minAvailable": md["spec"]["disruptionBudget"]["minAvailable"],
            "selector": {"matchLabels": selector_labels(name)},
        },
    }


def render(md, model, provider, plan):
    """All children, in apply order (the order of plan['children'])."""
    spec, name = md["spec"], md["metadata"]["name"]
    workload_kind = plan["workload"]["kind"]
    if workload_kind == STATEFUL_SET.kind:
        children = [
            service(md, NAME, name=ranks_service_name(name), headless=True),
            ranks(md, model, provider, plan),
            service(md, NAME, extra_selector={POD_INDEX_LABEL: "0"}),
        ]
    else:
        children = [deployment(md, model, provider, plan), service(md, NAME)]
    if "autoscaling" in spec:
        children.append(hpa(md, workload_kind))
    if "disruptionBudget" in spec:
        children.append(pdb(md))
    return children


def observe(client, md, plan):
    """What the cluster reports about the workload and its pods: phase, message, nodes, ready replicas."""
    namespace = md["metadata"]["namespace"]
    rtype = STATEFUL_SET if plan["workload"]["kind"] == STATEFUL_SET.kind else DEPLOYMENT
    workload = client.get(rtype, plan["workload"]["name"], namespace)
    pods = engine_pods.pods_of(client, md)
    # A StatefulSet's replicas are the ranks of one model replica: all of them must be ready.
    desired = (workload or {}).get("spec", {}).get("replicas", plan["replicas"])
    phase, message, nodes = engine_pods.workload_phase(client, desired, workload, pods, plan.get("note", ""))
    ready = (workload or {}).get("status", {}).get("readyReplicas", 0)
    return {"phase": phase, "message": message, "nodes": nodes, "readyReplicas": ready}


upstream_url = service_upstream
