# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Engine metrics from a Prometheus text endpoint: full parse before/after a run, cheap gauge samples during it.

Names differ between engines; each quantity lists its aliases (vLLM V1, older vLLM, NVIDIA NIM, Dynamo) and
the first one present wins. KV-cache usage is normalised to 0..1 (values above 1 are read as percent).
Series of several engines/models: gauges take the maximum (worst replica), counters and histograms the sum;
when series carry a `model_name` label, only those of the served model are used.
"""

from __future__ import annotations

import re

GAUGES = {
    "kv_cache_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "gpu_cache_usage_perc",
        "dynamo_component_kvstats_gpu_cache_usage_percent",
    ),
    "running": ("vllm:num_requests_running", "num_requests_running"),
    "waiting": ("vllm:num_requests_waiting", "num_requests_waiting"),
}
COUNTERS = {
    "generation_tokens": ("vllm:generation_tokens_total", "generation_tokens_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "prompt_tokens_total"),
    "preemptions": ("vllm:num_preemptions_total", "num_preemptions_total"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "requests_finished": ("vllm:request_success_total", "request_success_total"),
}
HISTOGRAMS = {
    "ttft": ("vllm:time_to_first_token_seconds", "time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2el": ("vllm:e2e_request_latency_seconds", "e2e_request_latency_seconds"),
}

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_SAMPLE_NAMES = sorted({name for names in GAUGES.values() for name in names})
_SAMPLE = re.compile(
    rb"^(" + b"|".join(re.escape(n.encode()) for n in _SAMPLE_NAMES) + rb")(\{[^\n]*\})?[ \t]+(\S+)",
    re.MULTILINE,
)


def parse(text):
    """{name: [(labels dict, value), ...]} from Prometheus text exposition format."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    families = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        match = _LINE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        parsed = {k: _unescape(v) for k, v in _LABEL.findall(labels)} if labels else {}
        families.setdefault(name, []).append((parsed, number))
    return families


def _unescape(value):
    return value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def _series(families, name, model):
    series = families.get(name, [])
    if model and any("model_name" in labels for labels, _value in series):
        series = [(labels, v) for labels, v in series if labels.get("model_name") == model]
    return series


def _first(families, aliases, suffix=""):
    for alias in aliases:
        if alias + suffix in families:
            return alias
    return None


def _kv_value(name, value):
    return value / 100.0 if value > 1.0 else value


def snapshot(families, model=None):
    """Gauges (current), counters (totals) and histogram buckets of one scrape."""
    snap = {"gauges": {}, "counters": {}, "histograms": {}, "names": {}}
    for key, aliases in GAUGES.items():
        name = _first(families, aliases)
        series = _series(families, name, model) if name else []
        if series:
            value = max(v for _labels, v in series)
            snap["gauges"][key] = _kv_value(name, value) if key == "kv_cache_usage" else value
            snap["names"][key] = name
    for key, aliases in COUNTERS.items():
        name = _first(families, aliases)
        series = _series(families, name, model) if name else []
        if series:
            snap["counters"][key] = sum(v for _labels, v in series)
            snap["names"][key] = name
    for key, aliases in HISTOGRAMS.items():
        name = _first(families, aliases, "_bucket")
        if not name:
            continue
        buckets = {}
        for labels, value in _series(families, name + "_bucket", model):
            le = float(labels.get("le", "inf"))
            buckets[le] = buckets.get(le, 0.0) + value
        total = sum(v for _labels, v in _series(families, name + "_sum", model))
        count = sum(v for _labels, v in _series(families, name + "_count", model))
        snap["histograms"][key] = {"buckets": buckets, "sum": total, "count": count}
        snap["names"][key] = name
    return snap


def sample_gauges(body, model=None):
    """Cheap per-sample read of the gauges only (a regex over the raw bytes, no full parse)."""
    families = {}
    for match in _SAMPLE.finditer(body):
        name = match.group(1).decode()
        labels = match.group(2)
        parsed = {k: _unescape(v) for k, v in _LABEL.findall(labels.decode("utf-8", "replace"))} if labels else {}
        try:
            families.setdefault(name, []).append((parsed, float(match.group(3))))
        except ValueError:
            continue
    return snapshot(families, model)["gauges"]


def histogram_quantile(buckets, q):
    """Prometheus-style quantile of cumulative {le: count} buckets (linear within a bucket)."""
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def server_summary(before, after, samples, percentiles=(50, 90, 95, 99)):
    """Deltas between two snapshots plus the gauge samples taken during the run."""
    out = {
        "metric_names": dict(after.get("names", {})),
        "approximate_note": (
            "server_* latencies are estimated from histogram bucket deltas (linear within a bucket); approximate"
        ),
    }
    for key in COUNTERS:
        if key in after["counters"] and key in before["counters"]:
            out[f"{key}_delta"] = after["counters"][key] - before["counters"][key]
    queries, hits = out.get("prefix_cache_queries_delta"), out.get("prefix_cache_hits_delta")
    out["prefix_cache_hit_rate"] = hits / queries if queries else None
    for key, hist in after["histograms"].items():
        prior = before["histograms"].get(key, {"buckets": {}, "sum": 0.0, "count": 0.0})
        delta = {le: c - prior["buckets"].get(le, 0.0) for le, c in hist["buckets"].items()}
        count = hist["count"] - prior["count"]
        entry = {"count": count, "mean_ms": (hist["sum"] - prior["sum"]) / count * 1000 if count else None}
        for p in percentiles:
            value = histogram_quantile(delta, p / 100.0) if count else None
            entry[f"p{p}_ms"] = value * 1000 if value is not None else None
        out[f"server_{key}"] = entry
    kv = [s["kv_cache_usage"] for s in samples if "kv_cache_usage" in s]
    out["kv_cache_usage"] = {
        "avg": sum(kv) / len(kv) if kv else None,
        "peak": max(kv) if kv else None,
        "before": before["gauges"].get("kv_cache_usage"),
        "after": after["gauges"].get("kv_cache_usage"),
        "samples": len(kv),
    }
    for key in ("running", "waiting"):
        values = [s[key] for s in samples if key in s]
        out[f"num_requests_{key}_max"] = max(values) if values else None
    return out
