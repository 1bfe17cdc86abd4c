# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA Dynamo: one DynamoGraphDeployment (nvidia.com/v1alpha1) of a frontend and vLLM workers; the Dynamo
operator runs them and exposes the frontend as <name>-frontend."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ResourceType
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import pods, vllm
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    child_metadata,
    image_of,
    labels,
    pod_metadata,
    provider_env,
    service_url,
    user_env,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import PRODUCT_LABEL

NAME = "dynamo"
DYNAMO_GRAPH = ResourceType("nvidia.com/v1alpha1", "DynamoGraphDeployment", "dynamographdeployments")
DEFAULT_IMAGE = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime", "0.6.1")
REQUIRED_CRD = {
    "plural": DYNAMO_GRAPH.plural,
    "group": "nvidia.com",
    "purpose": "engine dynamo needs the NVIDIA Dynamo operator",
}
MULTINODE = False
CHILD_TYPES = (DYNAMO_GRAPH,)
# The workers run vLLM: its derived flags stay the module's.
MANAGED_FLAGS = vllm.MANAGED_FLAGS


def layout(spec, plan, name):
    return {
        "workload": {"kind": DYNAMO_GRAPH.kind, "name": name},
        "children": [f"DynamoGraphDeployment/{name}"],
        "service": f"{name}-frontend",
    }


def possible_children(name):
    return [(DYNAMO_GRAPH, name)]


def render(md, model, provider, plan):
    spec, name = md["spec"], md["metadata"]["name"]
    image = image_of(spec, DEFAULT_IMAGE)
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
            "metadata": child_metadata(md, name, NAME),
            "spec": {
                "services": {
                    "Frontend": {
                        "componentType": "frontend",
                        "replicas": 1,
                        # The frontend serves the OpenAI API and its metrics: scraped; every pod carries the label.
                        "extraPodMetadata": pod_metadata(name, NAME),
                        "extraPodSpec": {"mainContainer": {"image": image}},
                    },
                    "VllmWorker": {
                        "componentType": "worker",
                        "replicas": spec["replicas"],
                        "extraPodMetadata": {"labels": labels(name, NAME)},
                        "resources": {"limits": {"gpu": str(spec["gpusPerReplica"])}},
                        "envs": provider_env(provider) + user_env(spec),
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
    ]


def observe(client, md, plan):
    child = client.get(DYNAMO_GRAPH, plan["workload"]["name"], md["metadata"]["namespace"])
    return pods.operator_observe(client, md, child, "DYNAMO")


def upstream_url(md, plan):
    return service_url(plan["service"], md["metadata"]["namespace"])
