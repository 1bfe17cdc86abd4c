# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Plain helpers on Kubernetes objects (dicts): ownership, conditions, what an apply owns, secret redaction."""

from __future__ import annotations

import copy

VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink")
HIDDEN = "<hidden: secret data>"


def conditions(obj):
    """status.conditions of an API object (or None) as a list: the API server sends null while there are none."""
    return ((obj or {}).get("status") or {}).get("conditions") or []


def condition(obj, kind):
    """The condition of type `kind` (or {})."""
    return next((c for c in conditions(obj) if c.get("type") == kind), {})


def owner_reference(owner):
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def describe(obj):
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {where}{meta['name']}"


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
