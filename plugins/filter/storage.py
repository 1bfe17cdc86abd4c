# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Which StorageClass a PersistentVolumeClaim will be provisioned by, checked before the claim is made."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _is_default(storage_class):
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(name) == "true" for name in DEFAULT_CLASS_ANNOTATIONS)


def claim_storage_class(storage_classes, wanted="", field="storage_class", mode_field="storage_mode"):
    """The StorageClass a claim naming `wanted` ("" = the cluster's default) is provisioned by; fails naming the
    variables when none would provision it (the claim would stay Pending)."""
    names = sorted(sc["metadata"]["name"] for sc in storage_classes or [])
    if wanted:
        if wanted in names:
            return wanted
        raise AnsibleFilterError(
            f"{field}={wanted!r}: no such StorageClass in the cluster (it has: {', '.join(names) or 'none'}). "
            f"Name one of them, or set {mode_field}=host_path (node-local storage, what a bare DGX Spark has)."
        )
    defaults = sorted(sc["metadata"]["name"] for sc in storage_classes or [] if _is_default(sc))
    if defaults:
        return defaults[0]
    raise AnsibleFilterError(
        f"{mode_field}=pvc needs a StorageClass, and the cluster has no default one "
        f"(StorageClasses: {', '.join(names) or 'none'}). Set {field} to one of them, install a provisioner, "
        f"or set {mode_field}=host_path (node-local storage, what a bare DGX Spark has)."
    )


class FilterModule:
    def filters(self):
        return {"claim_storage_class": claim_storage_class}
