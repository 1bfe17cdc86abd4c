"""What the keeper logs: its logger, an object's name, and a status summed up without the container's log lines."""

from __future__ import annotations

import logging

LOG = logging.getLogger("tokenfactory.status_keeper")
# A Failed message ends with the container's last log lines: kept in the object's status, never in the keeper's log.
LOG_LINES_MARK = "; last log lines:"


def describe(rtype, obj):
    meta = obj["metadata"]
    return f"{rtype.kind} {meta['namespace']}/{meta['name']}"


def summary(status):
    """'<phase>, <ready>: <message>' of a status for the log, without the container's log lines."""
    if "readyReplicas" in status:
        ready = f"{status['readyReplicas']}/{status['replicas']} ready"
    elif "gatewayReadyPods" in status:
        ready = f"{status['gatewayReadyPods']} gateway pod(s) ready"
    else:
        ready = "not planned"
    message = (status.get("message") or "").split(LOG_LINES_MARK, 1)[0]
    return f"{status.get('phase', 'no phase')}, {ready}: {message}"
