#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read usage and cost from the gateway's ledger."""

from __future__ import annotations

DOCUMENTATION = r"""
module: usage_info
short_description: Usage and cost of Token Factory gateway tenants, keys and models
version_added: 0.1.0
description:
  - Aggregates the gateway's usage ledger (PostgreSQL) over a time range through C(/admin/v1/usage).
  - Token counts come from the engine's C(usage); cost uses the price recorded with each request, per currency.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  tenant:
    description: Only this tenant.
    type: str
  key_name:
    description: Only keys with this name (combine with O(tenant)).
    type: str
  key_id:
    description: Only this key (UUID, from M(tokenfactory.spark.api_key)).
    type: str
  model:
    description: Only this served model name.
    type: str
  deployment:
    description: Only this ModelDeployment (C(namespace/name)).
    type: str
  start:
    description: Start of the range (ISO 8601, inclusive). Defaults to 30 days before O(end).
    type: str
  end:
    description: End of the range (ISO 8601, exclusive). Defaults to now.
    type: str
  group_by:
    description: Dimensions of each returned row.
    type: list
    elements: str
    choices: [tenant, key, model, deployment]
    default: [tenant, model]
  bucket:
    description: Also split rows by time period.
    type: str
    choices: [none, minute, hour, day, month]
    default: none
extends_documentation_fragment:
  - tokenfactory.spark.gateway_auth
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Daily usage per key of tenant acme this month
  tokenfactory.spark.usage_info:
    gateway_url: https://gateway.example.com
    admin_token: "{{ vault_gateway_admin_token }}"
    tenant: acme
    group_by: [key, model]
    bucket: day
    start: "2026-12-01T00:00:00Z"
  register: usage

- name: Total cost
  ansible.builtin.debug:
    msg: "{{ usage.totals }}"
"""

RETURN = r"""
usage:
  description: One row per group (and period); C(cost) is a decimal string in C(currency).
  returned: always
  type: list
  elements: dict
  sample:
    - {tenant: acme, model: tiny-qwen2, currency: USD, requests: 12, errors: 0, prompt_tokens: 72,
       completion_tokens: 96, cost: "0.0000684"}
totals:
  description: Sums over all rows, one entry per currency.
  returned: always
  type: list
  elements: dict
start:
  description: Start of the range used.
  returned: always
  type: str
end:
  description: End of the range used.
  returned: always
  type: str
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.module import GatewayAdminModule

FILTERS = ("tenant", "key_name", "key_id", "model", "deployment", "start", "end")


def main():
    gam = GatewayAdminModule(
        {
            **{name: {"type": "str"} for name in FILTERS},
            "group_by": {
                "type": "list",
                "elements": "str",
                "choices": ["tenant", "key", "model", "deployment"],
                "default": ["tenant", "model"],
            },
            "bucket": {"type": "str", "choices": ["none", "minute", "hour", "day", "month"], "default": "none"},
        }
    )
    params = gam.params
    query = {name: params[name] for name in FILTERS if params[name]}
    query.update(group_by=",".join(params["group_by"]), bucket=params["bucket"])
    status, answer = gam.call("GET", "/admin/v1/usage", query=query)
    if status != 200:
        gam.module.fail_json(msg=str(answer.get("error")), status=status)
    gam.module.exit_json(
        changed=False, usage=answer["data"], totals=answer["totals"], start=answer["start"], end=answer["end"]
    )


if __name__ == "__main__":
    main()
