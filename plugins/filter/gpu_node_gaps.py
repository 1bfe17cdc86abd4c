# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Filter that lists what keeps GPU nodes from being schedulable for GPU workloads."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

NO_NODES = "(cluster)"


def _allocatable_count(node, resource):
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def gpu_node_gaps(node_objects, nodes=None, labels=None, resource="nvidia.com/gpu"):
    """Return {node_name: [reason, ...]} for expected nodes that are not GPU-ready."""
    if not isinstance(node_objects, list):
        raise AnsibleFilterError(f"gpu_node_gaps expects a list of Node objects, got {type(node_objects).__name__}")
    by_name = {(n.get("metadata") or {}).get("name"): n for n in node_objects}
    expected = list(nodes or []) or sorted(name for name in by_name if name)
    if not expected:
        return {NO_NODES: ["no node found"]}
    gaps = {}
    for name in expected:
        node = by_name.get(name)
        if node is None:
            gaps[name] = ["node not found"]
            continue
        reasons = []
        if _allocatable_count(node, resource) < 1:
            reasons.append(f"{resource} not allocatable")
        node_labels = (node.get("metadata") or {}).get("labels") or {}
        reasons.extend(f"label {label} missing" for label in labels or [] if label not in node_labels)
        if reasons:
            gaps[name] = reasons
    return gaps


class FilterModule:
    def filters(self):
        return {"gpu_node_gaps": gpu_node_gaps}
