# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA Dynamo: one DynamoGraphDeployment (nvidia.com/v1alpha1) of a frontend and vLLM workers; the Dynamo
operator runs them and exposes the frontend as <name>-frontend."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ResourceType
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import pods, vllm, workload
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import PRODUCT_LABEL

NAME = "dynamo"
DYNAMO_GRAPH = ResourceType("nvidia.com/v1alpha1", "DynamoGraphDeployment", "dynamographdeployments")
DEFAULT_IMAGE = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime", "0.6.1")
REQUIRED_CRD = workload.required_crd(DYNAMO_GRAPH, "engine dynamo needs the NVIDIA Dynamo operator")
CHILD_TYPES, MULTINODE = (DYNAMO_GRAPH,), False
RUNNING_USAGE = False  # the gateway asks only for the final usage chunk (stream_options.include_usage)
layout, possible_children = workload.operator_workload(DYNAMO_GRAPH, service_suffix="-frontend")
observe = pods.operator_observer(DYNAMO_GRAPH, "DYNAMO")
upstream_url = workload.service_upstream
MANAGED_FLAGS = vllm.MANAGED_FLAGS  # the workers run vLLM: its derived flags stay the module's


def render(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    image = workload.image_of(spec, DEFAULT_IMAGE)
    worker_args = [
        "--model",
        model["source"],
        "--served-model-name",
        model["servedName"],
        *vllm.sizing_args(spec, plan),
        *spec.get("extraArgs", []),
    ]
    return [
        {
            "apiVersion": DYNAMO_GRAPH.api_version,
            "kind": DYNAMO_GRAPH.kind,
            "metadata": workload.child_metadata(md, name, NAME),
            "spec": {
                "services": {
                    "Frontend": {
                        "componentType": "frontend",
                        "replicas": 1,
                        # The frontend serves the OpenAI API and its metrics: scraped; every pod carries the label.
                        "extraPodMetadata": workload.pod_metadata(name, NAME),
                        "extraPodSpec": {"mainContainer": {"image": image}},
                    },
                    "VllmWorker": {
                        "componentType": "worker",
                        "replicas": plan["replicas"],
                        "extraPodMetadata": {"labels": workload.labels(name, NAME)},
                        "resources": {"limits": {"gpu": str(plan["gpusPerReplica"])}},
                        "envs": workload.provider_env(provider) + workload.user_env(spec),
                        "extraPodSpec": {
                            "nodeSelector": {PRODUCT_LABEL: plan["gpuType"]},
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
    ]
