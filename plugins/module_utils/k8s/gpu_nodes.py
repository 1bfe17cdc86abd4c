# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""What keeps nodes from running GPU workloads (allocatable GPUs, feature discovery labels), decided once for the
gpu_node_gaps filter and the gpu_readiness_info module."""

from __future__ import annotations

NO_NODES = "(cluster)"


def allocatable_count(node, resource):
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def expected_nodes(node_objects, nodes=None):
    """The nodes that must expose GPUs: `nodes`, or every node of the input."""
    names = [(n.get("metadata") or {}).get("name") for n in node_objects]
    return list(nodes or []) or sorted(name for name in names if name)


def gpu_node_gaps(node_objects, nodes=None, labels=None, resource="nvidia.com/gpu"):
    """{node_name: [reason, ...]} for expected nodes that are not GPU-ready; {} when all are."""
    by_name = {(n.get("metadata") or {}).get("name"): n for n in node_objects}
    expected = expected_nodes(node_objects, nodes)
    if not expected:
        return {NO_NODES: ["no node found"]}
    gaps = {}
    for name in expected:
        node = by_name.get(name)
        if node is None:
            gaps[name] = ["node not found"]
            continue
        reasons = []
        if allocatable_count(node, resource) < 1:
            reasons.append(f"{resource} not allocatable")
        node_labels = (node.get("metadata") or {}).get("labels") or {}
        reasons.extend(f"label {label} missing" for label in labels or [] if label not in node_labels)
        if reasons:
            gaps[name] = reasons
    return gaps
