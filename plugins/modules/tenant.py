#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Manage a tenant of the Token Factory gateway."""

from __future__ import annotations

DOCUMENTATION = r"""
module: tenant
short_description: Manage tenants of the Token Factory gateway
version_added: 0.1.0
description:
  - Creates, updates or deletes a tenant through the gateway's admin API (C(/admin/v1/tenants)).
  - A tenant owns API keys and sees the models of ModelDeployments that list it in C(spec.tenants), plus the
    models granted here with O(models).
  - Deleting a tenant revokes all its keys at once on every gateway replica; its usage records are kept.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  name:
    description: Tenant name (DNS label, lower case).
    type: str
    required: true
  description:
    description: Free text shown in listings. Left unchanged when omitted.
    type: str
  models:
    description:
      - Served model names granted to this tenant in addition to C(spec.tenants) of the ModelDeployments.
      - The list replaces the current grants; left unchanged when omitted.
    type: list
    elements: str
extends_documentation_fragment:
  - tokenfactory.spark.gateway_auth
  - tokenfactory.spark.gateway_auth.object
"""

EXAMPLES = r"""
- name: Tenant acme with a request limit and access to one more model
  tokenfactory.spark.tenant:
    gateway_url: https://gateway.example.com
    admin_token: "{{ vault_gateway_admin_token }}"
    name: acme
    description: ACME research team
    limits:
      requests_per_minute: 600
    models: [Qwen/Qwen2-0.5B-Instruct]
    budget:
      period: month
      amount: "250.00"

- name: Remove a tenant (its keys stop working immediately)
  tokenfactory.spark.tenant:
    gateway_url: https://gateway.example.com
    admin_token: "{{ vault_gateway_admin_token }}"
    name: old-team
    state: absent
"""

RETURN = r"""
tenant:
  description: The tenant after the change (before it, for O(state=absent)); null when it does not exist.
  returned: always
  type: dict
  sample:
    name: acme
    description: ACME research team
    limits: {requests_per_minute: 600, tokens_per_minute: 0}
    models: [Qwen/Qwen2-0.5B-Instruct]
    budget: {period: month, amount: "250", tokens: 0}
    created_at: "2026-12-02T13:00:00+00:00"
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.client import path
from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.module import (
    OBJECT_OPTIONS,
    GatewayAdminModule,
)


def main():
    gam = GatewayAdminModule(
        {
            "name": {"type": "str", "required": True},
            "description": {"type": "str"},
            "models": {"type": "list", "elements": "str"},
            **OBJECT_OPTIONS,
        }
    )
    params = gam.params
    body = {
        "description": params["description"],
        "limits": gam.limits(),
        "budget": gam.budget(),
        "models": params["models"],
    }
    body = {field: value for field, value in body.items() if value is not None}
    _answer, result = gam.apply(path("tenants", params["name"]), body, "tenant", f"tenant {params['name']}")
    gam.module.exit_json(**result)


if __name__ == "__main__":
    main()
