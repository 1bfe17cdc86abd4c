#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read ComputeCluster objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: compute_cluster_info
short_description: List Token Factory compute clusters and their GPU inventory
description:
  - The GPU inventory (per node and per GPU product) that M(tokenfactory.spark.compute_cluster) discovered.
version_added: 0.1.0
author: Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
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
  description: The ComputeCluster objects found (managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    spec:
      description: profile (gpu or cpu), nodeSelector, description.
      type: dict
    status:
      description: The discovered inventory.
      type: dict
      contains:
        nodes:
          description: Per node arch, readiness, GPU product/count/memory, CPU, memory and fabric.
          type: list
        gpus:
          description: Per GPU product count, allocatable, GPUs per node, memory per GPU, nodes and fabrics.
          type: list
        totals:
          description: Node, GPU, CPU and memory totals.
          type: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import COMPUTE_CLUSTER
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info


def main():
    run_info(COMPUTE_CLUSTER, "compute_clusters")


if __name__ == "__main__":
    main()
