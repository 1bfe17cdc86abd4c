# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""What an engine's real pods say, for every engine: the phase of the workload (Pending, Progressing, Ready,
Failed) from its pods, and why a failing pod fails (the container's reason, its last exit and log lines)."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import POD, K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.objects import conditions
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import rollout
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import (
    FAILED,
    PENDING,
    PROGRESSING,
    READY,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import (
    MODEL_DEPLOYMENT_LABEL,
    operator_phase,
)

# Waiting reasons a container does not leave by itself: the deployment is Failed until someone changes it.
FAILING_REASONS = (
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)
LOG_LINES = 10
LOG_CHARS = 2000


def scheduling_problem(pods):
    """'<pod>: <reason>: <message>' of the first pod the scheduler cannot place, or ''."""
    for pod in pods:
        for condition in conditions(pod):
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return f"{pod['metadata']['name']}: {condition.get('reason')}: {condition.get('message', '')}".strip()
    return ""


def nodes_of(pods):
    return sorted({p["spec"]["nodeName"] for p in pods if p.get("spec", {}).get("nodeName")})


def stuck_container(pod):
    """The first (init) container status of the pod waiting for one of FAILING_REASONS, or None."""
    status = pod.get("status") or {}
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING_REASONS:
            return container
    return None


def last_log_lines(client, pod, container, previous):
    """The container's last LOG_LINES log lines (of its previous run after a crash), or a note why there are none."""
    try:
        text = client.log(
            pod["metadata"]["name"], pod["metadata"]["namespace"], container, tail_lines=LOG_LINES, previous=previous
        )
    except K8sError as exc:
        return f"(no log: {str(exc)[:200]})"
    lines = [line for line in text.splitlines() if line.strip()]
    joined = " | ".join(lines[-LOG_LINES:])
    return joined[-LOG_CHARS:] if joined else "(empty log)"


def failure(client, pods):
    """'<pod>: container <name> <reason>: ...' for the first pod with a stuck container, or ''."""
    for pod in pods:
        container = stuck_container(pod)
        if container is None:
            continue
        waiting = container["state"]["waiting"]
        reason = waiting["reason"]
        parts = [f"{pod['metadata']['name']}: container {container['name']} {reason}"]
        if waiting.get("message"):
            parts.append(waiting["message"][:500])
        ended = (container.get("lastState") or {}).get("terminated")
        if ended:
            parts.append(
                f"last exit code {ended.get('exitCode')} ({ended.get('reason', 'unknown')}), "
                f"restarts {container.get('restartCount', 0)}"
            )
        if reason == "CrashLoopBackOff" or ended:
            parts.append("last log lines: " + last_log_lines(client, pod, container["name"], previous=bool(ended)))
        return "; ".join(parts)
    return ""


def workload_phase(client, desired, workload, pods, note=""):
    """(phase, message, nodes): Ready when the rollout is done (every wanted replica updated and available, as
    `kubectl rollout status` decides), Failed when a pod is stuck (reason and last log lines in the message) or the
    rollout exceeded its deadline, Pending when queued (note), a pod cannot be scheduled or nothing is wanted, else
    Progressing."""
    nodes = nodes_of(pods)
    if desired == 0:
        return PENDING, "scaled to zero replicas", nodes
    progress = rollout(workload) if workload is not None else None
    if progress is not None and progress.done:
        return READY, progress.message, nodes
    stuck = failure(client, pods)
    if stuck or (progress is not None and progress.failed):
        return FAILED, stuck or progress.message, nodes
    unscheduled = scheduling_problem(pods)
    if unscheduled or note:
        # A note means the planner queued it (not enough GPUs): Pending before the scheduler has said so too.
        return PENDING, "; ".join(part for part in (note, unscheduled) if part), nodes
    return PROGRESSING, progress.message if progress is not None else "waiting for the workload to be created", nodes


def pods_of(client, md):
    """The engine pods of a ModelDeployment (every engine labels its pods with the deployment's name)."""
    name, namespace = md["metadata"]["name"], md["metadata"]["namespace"]
    return client.list(POD, namespace, f"{MODEL_DEPLOYMENT_LABEL}={name}")


def operator_observe(client, md, child, operator):
    """An operator-managed engine: Failed when one of its pods is stuck, else the state its operator reports."""
    pods = pods_of(client, md)
    stuck = failure(client, pods)
    phase, message = (FAILED, stuck) if stuck else operator_phase(child, operator)
    ready = sum(
        1 for pod in pods if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions(pod))
    )
    return {"phase": phase, "message": message, "nodes": nodes_of(pods), "readyReplicas": ready}


def operator_observer(rtype, operator):
    """observe() of an engine whose one object of rtype an operator runs."""

    def observe(client, md, plan):
        child = client.get(rtype, plan["workload"]["name"], md["metadata"]["namespace"])
        return operator_observe(client, md, child, operator)

    return observe
