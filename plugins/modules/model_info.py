#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read Model objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_info
short_description: List Token Factory models
description:
  - Models with their source, served name (the OpenAI C(model) clients send) and architecture facts.
version_added: 0.1.0
author: Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Served names of all models
  tokenfactory.spark.model_info:
    namespace: tokenfactory
  register: info
"""

RETURN = r"""
models:
  description: The Model objects found (managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    spec:
      description: provider, source, revision, servedName, architecture (parametersBillions, numLayers, numKVHeads,
        headDim, maxContextLength, dtype).
      type: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info


def main():
    run_info(MODEL, "models")


if __name__ == "__main__":
    main()
