# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Module runner shared by the Token Factory modules: plan (server-side dry run) everything, then write;
check mode, diff, idempotence, waits with progress, and one error path for bad input."""

from __future__ import annotations

import base64
import copy
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import CapacityError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import (
    AUTH_ARG_SPEC,
    CRD,
    FIELD_MANAGER,
    GROUP,
    VERSION,
    K8sError,
    KubeClient,
    require_kubernetes,
    type_of,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.render import owner_reference
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    dns_subdomain,
)

INFO_ARG_SPEC = {"namespace": {"type": "str", "default": "default"}}
OBJECT_ARG_SPEC = {
    **INFO_ARG_SPEC,
    "wait": {"type": "bool", "default": True},
    "wait_timeout": {"type": "int", "default": 300},
    "name": {"type": "str", "required": True},
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
}
VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink")
HIDDEN = "<hidden: secret data>"


def normalize(obj):
    """What an apply owns and can change: no status, no server bookkeeping."""
    if obj is None:
        return {}
    out = copy.deepcopy(obj)
    out.pop("status", None)
    metadata = out.get("metadata", {})
    for key in VOLATILE_METADATA:
        metadata.pop(key, None)
    return out


def redact(obj):
    if obj.get("kind") == "Secret":
        obj = dict(obj)
        for field in ("data", "stringData"):
            if field in obj:
                obj[field] = {key: HIDDEN for key in obj[field]}
    return obj


def describe(obj):
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {where}{meta['name']}"


def tf_object(kind, name, namespace, spec, labels=None):
    metadata = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": metadata, "spec": spec}


class TokenFactoryModule:
    """AnsibleModule + client + change bookkeeping. Subclass-free: modules call its methods."""

    def __init__(self, argument_spec, base_spec=None, **kwargs):
        spec = {**AUTH_ARG_SPEC, **(OBJECT_ARG_SPEC if base_spec is None else base_spec), **argument_spec}
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=True, **kwargs)
        self.params = self.module.params
        self.check_mode = self.module.check_mode
        self.changed = False
        self.diffs = []
        self.progress = []
        self._client = None

    @property
    def client(self):
        if self._client is None:
            require_kubernetes(self.module)
            self._client = KubeClient(self.params)
        return self._client

    # ---- running and failing -------------------------------------------------------------------
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
        self.module.exit_json(changed=self.changed, **result, **self._extras())

    def _extras(self):
        extras = {}
        if self.module._diff and self.diffs:
            extras["diff"] = self.diffs
        if self.progress:
            extras["progress"] = self.progress
        return extras

    def note(self, message):
        if not self.progress or self.progress[-1] != message:
            self.progress.append(message)
            self.module.log(message)

    # ---- reading ----------------------------------------------------------------------------------
    def require_crd(self, plural, group=GROUP, purpose=None):
        name = f"{plural}.{group}"
        if self.client.get(CRD, name) is None:
            hint = purpose or "run tokenfactory.spark.crds first (cluster-admin) to install the Token Factory CRDs"
            raise ValidationError("crds", f"CustomResourceDefinition {name} is not installed; {hint}")

    def reference(self, rtype, field, name, namespace=None):
        """The object a field refers to; a clear error listing what exists when it is missing."""
        namespace = namespace or self.params["namespace"]
        dns_subdomain(field, name)
        obj = self.client.get(rtype, name, namespace)
        if obj is None:
            existing = sorted(o["metadata"]["name"] for o in self.client.list(rtype, namespace))
            choices = ", ".join(existing) if existing else "none"
            raise ValidationError(
                field, f"{rtype.kind} {name!r} not found in namespace {namespace} (existing: {choices})"
            )
        return obj

    # ---- planning and writing ---------------------------------------------------------------------
    def plan(self, obj):
        """(current, planned) where planned is the server's dry-run result of applying obj."""
        rtype = type_of(obj)
        meta = obj["metadata"]
        current = self.client.get(rtype, meta["name"], meta.get("namespace"))
        planned = self.client.apply(obj, dry_run=True)
        return current, planned

    def record(self, obj, before, after):
        self.changed = True
        if self.module._diff:
            self.diffs.append(
                {
                    "before_header": describe(obj),
                    "after_header": describe(obj),
                    "before": redact(normalize(before)),
                    "after": redact(normalize(after)),
                }
            )

    def write(self, obj, current, planned):
        """Apply obj for real when the dry run showed a change; return the resulting object."""
        if normalize(current) == normalize(planned):
            return current
        self.record(obj, current, planned)
        if self.check_mode:
            return planned
        return self.client.apply(obj)

    def ensure(self, obj):
        current, planned = self.plan(obj)
        return self.write(obj, current, planned)

    def write_status(self, obj, status):
        """Server-side apply of .status when it differs (status is part of what these modules manage)."""
        if obj.get("status") == status:
            return obj
        self.changed = True
        if self.module._diff:
            self.diffs.append(
                {
                    "before_header": f"{describe(obj)} status",
                    "after_header": f"{describe(obj)} status",
                    "before": obj.get("status", {}),
                    "after": status,
                }
            )
        if self.check_mode:
            return {**obj, "status": status}
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace")},
            "status": status,
        }
        return self.client.apply(body, subresource="status")

    def remove(self, rtype, name, namespace=None, wait=False, propagation="Foreground"):
        current = self.client.get(rtype, name, namespace)
        if current is None:
            return None
        self.record(current, current, None)
        if self.check_mode:
            self.client.delete(rtype, name, namespace, dry_run=True)
            return current
        self.client.delete(rtype, name, namespace, propagation=propagation)
        if wait:
            self.note(f"waiting for {rtype.kind} {name} and its children to be deleted")
            self.client.wait_gone(rtype, name, namespace, self.params["wait_timeout"])
        return current

    def wait_until(self, describe_what, check):
        """check() -> (done_value_or_None, progress message); notes each new message; fails on timeout."""

        def probe():
            value, message = check()
            if message:
                self.note(message)
            return value, message

        started = time.monotonic()
        value = self.client.wait_for(describe_what, probe, self.params["wait_timeout"])
        self.note(f"{describe_what}: done after {time.monotonic() - started:.1f}s")
        return value

    def run_object(self, rtype, result_key, used_by, present):
        """Body of the object modules: check name and CRD; state=absent deletes the object unless
        used_by=(users_type, spec_field) objects still point at it; else present(name, namespace)."""

        def body():
            name, namespace = dns_subdomain("name", self.params["name"]), self.params["namespace"]
            self.require_crd(rtype.plural)
            if self.params["state"] == "absent":
                self.refuse_if_used(rtype.kind, name, *used_by)
                self.remove(rtype, name, namespace, wait=self.params["wait"])
                return {result_key: {}}
            return present(name, namespace)

        self.run(body)

    def refuse_if_used(self, kind, name, users_type, spec_field):
        """Deleting an object others point at would leave them dangling: refuse, naming the users."""
        users = [
            o["metadata"]["name"]
            for o in self.client.list(users_type, self.params["namespace"])
            if o.get("spec", {}).get(spec_field) == name
        ]
        if users:
            raise ValidationError(
                "state",
                f"{kind} {name!r} is still used by {users_type.kind}(s) {', '.join(sorted(users))}; delete those first",
            )

    def owned_secret(self, owner, name, secret_type, data):
        """A Secret owned by `owner` (deleted with it); data values are base64-encoded here, never returned."""
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": secret_type,
            "metadata": {
                "name": name,
                "namespace": owner["metadata"]["namespace"],
                "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER},
                "ownerReferences": [owner_reference(owner)],
            },
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
        }

    def ensure_with_secret(self, obj, secret_for):
        """Apply obj and the Secret it owns (secret_for(planned_obj) -> Secret or None), dry-running both first."""
        current, planned = self.plan(obj)
        secret = secret_for(planned)
        secret_plan = self.plan(secret) if secret else None
        applied = self.write(obj, current, planned)
        if secret:
            if planned["metadata"]["uid"] != applied["metadata"]["uid"]:
                secret = secret_for(applied)
            self.write(secret, *secret_plan)
        return applied
