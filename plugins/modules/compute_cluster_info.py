#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read ComputeCluster objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: compute_cluster_info
short_description: List Token Factory compute clusters and their GPU inventory
version_added: 0.1.0
description:
  - Returns C(ComputeCluster) objects (C(tokenfactory.io/v1alpha1)) of a namespace, or one by name, with their status.
  - "Useful fields: status.gpus (per GPU product: count, allocatable, memoryBytesPerGPU, unifiedMemory, nodes,
    fabrics) and status.nodes."
author:
  - Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: GPU products of the spark cluster
  tokenfactory.spark.compute_cluster_info:
    name: spark
    namespace: tokenfactory
  register: info

- name: Show them
  ansible.builtin.debug:
    msg: "{{ info.compute_clusters[0].status.gpus | map(attribute='product') }}"
"""

RETURN = r"""
compute_clusters:
  description: The ComputeCluster objects found (spec and status; managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import COMPUTE_CLUSTER


def main():
    run_info(COMPUTE_CLUSTER, "compute_clusters")


if __name__ == "__main__":
    main()
