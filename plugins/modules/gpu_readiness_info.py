#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Are the GPU nodes ready for GPU workloads, and if not what is missing and which operator pod is stuck."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_readiness_info
short_description: Whether GPU nodes expose GPUs and feature discovery labels, with what is missing
version_added: 0.3.0
description:
  - Reads the nodes and returns, per expected node, what keeps it from running GPU workloads (the
    C(tokenfactory.spark.gpu_node_gaps) filter's decision) and the first pod of the GPU Operator stuck in a state it
    does not leave by itself (CrashLoopBackOff with its last log lines, ImagePullBackOff, ...), plus the newest event
    about those pods.
  - Meant for an C(until) loop (the C(tokenfactory.spark.gpu_operator) role waits with it); RV(progress_line) is what
    the C(tokenfactory.spark.progress) callback prints on each retry.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  nodes:
    description: Nodes that must expose GPUs; empty means every node.
    type: list
    elements: str
    default: []
  labels:
    description: Labels GPU feature discovery sets that must be present on each of them.
    type: list
    elements: str
    default: []
  resource:
    description: Extended resource that must be allocatable (at least one).
    type: str
    default: nvidia.com/gpu
  namespace:
    description: Namespace of the GPU Operator's pods, searched for a stuck pod; empty skips that search.
    type: str
    default: gpu-operator
  request_timeout:
    description: Seconds to wait for each API request (throttling and server errors are retried with backoff).
    type: int
    default: 30
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Wait for the GPUs, one progress line per look
  tokenfactory.spark.gpu_readiness_info:
    labels: [nvidia.com/gpu.product]
  register: gpus
  until: gpus.ready
  retries: 90
  delay: 10
  failed_when: false
"""

RETURN = r"""
ready:
  description: Every expected node has the resource allocatable and all labels.
  returned: always
  type: bool
gaps:
  description: Node name to what it still lacks; empty when RV(ready).
  returned: always
  type: dict
  sample: {"spark-02": ["nvidia.com/gpu not allocatable", "label nvidia.com/gpu.product missing"]}
gpus:
  description: Allocatable count of O(resource) and the C(nvidia.com/gpu.product) label of every node that has some.
  returned: always
  type: list
  elements: dict
  sample: [{name: spark-01, count: 1, product: NVIDIA-GB10}]
stuck_pod:
  description: The first GPU Operator pod stuck (pod, container, reason, last exit, last log lines), or empty.
  returned: always
  type: str
progress_line:
  description: Ready nodes of the expected ones, what is missing, the stuck pod and the last event, on one line.
  returned: always
  type: str
  sample: "GPU nodes: Pending, 0/1 ready - spark-01: nvidia.com/gpu not allocatable"
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import NODE, POD, K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.gpu_nodes import (
    allocatable_count,
    expected_nodes,
    gpu_node_gaps,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.progress import last_event, progress_line
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import PENDING, READY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.pods import failure
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import TokenFactoryModule

ARG_SPEC = {
    "nodes": {"type": "list", "elements": "str", "default": []},
    "labels": {"type": "list", "elements": "str", "default": []},
    "resource": {"type": "str", "default": "nvidia.com/gpu"},
    "namespace": {"type": "str", "default": "gpu-operator"},
}
PRODUCT_LABEL = "nvidia.com/gpu.product"


def operator_pods(client, namespace):
    if not namespace:
        return []
    try:
        return client.list(POD, namespace)
    except K8sError as exc:
        if exc.status in (403, 404):
            return []
        raise


def readiness(client, params):
    all_nodes = client.list(NODE)
    gaps = gpu_node_gaps(all_nodes, params["nodes"], params["labels"], params["resource"])
    expected = expected_nodes(all_nodes, params["nodes"])
    gpus = [
        {
            "name": node["metadata"]["name"],
            "count": allocatable_count(node, params["resource"]),
            "product": (node["metadata"].get("labels") or {}).get(PRODUCT_LABEL, ""),
        }
        for node in all_nodes
        if allocatable_count(node, params["resource"]) > 0
    ]
    pods = operator_pods(client, params["namespace"])
    stuck = failure(client, pods)
    event = last_event(client, params["namespace"], [p["metadata"]["name"] for p in pods]) if pods else ""
    details = [f"{name}: {', '.join(reasons)}" for name, reasons in gaps.items()]
    if stuck:
        details.append(f"stuck operator pod {stuck}")
    line = progress_line(
        "GPU nodes",
        PENDING if gaps else READY,
        sum(1 for name in expected if name not in gaps),
        len(expected),
        "; ".join(details),
        event,
    )
    return {"ready": not gaps, "gaps": gaps, "gpus": gpus, "stuck_pod": stuck, "progress_line": line}


def main():
    tfm = TokenFactoryModule(ARG_SPEC, base_spec={})
    tfm.run(lambda: readiness(tfm.client, tfm.params))


if __name__ == "__main__":
    main()
