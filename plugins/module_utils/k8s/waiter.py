# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Is a rollout finished? The checks of `kubectl rollout status` and kubernetes.core's waiter, on plain dicts.

A workload is rolled out only when its controller has seen the current spec (observedGeneration), every replica
runs that spec (updatedReplicas), no old replica is left (replicas == updatedReplicas) and the new ones are
available; counting ready replicas alone calls a rollout done while old pods still serve.
"""

from __future__ import annotations

import time

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import CRD, K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.objects import condition, conditions


def poll(describe, check, timeout, interval=1.0):
    """Call check() -> (result, last state) until result is truthy; K8sError(408) naming `describe` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result, last = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise K8sError(408, f"timed out after {timeout}s waiting for {describe}; last state: {last}")
        time.sleep(interval)


def gone(client, rtype, name, namespace=None):
    """check() for poll: done once the object no longer exists."""

    def check():
        obj = client.get(rtype, name, namespace)
        return obj is None, None if obj is None else f"{rtype.kind} {name} still exists"

    return check


def crd_established(client, name):
    """check() for poll: done once CRD `name` is Established (its conditions are null right after creation)."""

    def check():
        status = {c["type"]: c["status"] for c in conditions(client.get(CRD, name))}
        done = status.get("Established") == "True"
        return done, None if done else f"waiting for CRD {name} to be Established"

    return check


class RolloutFailed(Exception):
    """A rollout that cannot finish (its progress deadline passed): waiting longer will not help."""


class Rollout:
    """done: every replica updated and available; failed: it cannot finish (progress deadline exceeded)."""

    def __init__(self, done, message, failed=False):
        self.done, self.message, self.failed = done, message, failed

    def __repr__(self):
        return f"Rollout(done={self.done}, failed={self.failed}, message={self.message!r})"


def _observed(obj):
    generation = obj["metadata"].get("generation", 0)
    observed = (obj.get("status") or {}).get("observedGeneration", 0)
    return observed >= generation and observed > 0


def deployment_rollout(deployment):
    status = deployment.get("status") or {}
    desired = deployment["spec"].get("replicas", 1)
    if not _observed(deployment):
        return Rollout(False, "waiting for the deployment controller to observe the new spec")
    progressing = condition(deployment, "Progressing")
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return Rollout(False, f"rollout exceeded its progress deadline: {progressing.get('message', '')}", failed=True)
    updated, replicas = status.get("updatedReplicas", 0), status.get("replicas", 0)
    available = status.get("availableReplicas", 0)
    if updated < desired:
        return Rollout(False, f"{updated} of {desired} replicas updated")
    if replicas > updated:
        return Rollout(False, f"{replicas - updated} old replica(s) pending termination")
    if available < updated or status.get("unavailableReplicas"):
        return Rollout(False, f"{available} of {updated} updated replicas available")
    return Rollout(True, f"{available}/{desired} updated and available")


def statefulset_rollout(statefulset):
    status = statefulset.get("status") or {}
    desired = statefulset["spec"].get("replicas", 1)
    if not _observed(statefulset):
        return Rollout(False, "waiting for the statefulset controller to observe the new spec")
    ready, updated = status.get("readyReplicas", 0), status.get("updatedReplicas", 0)
    if ready < desired:
        return Rollout(False, f"{ready} of {desired} pods ready")
    if updated < desired or status.get("updateRevision") != status.get("currentRevision"):
        return Rollout(False, f"{updated} of {desired} pods at the new revision")
    if status.get("replicas", 0) != desired:
        return Rollout(False, f"{status.get('replicas', 0)} pods for {desired} replicas")
    return Rollout(True, f"{ready}/{desired} ready at revision {status.get('updateRevision')}")


ROLLOUTS = {"Deployment": deployment_rollout, "StatefulSet": statefulset_rollout}


def rollout(workload):
    return ROLLOUTS[workload["kind"]](workload)
