# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""What an object needs to exist before it is written, and what must not be deleted while it is in use."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import CRD
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    dns_subdomain,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import GROUP

INSTALL_HINT = "run tokenfactory.spark.crds first (cluster-admin) to install the Token Factory CRDs"


def require_crd(client, plural, group=GROUP, purpose=None):
    name = f"{plural}.{group}"
    if client.get(CRD, name) is None:
        raise ValidationError("crds", f"CustomResourceDefinition {name} is not installed; {purpose or INSTALL_HINT}")


def reference(client, rtype, field, name, namespace):
    """The object a field refers to; a clear error listing what exists when it is missing."""
    dns_subdomain(field, name)
    obj = client.get(rtype, name, namespace)
    if obj is None:
        existing = sorted(o["metadata"]["name"] for o in client.list(rtype, namespace))
        choices = ", ".join(existing) if existing else "none"
        raise ValidationError(field, f"{rtype.kind} {name!r} not found in namespace {namespace} (existing: {choices})")
    return obj


def refuse_if_used(client, kind, name, namespace, users_type, spec_field):
    """Deleting an object others point at would leave them dangling: refuse, naming the users."""
    users = [
        o["metadata"]["name"] for o in client.list(users_type, namespace) if o.get("spec", {}).get(spec_field) == name
    ]
    if users:
        raise ValidationError(
            "state",
            f"{kind} {name!r} is still used by {users_type.kind}(s) {', '.join(sorted(users))}; delete those first",
        )
