#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Manage an API key of a gateway tenant."""

from __future__ import annotations

DOCUMENTATION = r"""
module: api_key
short_description: Manage API keys of Token Factory gateway tenants
version_added: 0.1.0
description:
  - Creates, updates or revokes the active API key called O(name) of a tenant through the gateway's admin API.
  - The key value exists only at creation; the gateway stores an HMAC of it. It is returned once in RV(key), or
    written to O(key_file) instead. Later runs report the key's metadata only.
  - Revoking takes effect for the next request on every gateway replica.
  - Use C(no_log) on the task when the key is returned, so it does not reach logs or callbacks.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  tenant:
    description: Tenant that owns the key (see M(tokenfactory.spark.tenant)).
    type: str
    required: true
  name:
    description: Name of the key within the tenant (letters, digits, C(.), C(_), C(-)).
    type: str
    required: true
  expires_at:
    description: ISO 8601 time after which the key stops working. Left unchanged when omitted.
    type: str
  key_file:
    description:
      - Write a newly created key to this file (mode C(0600)) instead of returning it.
      - Nothing is written when the key already exists.
    type: path
extends_documentation_fragment:
  - tokenfactory.spark.gateway_auth
  - tokenfactory.spark.gateway_auth.object
"""

EXAMPLES = r"""
- name: CI key of tenant acme, written to a file readable only by its owner
  tokenfactory.spark.api_key:
    gateway_url: https://gateway.example.com
    admin_token: "{{ vault_gateway_admin_token }}"
    tenant: acme
    name: ci
    limits:
      tokens_per_minute: 200000
    budget:
      period: day
      tokens: 5000000
    key_file: /etc/acme/tokenfactory.key

- name: Key returned once (keep it out of logs)
  tokenfactory.spark.api_key:
    gateway_url: https://gateway.example.com
    admin_token: "{{ vault_gateway_admin_token }}"
    tenant: acme
    name: notebook
  register: created
  no_log: true

- name: Revoke it
  tokenfactory.spark.api_key:
    gateway_url: https://gateway.example.com
    admin_token: "{{ vault_gateway_admin_token }}"
    tenant: acme
    name: notebook
    state: absent
"""

RETURN = r"""
api_key:
  description: Metadata of the key (never its value); null when it does not exist.
  returned: always
  type: dict
  sample:
    id: 0b5e7c1e-4a37-4f8e-9d7e-5a3b8f0c2d11
    tenant: acme
    name: ci
    prefix: tfk-AbCdEf
    limits: {requests_per_minute: 0, tokens_per_minute: 200000}
    budget: {period: day, amount: "0", tokens: 5000000}
    expires_at: null
key:
  description: The key value. Only when this run created the key and O(key_file) is not set.
  returned: when created
  type: str
"""

import os

from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.client import path
from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.module import (
    OBJECT_OPTIONS,
    GatewayAdminModule,
)


def write_secret(file_path, value):
    fd = os.open(file_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    os.chmod(file_path, 0o600)


def main():
    gam = GatewayAdminModule(
        {
            "tenant": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "expires_at": {"type": "str"},
            "key_file": {"type": "path"},
            **OBJECT_OPTIONS,
        }
    )
    params = gam.params
    body = {
        field: value
        for field, value in (("limits", gam.limits()), ("budget", gam.budget()), ("expires_at", params["expires_at"]))
        if value is not None
    }
    where = path("tenants", params["tenant"], "keys", params["name"])
    answer, result = gam.apply(where, body, "api_key", f"api key {params['tenant']}/{params['name']}")
    value = answer.get("key")
    if value and params["key_file"]:
        write_secret(params["key_file"], value)
    elif value:
        result["key"] = value
    gam.module.exit_json(**result)


if __name__ == "__main__":
    main()
