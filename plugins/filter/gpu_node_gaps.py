# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Filter that lists what keeps GPU nodes from being schedulable for GPU workloads."""

from __future__ import annotations

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
