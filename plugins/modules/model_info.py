#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read Model objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_info
short_description: List Token Factory models
version_added: 0.1.0
description:
  - Returns C(Model) objects (C(tokenfactory.io/v1alpha1)) of a namespace, or one by name, with their status.
  - "Useful fields: spec.servedName (OpenAI model name), spec.source, spec.architecture."
author:
  - Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Served names of all models
  tokenfactory.spark.model_info:
    namespace: tokenfactory
  register: info

- name: Show them
  ansible.builtin.debug:
    msg: "{{ info.models | map(attribute='spec.servedName') }}"
"""

RETURN = r"""
models:
  description: The Model objects found (spec and status; managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL


def main():
    run_info(MODEL, "models")


if __name__ == "__main__":
    main()
