# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Health gate: each GPU node's state (Kubernetes + DCGM + host memory from Prometheus) and the alerts firing.

Thresholds live in the alert rules (roles/observability); this module adds only the structural checks the rules
cannot see (a node not Ready, GPUs the device plugin no longer offers, GPUs DCGM does not report) and decides
which firing alerts block.
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import node_entry

# What the gate reads per node (one instant query each; `node` is the label the scrape jobs set).
NODE_QUERIES = {
    "gpusReporting": "count by (node) (max by (node, gpu) (DCGM_FI_DEV_GPU_TEMP))",
    "lastXid": "max by (node) (max_over_time(DCGM_FI_DEV_XID_ERRORS[10m]))",
    "maxTemperatureC": "max by (node) (DCGM_FI_DEV_GPU_TEMP)",
    "clockEventReasons": "max by (node) (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)",
    "memoryAvailableRatio": "max by (node) (node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)",
}


class PrometheusError(Exception):
    """Prometheus could not be read (unreachable, or it answered with an error)."""


class PrometheusReader:
    """GET the Prometheus HTTP API through `fetch(path, params) -> decoded JSON` (direct URL or API server proxy)."""

    def __init__(self, fetch):
        self.fetch = fetch

    def _get(self, path, params=None):
        try:
            body = self.fetch(path, params or {})
        except ValueError as exc:
            raise PrometheusError(f"{path}: not a Prometheus API answer ({exc})") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            body = body if isinstance(body, dict) else {"error": repr(body)[:200]}
            raise PrometheusError(f"{path}: {body.get('errorType', 'error')}: {body.get('error', body)}")
        return body["data"]

    def by_node(self, expr):
        out = {}
        for sample in self._get("/api/v1/query", {"query": expr})["result"]:
            node = sample["metric"].get("node")
            if node:
                out[node] = float(sample["value"][1])
        return out

    def firing_alerts(self):
        return [a for a in self._get("/api/v1/alerts")["alerts"] if a.get("state") == "firing"]


def node_states(nodes, metrics, unified_products):
    """One entry per GPU node: its Kubernetes state plus what DCGM and node-exporter report for it."""
    states = []
    for node in nodes:
        entry = node_entry(node)
        if not entry.get("gpuCount"):
            continue
        name = entry["name"]
        state = {
            "name": name,
            "ready": entry["ready"],
            "gpuProduct": entry.get("gpuProduct"),
            "gpuCapacity": entry["gpuCount"],
            "gpuAllocatable": entry["gpuAllocatable"],
            "unifiedMemory": entry.get("gpuProduct") in unified_products,
        }
        for key, values in metrics.items():
            if name in values:
                state[key] = (
                    int(values[name]) if key in ("gpusReporting", "lastXid", "clockEventReasons") else values[name]
                )
        states.append(state)
    return states


def node_problems(state, require_gpu_metrics):
    problems = []
    if not state["ready"]:
        problems.append("node is not Ready")
    if state["gpuAllocatable"] < state["gpuCapacity"]:
        problems.append(f"only {state['gpuAllocatable']} of {state['gpuCapacity']} GPUs allocatable")
    reporting = state.get("gpusReporting", 0)
    if require_gpu_metrics and reporting < state["gpuCapacity"]:
        problems.append(f"DCGM reports {reporting} of {state['gpuCapacity']} GPUs")
    if require_gpu_metrics and state["unifiedMemory"] and "memoryAvailableRatio" not in state:
        problems.append("no host memory metrics (node-exporter) for a unified-memory GPU")
    return problems


def alert_summary(alert):
    labels = alert.get("labels", {})
    summary = alert.get("annotations", {}).get("summary") or labels.get("alertname", "?")
    return {
        "alertname": labels.get("alertname"),
        "severity": labels.get("severity"),
        "node": labels.get("node"),
        "summary": summary,
        "activeAt": alert.get("activeAt"),
        "labels": labels,
    }


def evaluate(states, alerts, blocking_severities, ignore_alerts, only_nodes=None, require_gpu_metrics=True):
    """(blocking reasons, warnings, alerts considered). Alerts about other nodes than `only_nodes` are skipped;
    alerts without a node label always count."""
    blocking, warnings, considered = [], [], []
    for state in states:
        if only_nodes and state["name"] not in only_nodes:
            continue
        state["problems"] = node_problems(state, require_gpu_metrics)
        blocking.extend(f"{state['name']}: {p}" for p in state["problems"])
    if only_nodes:
        missing = sorted(set(only_nodes) - {s["name"] for s in states})
        blocking.extend(f"{name}: no such GPU node" for name in missing)
    for alert in map(alert_summary, alerts):
        if alert["alertname"] in ignore_alerts:
            continue
        if only_nodes and alert["node"] and alert["node"] not in only_nodes:
            continue
        considered.append(alert)
        where = f"{alert['node']}: " if alert["node"] else ""
        line = f"{where}{alert['alertname']} ({alert['severity']}): {alert['summary']}"
        (blocking if alert["severity"] in blocking_severities else warnings).append(line)
    return blocking, warnings, considered
