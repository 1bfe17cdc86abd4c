# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""One progress line for every long wait (model rollout, gateway rollout, GPU readiness), and the newest event of
the objects being waited for. The modules return the line as `progress_line`; the tokenfactory.spark.progress
callback prints it on each retry of an `until` loop."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import EVENT, K8sError

LINE_CHARS = 600


def progress_line(subject, phase, ready=None, desired=None, detail="", event=""):
    """'<subject>: <phase>, <ready>/<desired> ready - <detail> (last event: <event>)', at most LINE_CHARS long."""
    line = f"{subject}: {phase}"
    if desired is not None:
        line += f", {ready or 0}/{desired} ready"
    if detail:
        line += f" - {detail}"
    if event:
        line += f" (last event: {event})"
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def _event_time(event):
    series = event.get("series") or {}
    return (
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or event["metadata"].get("creationTimestamp")
        or ""
    )


def last_event(client, namespace, names):
    """'<Kind>/<name> <reason>: <message>' of the newest event about one of the named objects in namespace, or ''
    (events are best effort: an API that refuses to list them gives '')."""
    try:
        events = client.list(EVENT, namespace)
    except K8sError:
        return ""
    about = [e for e in events if (e.get("involvedObject") or {}).get("name") in set(names)]
    if not about:
        return ""
    newest = max(about, key=_event_time)
    obj = newest["involvedObject"]
    return f"{obj.get('kind')}/{obj.get('name')} {newest.get('reason', '')}: {newest.get('message', '').strip()}"
