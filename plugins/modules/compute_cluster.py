#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Register a Kubernetes cluster (or a node pool of it) as a Token Factory compute cluster."""

from __future__ import annotations

DOCUMENTATION = r"""
module: compute_cluster
short_description: Register a compute cluster and record its GPU inventory
version_added: 0.1.0
description:
  - Creates or updates a C(ComputeCluster) (C(tokenfactory.io/v1alpha1)) for the cluster the module talks to.
  - Discovers the nodes selected by O(node_selector) and stores their inventory in C(status) from node labels
    (GPU feature discovery C(nvidia.com/gpu.product), C(.family), C(.compute.major/minor), C(.memory),
    C(kubernetes.io/arch), C(tokenfactory.io/fabric)) and capacity (C(nvidia.com/gpu), CPU, memory).
  - GB10 (DGX Spark) has no separate GPU memory; its GPU memory is recorded as the node's unified memory.
  - With O(profile=gpu) (default) it fails before writing anything when no selected node has an allocatable
    C(nvidia.com/gpu).
  - The inventory is refreshed on every run; a changed inventory is reported as a change.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  profile:
    description:
      - V(gpu) requires at least one ready node with an allocatable GPU.
      - V(cpu) registers a cluster without GPUs (CPU engines, lab use).
    type: str
    default: gpu
    choices: [gpu, cpu]
  node_selector:
    description: Node labels that select the nodes of this compute cluster (all nodes when empty).
    type: dict
    default: {}
  description:
    description: Free text shown to operators.
    type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.object
"""

EXAMPLES = r"""
- name: Register the DGX Spark cluster
  tokenfactory.spark.compute_cluster:
    name: spark
    namespace: tokenfactory
  register: cluster

- name: Show the GPUs found
  ansible.builtin.debug:
    msg: "{{ cluster.inventory.gpus | map(attribute='product') | list }}"

- name: Register only the paired Sparks of fabric pair-a
  tokenfactory.spark.compute_cluster:
    name: spark-pair
    namespace: tokenfactory
    node_selector:
      tokenfactory.io/fabric: pair-a

- name: Unregister
  tokenfactory.spark.compute_cluster:
    name: spark
    namespace: tokenfactory
    state: absent
"""

RETURN = r"""
compute_cluster:
  description: The ComputeCluster object as stored (with status), empty when absent.
  returned: always
  type: dict
inventory:
  description: Discovered inventory (also in the object's status).
  returned: when state=present
  type: dict
  contains:
    nodes:
      description: One entry per node (name, arch, ready, gpuProduct, gpuCount, computeCapability, gpuMemoryBytes,
        unifiedMemory, cpuMillicores, memoryBytes, fabric).
      type: list
      elements: dict
    gpus:
      description: One entry per GPU product (product, family, count, allocatable, gpusPerNode, memoryBytesPerGPU,
        unifiedMemory, nodes, fabrics).
      type: list
      elements: dict
      sample:
        - product: NVIDIA-GB10
          family: blackwell
          computeCapability: "12.1"
          count: 1
          allocatable: 1
          memoryBytesPerGPU: 127775277056
          unifiedMemory: true
    totals:
      description: Node, GPU, CPU and memory totals.
      type: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import inventory
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import NODE
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import (
    COMPUTE_CLUSTER,
    ENDPOINT,
    tf_object,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import READY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import TokenFactoryModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import kind_fields, kind_options
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_object

LABEL_VALUE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def label_selector(selector):
    for key, value in selector.items():
        value = str(value)
        if not key or len(value) > 63 or not set(value) <= LABEL_VALUE_CHARS or " " in key or "," in key:
            raise ValidationError(
                f"node_selector.{key}", f"{value!r} is not a label value (<= 63 of letters, digits, '-', '_', '.')"
            )
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items())) or None


def discover(tfm):
    params = tfm.params
    nodes = tfm.client.list(NODE, label_selector=label_selector(params["node_selector"]))
    found = inventory(nodes)
    if not nodes:
        raise ValidationError("node_selector", f"no node matches {params['node_selector']}")
    if params["profile"] == "gpu" and found["totals"]["gpus"] == 0:
        names = ", ".join(n["name"] for n in found["nodes"])
        raise ValidationError(
            "profile",
            f"no ready node has an allocatable nvidia.com/gpu (nodes: {names}); install the NVIDIA device plugin "
            "or GPU operator, fix node_selector, or use profile=cpu",
        )
    return found


def main():
    tfm = TokenFactoryModule(kind_options("ComputeCluster"))

    def present(name, namespace):
        found = discover(tfm)
        spec = kind_fields("ComputeCluster", tfm.params)
        applied = tfm.objects.ensure(tf_object("ComputeCluster", name, namespace, spec))
        status = {"phase": READY, **found}
        stored = tfm.objects.write_status(applied, status)
        return {"compute_cluster": stored, "inventory": found}

    run_object(tfm, COMPUTE_CLUSTER, "compute_cluster", present, used_by=(ENDPOINT, "computeCluster"))


if __name__ == "__main__":
    main()
