#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read Provider objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: provider_info
short_description: List Token Factory model providers
version_added: 0.1.0
description:
  - Returns C(Provider) objects (C(tokenfactory.io/v1alpha1)) of a namespace, or one by name, with their status.
  - "Useful fields: spec.credentialsSecret names the Secret; its data is never read or returned."
author:
  - Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
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
  description: The Provider objects found (spec and status; managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import PROVIDER


def main():
    run_info(PROVIDER, "providers")


if __name__ == "__main__":
    main()
