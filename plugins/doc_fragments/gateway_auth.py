# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Documentation shared by the gateway admin modules: the connection (tenant, api_key, usage_info), and with
it tokenfactory.spark.gateway_auth.object (tenant, api_key)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  gateway_url:
    description:
      - Base URL of the Token Factory gateway, for example V(https://gateway.example.com) (no C(/v1) suffix).
      - Can also be set with the E(TF_GATEWAY_URL) environment variable.
    type: str
    required: true
  admin_token:
    description:
      - The gateway's admin credential (sent as a bearer token to C(/admin/v1); never logged).
      - Can also be set with the E(TF_GATEWAY_ADMIN_TOKEN) environment variable.
    type: str
    required: true
  validate_certs:
    description: Verify the gateway's TLS certificate.
    type: bool
    default: true
  ca_path:
    description: CA bundle used to verify the gateway's TLS certificate.
    type: path
  timeout:
    description: Seconds to wait for each admin API call.
    type: int
    default: 30
attributes:
  action_group:
    description: Use C(group/tokenfactory.spark.gateway_admin) in C(module_defaults) to set the connection.
    support: full
    membership:
      - tokenfactory.spark.gateway_admin
notes:
  - "Set the connection once with C(module_defaults: {group/tokenfactory.spark.gateway_admin: {gateway_url: ...,
    admin_token: ...}}); the Kubernetes modules have their own group, C(tokenfactory.spark.kubernetes)."
"""

    # Modules that manage one gateway object (tenant, api_key): its own limits over all models, state, check, diff.
    OBJECT = r"""
options:
  state:
    description:
      - V(present) creates or updates the tenant or key.
      - V(absent) deletes a tenant (all its keys are revoked at once) or revokes a key.
    type: str
    default: present
    choices: [present, absent]
  limits:
    description:
      - Limits of the object itself, counted over all models (for a tenant, all its keys and gateway replicas
        together; for a key, that key alone), each a count per minute from V(0) (none) to V(1000000000).
      - They come on top of the limits a ModelDeployment sets for each key, each tenant and itself.
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
  budget:
    description:
      - Spend budget of the object itself per calendar period (UTC), over all models (for a tenant, all its keys
        and gateway replicas together; for a key, that key alone). It is held exactly across replicas; a request
        whose reservation (prompt estimate plus C(max_tokens)) does not fit is answered HTTP 429 with code
        C(budget_exceeded) and never forwarded. A stream that crosses it mid-way is finished and metered.
      - Left unchanged when omitted.
    type: dict
    suboptions:
      period:
        description: The calendar period (UTC) the budget counts over; it renews at the period's start.
        type: str
        default: month
        choices: [day, month]
      amount:
        description:
          - Spend per period in the deployments' currency (cost = tokens x the ModelDeployment's price per 1M),
            as a decimal string such as V('25.00'); V('0') means no amount budget.
        type: str
        default: "0"
      tokens:
        description: Prompt plus completion tokens per period, from V(0) (no token budget) to V(1000000000000000).
        type: int
        default: 0
attributes:
  check_mode:
    description: The gateway computes the change in a rolled-back transaction (C(dry_run)); nothing is written.
    support: full
  diff_mode:
    description: Returns the object before and after the change (never a key value).
    support: full
"""
