# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The AnsibleModule of the gateway admin modules (tenant, api_key, usage_info): connection options, the admin
client, check mode as the gateway's dry run, diff, and one error path."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.gateway.client import (
    GATEWAY_AUTH_ARG_SPEC,
    GatewayClient,
    GatewayError,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    per_minute_limit,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import (
    BUDGET_PERIOD_DEFAULT,
    BUDGET_PERIODS,
    LIMIT_FIELDS,
    UNLIMITED,
)

# The options of the modules that manage one object (tenant, api_key; documented by gateway_auth.object): its
# own limits over all models (the admin API's names, the domain's bound) and state.
OBJECT_OPTIONS = {
    "limits": {
        "type": "dict",
        "options": {
            name: {"type": "int", "default": UNLIMITED, **({"no_log": False} if "token" in name else {})}
            for name in LIMIT_FIELDS
        },
    },
    "budget": {
        "type": "dict",
        "options": {
            "period": {"type": "str", "default": BUDGET_PERIOD_DEFAULT, "choices": list(BUDGET_PERIODS)},
            "amount": {"type": "str", "default": "0"},
            "tokens": {"type": "int", "default": UNLIMITED, "no_log": False},
        },
    },
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
}


class GatewayAdminModule:
    def __init__(self, argument_spec):
        self.module = AnsibleModule(argument_spec={**GATEWAY_AUTH_ARG_SPEC, **argument_spec}, supports_check_mode=True)
        self.params = self.module.params
        self.client = GatewayClient(self.params)

    def call(self, method, api_path, body=None, query=None):
        """(status, answer) of one admin API call; an unreachable gateway or an error answer fails the module."""
        try:
            return self.client.request(method, api_path, body, query)
        except GatewayError as err:
            self.module.fail_json(msg=str(err), status=err.status)

    def limits(self):
        """The limits option, checked against the domain's bound (None: left unchanged)."""
        given = self.params.get("limits")
        if given is None:
            return None
        try:
            return {name: per_minute_limit(f"limits.{name}", given[name]) for name in LIMIT_FIELDS}
        except ValidationError as err:
            self.module.fail_json(msg=str(err))

    def budget(self):
        """The budget option as the admin API takes it (the gateway checks amount and tokens; None: unchanged)."""
        return self.params.get("budget")

    def apply(self, api_path, body, result_key, what):
        """state=absent deletes the object; present PUTs body. Check mode asks the gateway for a dry run.
        Returns (answer, result) of a PUT for the caller to complete; exits itself after a delete."""
        query = {"dry_run": "true"} if self.module.check_mode else None
        if self.params["state"] == "absent":
            status, answer = self.call("DELETE", api_path, query=query)
            before = answer.get("before") if status == 200 else None
            self.module.exit_json(
                **{result_key: before}, changed=before is not None, diff={"before": before or {}, "after": {}}
            )
        status, answer = self.call("PUT", api_path, body, query)
        if status not in (200, 201):
            self.module.fail_json(msg=f"{what}: {answer.get('error')}", status=status)
        after = answer[result_key]
        result = {
            "changed": answer["changed"],
            result_key: after,
            "diff": {"before": answer["before"] or {}, "after": after},
        }
        return answer, result
