# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes objects every engine builds on: labels, child metadata, engine image, pod spec, Service, env."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.objects import owner_reference
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import (
    FIELDS,
    MANAGED_BY,
    PROGRESSING,
    PROVIDER_TYPES,
    READY,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import (
    GPU_RESOURCE,
    PRODUCT_LABEL,
)

ENGINE_PORT = 8000
# Where an engine serves its Prometheus metrics (NIM: /v1/metrics); Prometheus finds the pods by these annotations.
METRICS_PATH = "/metrics"
WEIGHTS_MOUNT = "/models"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
MODEL_DEPLOYMENT_LABEL = "tokenfactory.io/model-deployment"
CREDENTIAL_ENV = {kind: facts["credentialEnv"] for kind, facts in PROVIDER_TYPES.items()}
URL_ENV = {kind: facts["urlEnv"] for kind, facts in PROVIDER_TYPES.items() if "urlEnv" in facts}
# The caches under the weights volume: Hugging Face (weights), torch.compile/Inductor, Triton kernels, vLLM's own
# (its torch.compile artifacts): a pod restarted or rescheduled on the node neither downloads nor compiles again.
CACHE_ENV = {
    "HF_HOME": "huggingface",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
    "VLLM_CACHE_ROOT": "vllm",
}
WEIGHTS_CACHE_OPTIONS = FIELDS["ModelDeployment"]["weights_cache"]["options"]
# Environment variables the module sets itself; the env option may not override them.
RESERVED_ENV = frozenset({*CACHE_ENV, "HF_HUB_OFFLINE", "NODE_RANK", *CREDENTIAL_ENV.values(), *URL_ENV.values()})


def labels(md_name, engine):
    return {
        "app.kubernetes.io/name": engine,
        "app.kubernetes.io/instance": md_name,
        "app.kubernetes.io/component": "inference",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        MODEL_DEPLOYMENT_LABEL: md_name,
    }


def selector_labels(md_name):
    return {MODEL_DEPLOYMENT_LABEL: md_name, "app.kubernetes.io/component": "inference"}


def scrape_annotations(path=METRICS_PATH, port=ENGINE_PORT):
    """The prometheus.io annotations the in-cluster Prometheus keeps engine pods by (roles/observability)."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": path}


def pod_metadata(md_name, engine, path=METRICS_PATH):
    """Labels and scrape annotations of every engine pod (the ModelDeployment label selects them for status)."""
    return {"labels": labels(md_name, engine), "annotations": scrape_annotations(path)}


def child_metadata(md, name, engine):
    return {
        "name": name,
        "namespace": md["metadata"]["namespace"],
        "labels": labels(md["metadata"]["name"], engine),
        "ownerReferences": [owner_reference(md)],
    }


def image_of(spec, default_image):
    repository, tag = default_image
    return f"{spec.get('image') or repository}:{spec.get('version') or tag}"


def credential_env(provider):
    secret = (provider or {}).get("spec", {}).get("credentialsSecret")
    if not secret:
        return []
    name = CREDENTIAL_ENV[provider["spec"]["type"]]
    ref = {"secretKeyRef": {"name": secret["name"], "key": secret["key"]}}
    return [{"name": name, "valueFrom": ref}]


def provider_env(provider):
    """The provider's credential (from its Secret) and, when Provider.spec.url is set, where the engine fetches from."""
    spec = (provider or {}).get("spec", {})
    env = credential_env(provider)
    if spec.get("url") and spec.get("type") in URL_ENV:
        env.append({"name": URL_ENV[spec["type"]], "value": spec["url"]})
    return env


def user_env(spec):
    return [{"name": e["name"], "value": e.get("value", "")} for e in spec.get("env", [])]


def weights_cache(spec):
    """spec.weightsCache with the domain's defaults for what it leaves out (hostPath on the node by default)."""
    defaults = {entry["field"]: entry["default"] for entry in WEIGHTS_CACHE_OPTIONS.values() if "default" in entry}
    return {**defaults, **spec.get("weightsCache", {})}


def cache_env(spec):
    """Where the caches live; HF_HUB_OFFLINE=1 once the cache holds the model (weightsCache.offline)."""
    env = [{"name": name, "value": f"{WEIGHTS_MOUNT}/{directory}"} for name, directory in CACHE_ENV.items()]
    if weights_cache(spec)["offline"]:
        env.append({"name": "HF_HUB_OFFLINE", "value": "1"})
    return env


def weights_volume(spec):
    """The volume at WEIGHTS_MOUNT: the node's cache directory (shared by the replicas on that node), a claim, or
    the pod's own emptyDir."""
    cache = weights_cache(spec)
    if cache["type"] == "hostPath":
        return {"name": "weights", "hostPath": {"path": cache["path"], "type": "DirectoryOrCreate"}}
    if cache["type"] == "persistentVolumeClaim":
        return {"name": "weights", "persistentVolumeClaim": {"claimName": cache["claimName"]}}
    return {"name": "weights", "emptyDir": {"sizeLimit": spec.get("weightsVolumeSize", "50Gi")}}


def container_env(spec, provider):
    return [*cache_env(spec), *provider_env(provider), *user_env(spec)]


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


def pod_spec(spec, provider, plan, image, command, args, extra_env=()):
    """The engine pod: one container on the planned GPU product, with probes, shared memory and a weights volume."""
    shm = "16Gi" if plan["unifiedMemory"] else "8Gi"
    return {
        "nodeSelector": {PRODUCT_LABEL: plan["gpuType"], "kubernetes.io/arch": plan["arch"]},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 60,
        "containers": [
            {
                "name": "engine",
                "image": image,
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
            weights_volume(spec),
        ],
    }


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


def service_url(service_name, namespace):
    return f"http://{service_name}.{namespace}.svc:{ENGINE_PORT}"


def service_upstream(md, plan):
    """upstream_url() of an engine whose OpenAI server is the Service plan['service'] on the engine port."""
    return service_url(plan["service"], md["metadata"]["namespace"])


def operator_phase(child, operator):
    """(phase, message) of an operator-managed engine object from the state its operator reports."""
    state = (child or {}).get("status", {}).get("state", "")
    if state.lower() in ("ready", "successful"):
        return READY, f"{operator} reports {state}"
    return PROGRESSING, f"waiting for the {operator} operator (state: {state or 'none reported'})"


def required_crd(rtype, purpose):
    """REQUIRED_CRD of an engine whose objects are of rtype (a custom resource of its operator)."""
    return {"plural": rtype.plural, "group": rtype.api_version.split("/")[0], "purpose": purpose}


def operator_workload(rtype, service_suffix=""):
    """layout and possible_children of an engine rendered as one object of rtype that its operator runs (the
    OpenAI Service is <name><service_suffix>); its observe is engines.pods.operator_observer."""

    def layout(spec, plan, name):
        return {
            "workload": {"kind": rtype.kind, "name": name},
            "children": [f"{rtype.kind}/{name}"],
            "service": f"{name}{service_suffix}",
        }

    def possible_children(name):
        return [(rtype, name)]

    return layout, possible_children
