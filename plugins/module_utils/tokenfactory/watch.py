# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""What someone watching a ModelDeployment's rollout sees now: its engine's workload and pods, read only.

The module writes status when it runs (the status keeper between runs); this reads the live state (the same
engine observe() the module uses) so a playbook can poll it with model_deployment_info and print one progress line
per retry."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.progress import last_event, progress_line
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import engine_of
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.pods import pods_of
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.planner import stored_plan
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import layout_plan


def subject(md):
    return f"ModelDeployment {md['metadata']['namespace']}/{md['metadata']['name']}"


def rollout_now(client, md):
    """{name, phase, readyReplicas, replicas, message, lastEvent, progressLine} of a stored ModelDeployment."""
    spec, name = md["spec"], md["metadata"]["name"]
    plan = stored_plan(md) or layout_plan(md)
    seen = engine_of(spec).observe(client, md, plan)
    pods = [pod["metadata"]["name"] for pod in pods_of(client, md)]
    event = last_event(client, md["metadata"]["namespace"], [name, *pods])
    desired = plan["replicas"]
    return {
        "name": name,
        "phase": seen["phase"],
        "readyReplicas": seen["readyReplicas"],
        "replicas": desired,
        "message": seen["message"],
        "lastEvent": event,
        "progressLine": progress_line(
            subject(md), seen["phase"], seen["readyReplicas"], desired, seen["message"], event
        ),
    }
