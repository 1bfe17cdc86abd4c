#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read ModelDeployment objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_deployment_info
short_description: List Token Factory model deployments, their status and GPU placement
version_added: 0.1.0
description:
  - Returns C(ModelDeployment) objects (C(tokenfactory.io/v1alpha1)) of a namespace, or one by name, with their status.
  - "Useful fields: status.phase, status.upstreamURL, status.placement (nodes, gpuType), status.capacity."
author:
  - Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
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
  description: The ModelDeployment objects found (spec and status; managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL_DEPLOYMENT


def main():
    run_info(MODEL_DEPLOYMENT, "model_deployments")


if __name__ == "__main__":
    main()
