# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Writing objects the way every module does: plan with a server-side dry run, write only what changed,
record the diff (secret data hidden), honour check mode, delete and wait for it to be gone."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import type_of
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.objects import describe, normalize, redact
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import gone


class ObjectService:
    def __init__(self, tfm):
        self.tfm = tfm

    def plan(self, obj):
        """(current, planned) where planned is the server's dry-run result of applying obj."""
        client, meta = self.tfm.client, obj["metadata"]
        current = client.get(type_of(obj), meta["name"], meta.get("namespace"))
        return current, client.apply(obj, dry_run=True)

    def write(self, obj, current, planned):
        """Apply obj for real when the dry run showed a change; return the resulting object."""
        if normalize(current) == normalize(planned):
            return current
        self.tfm.record(describe(obj), redact(normalize(current)), redact(normalize(planned)))
        if self.tfm.check_mode:
            return planned
        return self.tfm.client.apply(obj)

    def ensure(self, obj):
        return self.write(obj, *self.plan(obj))

    def write_status(self, obj, status):
        """Server-side apply of .status when it differs (status is part of what these modules manage)."""
        if obj.get("status") == status:
            return obj
        self.tfm.record(f"{describe(obj)} status", obj.get("status", {}), status)
        if self.tfm.check_mode:
            return {**obj, "status": status}
        meta = obj["metadata"]
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
            "status": status,
        }
        return self.tfm.client.apply(body, subresource="status")

    def remove(self, rtype, name, namespace=None, wait=False, propagation="Foreground"):
        """Delete an object (a dry run in check mode); with wait, until it and its children are gone."""
        client = self.tfm.client
        current = client.get(rtype, name, namespace)
        if current is None:
            return None
        self.tfm.record(describe(current), redact(normalize(current)), {})
        if self.tfm.check_mode:
            client.delete(rtype, name, namespace, dry_run=True)
            return current
        client.delete(rtype, name, namespace, propagation=propagation)
        if wait:
            self.tfm.note(f"waiting for {rtype.kind} {name} and its children to be deleted")
            check = gone(client, rtype, name, namespace)
            self.tfm.wait_until(f"{rtype.kind} {namespace}/{name} to be deleted", check, interval=0.5)
        return current
