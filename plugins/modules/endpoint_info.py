#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read Endpoint objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: endpoint_info
short_description: List Token Factory endpoints and their base URLs
version_added: 0.1.0
description:
  - Returns C(Endpoint) objects (C(tokenfactory.io/v1alpha1)) of a namespace, or one by name, with their status.
  - "Useful fields: status.baseURL (OpenAI base URL); TLS is referenced by Secret name only."
author:
  - Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Base URL of the public endpoint
  tokenfactory.spark.endpoint_info:
    name: public
    namespace: tokenfactory
  register: info

- name: Show it
  ansible.builtin.debug:
    msg: "{{ info.endpoints[0].status.baseURL }}"
"""

RETURN = r"""
endpoints:
  description: The Endpoint objects found (spec and status; managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import ENDPOINT


def main():
    run_info(ENDPOINT, "endpoints")


if __name__ == "__main__":
    main()
