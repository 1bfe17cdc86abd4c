# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA NIM: one NIMService (apps.nvidia.com/v1alpha1); the NIM Operator runs the pods and their Service."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ResourceType
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import pods, vllm, workload
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import (
    GPU_RESOURCE,
    PRODUCT_LABEL,
)

NAME = "nim"
NIM_SERVICE = ResourceType("apps.nvidia.com/v1alpha1", "NIMService", "nimservices")
DEFAULT_IMAGE = ("nvcr.io/nim/meta/llama-3.1-8b-instruct", "1.8.4")
REQUIRED_CRD = workload.required_crd(NIM_SERVICE, "engine nim needs the NVIDIA NIM Operator (NIMService CRD)")
MULTINODE = False
RUNNING_USAGE = False  # the gateway asks only for the final usage chunk (stream_options.include_usage)
CHILD_TYPES = (NIM_SERVICE,)
# NIM serves with vLLM inside: the same flags stay the module's.
MANAGED_FLAGS = vllm.MANAGED_FLAGS
METRICS_PATH = "/v1/metrics"


layout, possible_children = workload.operator_workload(NIM_SERVICE)
observe = pods.operator_observer(NIM_SERVICE, "NIM")
upstream_url = workload.service_upstream


def render(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    repository, tag = workload.image_of(spec, DEFAULT_IMAGE).rsplit(":", 1)
    secret = (provider or {}).get("spec", {}).get("credentialsSecret", {})
    body = {
        "apiVersion": NIM_SERVICE.api_version,
        "kind": NIM_SERVICE.kind,
        "metadata": workload.child_metadata(md, name, NAME),
        "spec": {
            "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
            # The operator copies these onto the pods: status and Prometheus find them by them.
            **workload.pod_metadata(name, NAME, METRICS_PATH),
            "authSecret": secret.get("name", f"{name}-ngc"),
            "replicas": plan["replicas"],
            "resources": {"limits": {GPU_RESOURCE: str(plan["gpusPerReplica"])}},
            "nodeSelector": {PRODUCT_LABEL: plan["gpuType"]},
            "storage": {"emptyDir": {"sizeLimit": spec.get("weightsVolumeSize", "50Gi")}},
            "env": [
                {"name": "NIM_SERVED_MODEL_NAME", "value": model["servedName"]},
                {"name": "NIM_MAX_MODEL_LEN", "value": str(plan["contextLength"])},
                *workload.user_env(spec),
            ],
            "expose": {"service": {"type": "ClusterIP", "port": workload.ENGINE_PORT}},
        },
    }
    if "autoscaling" in spec:
        scaling = spec["autoscaling"]
        body["spec"]["scale"] = {
            "enabled": True,
            "hpa": {"minReplicas": scaling["minReplicas"], "maxReplicas": scaling["maxReplicas"]},
        }
    return [body]
