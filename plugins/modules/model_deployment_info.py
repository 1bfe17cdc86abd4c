#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read ModelDeployment objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_deployment_info
short_description: List Token Factory model deployments, their status and GPU placement
description:
  - Deployments with their phase, upstream URL, GPU placement and capacity estimate.
version_added: 0.1.0
author: Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Deployments shared with tenant acme
  tokenfactory.spark.model_deployment_info:
    namespace: tokenfactory
  register: info

- name: Show the ones acme may use
  ansible.builtin.debug:
    msg: "{{ info.model_deployments | selectattr('spec.tenants', 'contains', 'acme')
      | map(attribute='metadata.name') }}"
"""

RETURN = r"""
model_deployments:
  description: The ModelDeployment objects found (managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    status:
      description: What the module observed when it last ran.
      type: dict
      contains:
        phase:
          description: Pending, Progressing, Ready (the only phase the gateway routes) or Failed.
          type: str
        upstreamURL:
          description: Where the gateway sends the requests.
          type: str
        placement:
          description: gpuType, GPUs per replica and pod, nodes per replica, the nodes and fabric.
          type: dict
        capacity:
          description: Bytes per GPU for weights, KV cache, overhead, required and usable.
          type: dict
        children:
          description: The objects it rendered, as Kind/name.
          type: list
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL_DEPLOYMENT
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info


def main():
    run_info(MODEL_DEPLOYMENT, "model_deployments")


if __name__ == "__main__":
    main()
