# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA NIM: one NIMService (apps.nvidia.com/v1alpha1); the NIM Operator runs the pods and their Service."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ResourceType
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import pods, vllm
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    ENGINE_PORT,
    child_metadata,
    image_of,
    pod_metadata,
    service_url,
    user_env,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import (
    GPU_RESOURCE,
    PRODUCT_LABEL,
)

NAME = "nim"
NIM_SERVICE = ResourceType("apps.nvidia.com/v1alpha1", "NIMService", "nimservices")
DEFAULT_IMAGE = ("nvcr.io/nim/meta/llama-3.1-8b-instruct", "1.8.4")
REQUIRED_CRD = {
    "plural": NIM_SERVICE.plural,
    "group": "apps.nvidia.com",
    "purpose": "engine nim needs the NVIDIA NIM Operator (NIMService CRD)",
}
MULTINODE = False
CHILD_TYPES = (NIM_SERVICE,)
# NIM serves with vLLM inside: the same flags stay the module's.
MANAGED_FLAGS = vllm.MANAGED_FLAGS
METRICS_PATH = "/v1/metrics"


def layout(spec, plan, name):
    return {"workload": {"kind": NIM_SERVICE.kind, "name": name}, "children": [f"NIMService/{name}"], "service": name}


def possible_children(name):
    return [(NIM_SERVICE, name)]


def render(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    repository, tag = image_of(spec, DEFAULT_IMAGE).rsplit(":", 1)
    secret = (provider or {}).get("spec", {}).get("credentialsSecret", {})
    body = {
        "apiVersion": NIM_SERVICE.api_version,
        "kind": NIM_SERVICE.kind,
        "metadata": child_metadata(md, name, NAME),
        "spec": {
            "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
            # The operator copies these onto the pods: status and Prometheus find them by them.
            **pod_metadata(name, NAME, METRICS_PATH),
            "authSecret": secret.get("name", f"{name}-ngc"),
            "replicas": spec["replicas"],
            "resources": {"limits": {GPU_RESOURCE: str(spec["gpusPerReplica"])}},
            "nodeSelector": {PRODUCT_LABEL: spec["gpuType"]},
            "storage": {"emptyDir": {"sizeLimit": spec.get("weightsVolumeSize", "50Gi")}},
            "env": [
                {"name": "NIM_SERVED_MODEL_NAME", "value": model["servedName"]},
                {"name": "NIM_MAX_MODEL_LEN", "value": str(plan["contextLength"])},
                *user_env(spec),
            ],
            "expose": {"service": {"type": "ClusterIP", "port": ENGINE_PORT}},
        },
    }
    if "autoscaling" in spec:
        scaling = spec["autoscaling"]
        body["spec"]["scale"] = {
            "enabled": True,
            "hpa": {"minReplicas": scaling["minReplicas"], "maxReplicas": scaling["maxReplicas"]},
        }
    return [body]


def observe(client, md, plan):
    child = client.get(NIM_SERVICE, plan["workload"]["name"], md["metadata"]["namespace"])
    return pods.operator_observe(client, md, child, "NIM")


def upstream_url(md, plan):
    return service_url(plan["service"], md["metadata"]["namespace"])
