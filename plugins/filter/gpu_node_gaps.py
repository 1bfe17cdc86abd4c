# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Filter that lists what keeps GPU nodes from being schedulable for GPU workloads."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_node_gaps
short_description: List what each GPU node still lacks (allocatable GPUs, feature discovery labels)
version_added: 0.1.0
description:
  - Takes Node objects (as returned by M(kubernetes.core.k8s_info)) and returns, per node, the reasons it is not
    ready for GPU workloads. An empty result means every expected node is ready.
  - When no node name is given, every node is expected to expose GPUs. An empty node list is a gap too.
options:
  _input:
    description: Node objects.
    type: list
    elements: dict
    required: true
  nodes:
    description: Names of the nodes that must expose GPUs; empty means all nodes in the input.
    type: list
    elements: str
    default: []
  labels:
    description: Labels that GPU feature discovery sets and that must be present.
    type: list
    elements: str
    default: []
  resource:
    description: Extended resource that must be allocatable with a count of at least one.
    type: str
    default: nvidia.com/gpu
"""

EXAMPLES = r"""
- name: Fail unless every node has a GPU and the product label
  ansible.builtin.assert:
    that: not (nodes.resources | tokenfactory.spark.gpu_node_gaps([], ['nvidia.com/gpu.product']))
"""

RETURN = r"""
_value:
  description: Node name to list of reasons; empty when all expected nodes are ready.
  type: dict
  sample: {"spark-02": ["nvidia.com/gpu not allocatable", "label nvidia.com/gpu.product missing"]}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s import gpu_nodes


def gpu_node_gaps(node_objects, nodes=None, labels=None, resource="nvidia.com/gpu"):
    """Return {node_name: [reason, ...]} for expected nodes that are not GPU-ready."""
    if not isinstance(node_objects, list):
        raise AnsibleFilterError(f"gpu_node_gaps expects a list of Node objects, got {type(node_objects).__name__}")
    return gpu_nodes.gpu_node_gaps(node_objects, nodes, labels, resource)


class FilterModule:
    def filters(self):
        return {"gpu_node_gaps": gpu_node_gaps}
