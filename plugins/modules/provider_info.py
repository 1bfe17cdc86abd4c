#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read Provider objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: provider_info
short_description: List Token Factory model providers
description:
  - Providers with their type and the name of their credentials Secret; its data is never read or returned.
version_added: 0.1.0
author: Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: All providers
  tokenfactory.spark.provider_info:
    namespace: tokenfactory
  register: info
"""

RETURN = r"""
providers:
  description: The Provider objects found (managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    spec:
      description: type (huggingface, ngc or s3), displayName, url, credentialsSecret (name and key).
      type: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import PROVIDER
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info


def main():
    run_info(PROVIDER, "providers")


if __name__ == "__main__":
    main()
