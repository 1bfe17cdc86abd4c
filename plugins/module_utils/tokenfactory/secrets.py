# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Secrets owned by a Token Factory object (deleted with it); their data is never returned or logged."""

from __future__ import annotations

import base64

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.objects import owner_reference
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import MANAGED_BY


def owned_secret(owner, name, secret_type, data):
    """A Secret owned by `owner`; data values are base64-encoded here."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": secret_type,
        "metadata": {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [owner_reference(owner)],
        },
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
    }


def ensure_with_secret(objects, obj, secret=None):
    """Apply obj and the Secret it owns, secret = (name, type, data) or None, dry-running both before writing."""
    current, planned = objects.plan(obj)
    if secret is None:
        return objects.write(obj, current, planned)
    body = owned_secret(planned, *secret)
    secret_plan = objects.plan(body)
    applied = objects.write(obj, current, planned)
    if planned["metadata"]["uid"] != applied["metadata"]["uid"]:  # created now: own it by its real uid
        body = owned_secret(applied, *secret)
    objects.write(body, *secret_plan)
    return applied
