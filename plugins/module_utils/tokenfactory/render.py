# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Render the workload of a ModelDeployment: vLLM Deployment/StatefulSet + Service (+HPA/PDB), NIMService,
DynamoGraphDeployment. Pure functions of their inputs (unit-tested without a cluster)."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY, PROVIDER_TYPES
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import (
    GPU_RESOURCE,
    PRODUCT_LABEL,
)

ENGINE_PORT = 8000
WEIGHTS_MOUNT = "/models"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
DEFAULT_IMAGES = {
    # NVIDIA's multi-arch vLLM container (arm64 + sm_121 for DGX Spark).
    "vllm": ("nvcr.io/nvidia/vllm", "25.11-py3"),
    "nim": ("nvcr.io/nim/meta/llama-3.1-8b-instruct", "1.8.4"),
    "dynamo": ("nvcr.io/nvidia/ai-dynamo/vllm-runtime", "0.6.1"),
}
# vLLM flags the module derives from spec fields; extraArgs may not override them.
MANAGED_VLLM_FLAGS = {
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
CREDENTIAL_ENV = {kind: facts["credentialEnv"] for kind, facts in PROVIDER_TYPES.items()}
RESERVED_ENV = frozenset({"HF_HOME", "NODE_RANK", *CREDENTIAL_ENV.values()})


def labels(md_name, engine):
    return {
        "app.kubernetes.io/name": engine,
        "app.kubernetes.io/instance": md_name,
        "app.kubernetes.io/component": "inference",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "tokenfactory.io/model-deployment": md_name,
    }


def selector_labels(md_name):
    return {"tokenfactory.io/model-deployment": md_name, "app.kubernetes.io/component": "inference"}


def owner_reference(owner):
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_metadata(md, name, engine):
    return {
        "name": name,
        "namespace": md["metadata"]["namespace"],
        "labels": labels(md["metadata"]["name"], engine),
        "ownerReferences": [owner_reference(md)],
    }


def image_of(spec):
    default_image, default_version = DEFAULT_IMAGES[spec["engine"]]
    return f"{spec.get('image') or default_image}:{spec.get('version') or default_version}"


def sizing_args(spec, plan):
    """Context length, memory share and tensor parallelism: the same flags for vLLM and Dynamo workers."""
    return [
        "--max-model-len",
        str(plan["contextLength"]),
        "--gpu-memory-utilization",
        str(plan["gpuMemoryUtilization"]),
        "--tensor-parallel-size",
        str(spec["gpusPerReplica"]),
    ]


def vllm_args(spec, model, plan):
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


def credential_env(provider):
    secret = (provider or {}).get("spec", {}).get("credentialsSecret")
    if not secret:
        return []
    name = CREDENTIAL_ENV[provider["spec"]["type"]]
    ref = {"secretKeyRef": {"name": secret["name"], "key": secret["key"]}}
    return [{"name": name, "valueFrom": ref}]


def container_env(spec, provider):
    env = [{"name": "HF_HOME", "value": f"{WEIGHTS_MOUNT}/huggingface"}]
    env += credential_env(provider)
    env += [{"name": e["name"], "value": e.get("value", "")} for e in spec.get("env", [])]
    return env


def resources(spec, gpus_per_pod):
    wanted = spec.get("resources", {})
    requests = {"cpu": "2", "memory": "8Gi", **wanted.get("requests", {}), GPU_RESOURCE: str(gpus_per_pod)}
    limits = {**wanted.get("limits", {}), GPU_RESOURCE: str(gpus_per_pod)}
    return {"requests": requests, "limits": limits}


def probe(period, failures, initial=0):
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "initialDelaySeconds": initial,
        "timeoutSeconds": 5,
    }


def pod_spec(spec, model, provider, group, plan, command, args, extra_env=()):
    shm = "16Gi" if group.get("unifiedMemory") else "8Gi"
    return {
        "nodeSelector": {PRODUCT_LABEL: spec["gpuType"], "kubernetes.io/arch": group.get("arch", "arm64")},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 60,
        "containers": [
            {
                "name": "engine",
                "image": image_of(spec),
                "command": command,
                "args": args,
                "ports": [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
                "env": container_env(spec, provider) + list(extra_env),
                "resources": resources(spec, plan["gpusPerPod"]),
                # Weights download + load can take many minutes: the startup probe allows 30 min.
                "startupProbe": probe(10, 180),
                "readinessProbe": probe(5, 3),
                "livenessProbe": probe(10, 6),
                "volumeMounts": [
                    {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - shared memory for NCCL/torch,
                    {"name": "weights", "mountPath": WEIGHTS_MOUNT},
                ],
            }
        ],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
            {"name": "weights", "emptyDir": {"sizeLimit": spec.get("weightsVolumeSize", "50Gi")}},
        ],
    }


def vllm_deployment(md, model, provider, group, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    template_labels = labels(name, "vllm")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": child_metadata(md, name, "vllm"),
        "spec": {
            "selector": {"matchLabels": selector_labels(name)},
            # A GPU cannot be shared by old and new pod: replace instead of surging.
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": pod_spec(spec, model, provider, group, plan, ["vllm", "serve"], vllm_args(spec, model, plan)),
            },
        },
    }
    if "autoscaling" not in spec:  # the HPA owns replicas otherwise
        body["spec"]["replicas"] = spec["replicas"]
    return body


def ranks_service_name(name):
    return f"{name}-ranks"


def vllm_multinode(md, model, provider, group, plan):
    """One replica spanning plan['nodesPerReplica'] nodes on one fabric (paired Sparks): a StatefulSet of ranks."""
    spec, name, namespace = md["spec"], md["metadata"]["name"], md["metadata"]["namespace"]
    nodes = plan["nodesPerReplica"]
    leader = f"{name}-0.{ranks_service_name(name)}.{namespace}.svc"
    base = " ".join(_quote(a) for a in vllm_args(spec, model, plan))
    script = (
        f"exec vllm serve {base} --nnodes {nodes} --node-rank $NODE_RANK --master-addr {leader} "
        '$( [ "$NODE_RANK" = 0 ] || echo --headless )'
    )
    rank_env = [
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}}
    ]
    template = pod_spec(spec, model, provider, group, plan, ["/bin/sh", "-c"], [script], rank_env)
    peers = {"labelSelector": {"matchLabels": selector_labels(name)}}
    template["affinity"] = {
        # One rank per node, all ranks on nodes that share one fabric (ConnectX link of a Spark pair).
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{**peers, "topologyKey": "kubernetes.io/hostname"}]
        },
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{**peers, "topologyKey": "tokenfactory.io/fabric"}]
        },
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "tokenfactory.io/fabric", "operator": "Exists"}]}]
            }
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": child_metadata(md, name, "vllm"),
        "spec": {
            "serviceName": ranks_service_name(name),
            "replicas": nodes,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector_labels(name)},
            "template": {"metadata": {"labels": labels(name, "vllm")}, "spec": template},
        },
    }


def _quote(arg):
    safe = all(c.isalnum() or c in "-_./:=@," for c in arg)
    return arg if safe and arg else "'" + arg.replace("'", "'\"'\"'") + "'"


def service(md, engine, extra_selector=None, name=None, headless=False):
    md_name = md["metadata"]["name"]
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(md, name or md_name, engine),
        "spec": {
            "selector": {**selector_labels(md_name), **(extra_selector or {})},
            "ports": [{"name": "http", "port": ENGINE_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    if headless:
        body["spec"]["clusterIP"] = "None"
        body["spec"]["publishNotReadyAddresses"] = True
    return body


def hpa(md, workload_kind):
    spec, name = md["spec"], md["metadata"]["name"]
    scaling = spec["autoscaling"]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": child_metadata(md, name, spec["engine"]),
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
        "metadata": child_metadata(md, name, md["spec"]["engine"]),
        "spec": {
            "minAvailable": md["spec"]["disruptionBudget"]["minAvailable"],
            "selector": {"matchLabels": selector_labels(name)},
        },
    }


def nim_service(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    repository, tag = image_of(spec).rsplit(":", 1)
    secret = (provider or {}).get("spec", {}).get("credentialsSecret", {})
    body = {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": child_metadata(md, name, "nim"),
        "spec": {
            "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
            "authSecret": secret.get("name", f"{name}-ngc"),
            "replicas": spec["replicas"],
            "resources": {"limits": {GPU_RESOURCE: str(spec["gpusPerReplica"])}},
            "nodeSelector": {PRODUCT_LABEL: spec["gpuType"]},
            "storage": {"emptyDir": {"sizeLimit": spec.get("weightsVolumeSize", "50Gi")}},
            "env": [
                {"name": "NIM_SERVED_MODEL_NAME", "value": model["servedName"]},
                {"name": "NIM_MAX_MODEL_LEN", "value": str(plan["contextLength"])},
            ]
            + [{"name": e["name"], "value": e.get("value", "")} for e in spec.get("env", [])],
            "expose": {"service": {"type": "ClusterIP", "port": ENGINE_PORT}},
        },
    }
    if "autoscaling" in spec:
        scaling = spec["autoscaling"]
        body["spec"]["scale"] = {
            "enabled": True,
            "hpa": {"minReplicas": scaling["minReplicas"], "maxReplicas": scaling["maxReplicas"]},
        }
    return body


def dynamo_graph(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    image = image_of(spec)
    worker_args = [
        "--model",
        model["source"],
        "--served-model-name",
        model["servedName"],
        *sizing_args(spec, plan),
        *spec.get("extraArgs", []),
    ]
    env = credential_env(provider) + [{"name": e["name"], "value": e.get("value", "")} for e in spec.get("env", [])]
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": child_metadata(md, name, "dynamo"),
        "spec": {
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {"mainContainer": {"image": image}},
                },
                "VllmWorker": {
                    "componentType": "worker",
                    "replicas": spec["replicas"],
                    "resources": {"limits": {"gpu": str(spec["gpusPerReplica"])}},
                    "envs": env,
                    "extraPodSpec": {
                        "nodeSelector": {PRODUCT_LABEL: spec["gpuType"]},
                        "mainContainer": {
                            "image": image,
                            "command": ["python3", "-m", "dynamo.vllm"],
                            "args": worker_args,
                        },
                    },
                },
            }
        },
    }


def upstream_url(md):
    """In-cluster URL of the engine's OpenAI server (the gateway routes here unless spec.upstreamURL is set)."""
    spec, name, namespace = md["spec"], md["metadata"]["name"], md["metadata"]["namespace"]
    if spec.get("upstreamURL"):
        return spec["upstreamURL"]
    service_name = f"{name}-frontend" if spec["engine"] == "dynamo" else name
    return f"http://{service_name}.{namespace}.svc:{ENGINE_PORT}"


def render(md, model, provider, group, plan):
    """All children of a ModelDeployment, in apply order."""
    spec, engine = md["spec"], md["spec"]["engine"]
    if engine == "nim":
        return [nim_service(md, model, provider, plan)]
    if engine == "dynamo":
        return [dynamo_graph(md, model, provider, plan)]
    children = []
    if plan["nodesPerReplica"] > 1:
        workload = vllm_multinode(md, model, provider, group, plan)
        children.append(service(md, "vllm", name=ranks_service_name(md["metadata"]["name"]), headless=True))
        children.append(workload)
        children.append(service(md, "vllm", extra_selector={POD_INDEX_LABEL: "0"}))
    else:
        workload = vllm_deployment(md, model, provider, group, plan)
        children += [workload, service(md, "vllm")]
    if "autoscaling" in spec:
        children.append(hpa(md, workload["kind"]))
    if "disruptionBudget" in spec:
        children.append(pdb(md))
    return children
