# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The AnsibleModule of the Token Factory Kubernetes modules: options, client, what the run changed, one error path.

Writing objects is objects.ObjectService (tfm.objects), reading references is references.py, Secrets secrets.py,
the shapes of whole modules runner.py; this class only holds what they share.
"""

from __future__ import annotations

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.auth import reveal_kubeconfig_path
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import (
    AUTH_ARG_SPEC,
    K8sError,
    KubeClient,
    require_kubernetes,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import RolloutFailed, poll
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import CapacityError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.objects import ObjectService

NAMESPACE_ARG_SPEC = {"namespace": {"type": "str", "default": "default"}}
OBJECT_ARG_SPEC = {
    **NAMESPACE_ARG_SPEC,
    "wait": {"type": "bool", "default": True},
    "wait_timeout": {"type": "int", "default": 300},
    "name": {"type": "str", "required": True},
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
}


class TokenFactoryModule:
    """AnsibleModule + client + the run's changes (changed, diffs, progress). Modules compose it, never subclass."""

    def __init__(self, argument_spec, base_spec=None, **kwargs):
        spec = {**AUTH_ARG_SPEC, **(OBJECT_ARG_SPEC if base_spec is None else base_spec), **argument_spec}
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=True, **kwargs)
        reveal_kubeconfig_path(self.module)
        self.params = self.module.params
        self.check_mode = self.module.check_mode
        self.changed = False
        self.diffs = []
        self.progress = []
        self.objects = ObjectService(self)
        self._client = None

    @property
    def client(self):
        if self._client is None:
            require_kubernetes(self.module)
            self._client = KubeClient(self.params, field_manager=MANAGED_BY, on_retry=self.note)
        return self._client

    def run(self, body):
        """Call body(); bad input, capacity and API errors become a failed result with a clear message."""
        try:
            result = body() or {}
        except (ValidationError, CapacityError) as exc:
            self.module.fail_json(msg=str(exc), changed=False, **self._extras())
        except K8sError as exc:
            reason = f" ({exc.reason})" if exc.reason else ""
            self.module.fail_json(
                msg=f"Kubernetes API error {exc.status}{reason}: {exc}", changed=self.changed, **self._extras()
            )
        except RolloutFailed as exc:
            self.module.fail_json(msg=str(exc), changed=self.changed, **self._extras())
        self.module.exit_json(changed=self.changed, **result, **self._extras())

    def _extras(self):
        extras = {}
        if self.module._diff and self.diffs:
            extras["diff"] = self.diffs
        if self.progress:
            extras["progress"] = self.progress
        return extras

    def record(self, header, before, after):
        """A change of this run (diffs only in diff mode; before/after are what the user may see)."""
        self.changed = True
        if self.module._diff:
            self.diffs.append({"before_header": header, "after_header": header, "before": before, "after": after})

    def note(self, message):
        if not self.progress or self.progress[-1] != message:
            self.progress.append(message)
            self.module.log(message)

    def wait_until(self, describe_what, check, interval=1.0):
        """check() -> (done_value_or_None, progress message); notes each new message; fails after wait_timeout."""

        def probe():
            value, message = check()
            if message:
                self.note(message)
            return value, message

        started = time.monotonic()
        value = poll(describe_what, probe, self.params["wait_timeout"], interval)
        self.note(f"{describe_what}: done after {time.monotonic() - started:.1f}s")
        return value
