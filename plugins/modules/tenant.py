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
  limits:
    description:
      - The tenant's own limits, across all models (all its keys, all gateway replicas); each a count per minute
        from V(0) (none) to V(1000000000).
      - Left unchanged when omitted.
    type: dict
    suboptions:
      requests_per_minute:
        description: Requests per minute.
        type: int
        default: 0
      tokens_per_minute:
        description: Prompt plus completion tokens per minute (counted from real usage).
        type: int
        default: 0
  models:
    description:
      - Served model names granted to this tenant in addition to C(spec.tenants) of the ModelDeployments.
      - The list replaces the current grants; left unchanged when omitted.
    type: list
    elements: str
  state:
    description: V(present) creates or updates the tenant, V(absent) deletes it.
    type: str
    default: present
    choices: [present, absent]
extends_documentation_fragment:
  - tokenfactory.spark.gateway_auth
  - tokenfactory.spark.gateway_auth.change
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
    created_at: "2026-12-02T13:00:00+00:00"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.client import (
    GATEWAY_AUTH_ARG_SPEC,
    LIMIT_OPTIONS,
    GatewayClient,
    GatewayError,
    path,
)


def main():
    module = AnsibleModule(
        argument_spec={
            **GATEWAY_AUTH_ARG_SPEC,
            "name": {"type": "str", "required": True},
            "description": {"type": "str"},
            "limits": {"type": "dict", "options": LIMIT_OPTIONS},
            "models": {"type": "list", "elements": "str"},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        },
        supports_check_mode=True,
    )
    params = module.params
    client = GatewayClient(params)
    query = {"dry_run": "true"} if module.check_mode else None
    try:
        if params["state"] == "absent":
            status, answer = client.request("DELETE", path("tenants", params["name"]), query=query)
            before = answer.get("before") if status == 200 else None
            module.exit_json(changed=before is not None, tenant=before, diff={"before": before or {}, "after": {}})
        body = {field: params[field] for field in ("description", "limits", "models") if params[field] is not None}
        status, answer = client.request("PUT", path("tenants", params["name"]), body, query)
    except GatewayError as err:
        module.fail_json(msg=str(err), status=err.status)
    if status != 200:
        module.fail_json(msg=f"tenant {params['name']}: {answer.get('error')}", status=status)
    module.exit_json(
        changed=answer["changed"],
        tenant=answer["tenant"],
        diff={"before": answer["before"] or {}, "after": answer["tenant"]},
    )


if __name__ == "__main__":
    main()
