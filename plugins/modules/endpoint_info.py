#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read Endpoint objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: endpoint_info
short_description: List Token Factory endpoints and their base URLs
description:
  - Endpoints with the OpenAI base URL they serve; TLS is referenced by Secret name only.
version_added: 0.1.0
author: Token Factory maintainers (@tokenfactory)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
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

- name: Point an OpenAI client at it
  ansible.builtin.debug:
    msg: "OPENAI_BASE_URL={{ info.endpoints[0].status.baseURL }}"
"""

RETURN = r"""
endpoints:
  description: The Endpoint objects found (managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    spec:
      description: hostname, port, computeCluster, gateway (service, namespace, port), tls.secretName, externalURL.
      type: dict
    status:
      description: baseURL (OpenAI base URL, with /v1) and computeCluster.
      type: dict
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import ENDPOINT
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info


def main():
    run_info(ENDPOINT, "endpoints")


if __name__ == "__main__":
    main()
