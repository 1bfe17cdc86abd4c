# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Client-side metrics with the definitions and key names of `vllm bench serve`, SLO checks and goodput."""

from __future__ import annotations

import itertools
import math

DEFAULT_PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")
METRIC_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E"}

METRIC_DEFINITIONS = {
    "ttft": "Time to first token: request sent -> first content chunk (an SSE event carrying a choice).",
    "itl": "Inter-token latency: gaps between consecutive content chunks of a request, pooled over all "
    "successful requests (per chunk, so a chunk with several tokens counts once).",
    "tpot": "Time per output token: (E2E - TTFT) / (output_tokens - 1) per request with more than one "
    "output token; output_tokens from the server's usage.",
    "e2el": "End-to-end latency: request sent -> last content chunk.",
    "percentiles": "Linear interpolation between closest ranks (numpy.percentile default), as vllm bench serve.",
    "throughput": "request_throughput = completed / duration; output_throughput = output tokens of completed "
    "requests / duration; total_token_throughput adds their prompt tokens. duration = first request sent "
    "-> last request finished (warmup excluded).",
    "goodput": "request_goodput = completed requests with TTFT <= ttft_ms, TPOT <= itl_ms (the per-request "
    "form of the ITL objective), TPOT <= tpot_ms and E2E <= e2e_ms (those set) per second of duration.",
    "slo": "An SLO passes when the metric's percentile is strictly below its threshold; failed requests "
    "are excluded from latencies (as in vllm bench serve) and checked by max_error_rate.",
    "tokens": "Token counts come from the usage the server sends at the end of the stream "
    "(stream_options.include_usage). If a stream has no usage, output tokens are estimated as the number "
    "of content chunks and prompt tokens as characters / 4; tokens_estimated is then true.",
}

DEFAULT_SLO = {"percentile": 95, "ttft_ms": 500.0, "itl_ms": 250.0, "tpot_ms": None, "e2e_ms": None}
SLO_METRIC = {"ttft_ms": "ttft", "itl_ms": "itl", "tpot_ms": "tpot", "e2e_ms": "e2el"}


def percentile(sorted_values, p):
    """Linear-interpolation percentile of an ascending list (numpy's default method)."""
    if not sorted_values:
        return None
    rank = (len(sorted_values) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    frac = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac


def percentile_key(p):
    """vLLM's key spelling: 99 -> 'p99', 99.9 -> 'p99.9'."""
    return f"p{int(p)}" if int(p) == p else f"p{p}"


def per_request_values(records):
    """Lists (seconds) of successful requests: ttfts, tpots (out > 1 only), itls (pooled), e2els."""
    ttfts, tpots, itls, e2els = [], [], [], []
    for record in records:
        if not record.ok:
            continue
        times = record.chunk_times
        ttft = times[0] - record.start
        e2el = times[-1] - record.start
        ttfts.append(ttft)
        e2els.append(e2el)
        if record.output_tokens > 1:
            tpots.append((e2el - ttft) / (record.output_tokens - 1))
        itls.extend(b - a for a, b in itertools.pairwise(times))
    return {"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els}


def summarize(records, duration, slo=None, percentiles=DEFAULT_PERCENTILES):
    """Result dict with vLLM bench serve key names (ms for latencies) plus errors, goodput and SLO checks."""
    slo = slo_config(slo)
    percentiles = sorted(set(percentiles) | {slo["percentile"]})
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    values = per_request_values(records)
    total_input = sum(r.prompt_tokens for r in ok)
    total_output = sum(r.output_tokens for r in ok)
    duration = max(duration, 1e-9)
    result = {
        "duration": duration,
        "num_prompts": len(records),
        "completed": len(ok),
        "failed": len(failed),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "tokens_estimated": any(r.tokens_estimated for r in records),
        "request_throughput": len(ok) / duration,
        "request_goodput": goodput_count(records, slo) / duration,
        "output_throughput": total_output / duration,
        "total_token_throughput": (total_input + total_output) / duration,
        "percentiles": percentiles,
    }
    for metric in METRICS:
        result.update(metric_summary(metric, values[metric], percentiles))
    result.update(peak_rates(records))
    result["errors"] = error_summary(records)
    result["slo"] = evaluate_slo(result, slo)
    return result


def metric_summary(metric, seconds, percentiles):
    ordered = sorted(seconds)
    n = len(ordered)
    out = {f"count_{metric}": n}
    if not n:
        out.update({f"{k}_{metric}_ms": None for k in ("mean", "median", "std")})
        out.update({f"{percentile_key(p)}_{metric}_ms": None for p in percentiles})
        return out
    mean = sum(ordered) / n
    out[f"mean_{metric}_ms"] = mean * 1000
    out[f"median_{metric}_ms"] = percentile(ordered, 50) * 1000
    out[f"std_{metric}_ms"] = math.sqrt(sum((v - mean) ** 2 for v in ordered) / n) * 1000
    for p in percentiles:
        out[f"{percentile_key(p)}_{metric}_ms"] = percentile(ordered, p) * 1000
    return out


def slo_config(slo):
    config = dict(DEFAULT_SLO)
    config["max_error_rate"] = 0.0
    for key, value in (slo or {}).items():
        if key not in config:
            raise ValueError(f"unknown SLO field {key!r}; allowed: {', '.join(sorted(config))}")
        config[key] = value
    if not 0 < float(config["percentile"]) < 100:
        raise ValueError(f"slo.percentile must be between 0 and 100, got {config['percentile']!r}")
    return config


def goodput_count(records, slo):
    limits = {"ttft": slo.get("ttft_ms"), "itl": slo.get("itl_ms"), "tpot": slo.get("tpot_ms")}
    good = 0
    for record in records:
        if not record.ok:
            continue
        ttft = (record.chunk_times[0] - record.start) * 1000
        e2el = (record.chunk_times[-1] - record.start) * 1000
        tpot = (e2el - ttft) / (record.output_tokens - 1) if record.output_tokens > 1 else 0.0
        checks = [
            limits["ttft"] is None or ttft <= limits["ttft"],
            limits["itl"] is None or tpot <= limits["itl"],
            limits["tpot"] is None or tpot <= limits["tpot"],
            slo.get("e2e_ms") is None or e2el <= slo["e2e_ms"],
        ]
        good += all(checks)
    return good


def evaluate_slo(result, slo):
    """One check per configured objective plus the error rate; `passed` is their conjunction."""
    p = slo["percentile"]
    checks = []
    for field in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        threshold = slo.get(field)
        if threshold is None:
            continue
        metric = SLO_METRIC[field]
        value = result.get(f"{percentile_key(p)}_{metric}_ms")
        checks.append(
            {
                "name": f"{metric}_{percentile_key(p)}",
                "description": f"{METRIC_LABELS[metric]} {percentile_key(p)} < {threshold:g} ms",
                "metric": metric,
                "percentile": p,
                "threshold_ms": float(threshold),
                "value_ms": value,
                "passed": value is not None and value < threshold,
            }
        )
    total = result["completed"] + result["failed"]
    error_rate = result["failed"] / total if total else 1.0
    checks.append(
        {
            "name": "error_rate",
            "description": f"error rate <= {slo['max_error_rate']:g}",
            "metric": "error_rate",
            "threshold": float(slo["max_error_rate"]),
            "value": error_rate,
            "passed": total > 0 and error_rate <= slo["max_error_rate"],
        }
    )
    return {"config": slo, "checks": checks, "passed": all(c["passed"] for c in checks)}


def error_summary(records):
    """Failed requests by kind, up to 10 samples, and the request errors: every failure but HTTP 429 (the
    gateway's limits at work), with the first of them (lowest request index, i.e. sent first)."""
    by_kind, samples, first_error = {}, [], None
    for record in records:
        if record.ok:
            continue
        by_kind[record.error_kind] = by_kind.get(record.error_kind, 0) + 1
        sample = {
            "index": record.index,
            "kind": record.error_kind,
            "status": record.status,
            "message": record.error,
            "retry_after": record.retry_after,
        }
        if len(samples) < 10:
            samples.append(sample)
        if first_error is None and record.error_kind != "rate_limited":
            first_error = sample
    rate_limited = by_kind.get("rate_limited", 0)
    return {
        "by_kind": by_kind,
        "rate_limited": rate_limited,
        "request_errors": sum(by_kind.values()) - rate_limited,
        "first_error": first_error,
        "samples": samples,
    }


def peak_rates(records):
    """vLLM's max_output_tokens_per_s / max_concurrent_requests over 1-second buckets."""
    ok = [r for r in records if r.ok]
    if not ok:
        return {"max_output_tokens_per_s": 0.0, "max_concurrent_requests": 0}
    t0 = min(r.start for r in ok)
    size = math.ceil(max(r.chunk_times[-1] for r in ok) - t0) + 1
    tokens, active = [0.0] * size, [0] * size
    for record in ok:
        per_chunk = record.output_tokens / len(record.chunk_times)
        for t in record.chunk_times:
            tokens[int(t - t0)] += per_chunk
        for second in range(int(record.start - t0), int(record.chunk_times[-1] - t0) + 1):
            active[second] += 1
    return {"max_output_tokens_per_s": max(tokens), "max_concurrent_requests": max(active)}


def histogram(values, bins=24):
    """{'edges': [...], 'counts': [...]} over [min, max] (values in the caller's unit)."""
    if not values:
        return {"edges": [], "counts": []}
    low, high = min(values), max(values)
    if high <= low:
        return {"edges": [low, low], "counts": [len(values)]}
    width = (high - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / width))] += 1
    return {"edges": [low + i * width for i in range(bins + 1)], "counts": counts}


def distributions(records):
    values = per_request_values(records)
    return {
        "ttft_ms": histogram([v * 1000 for v in values["ttft"]]),
        "itl_ms": histogram([v * 1000 for v in values["itl"]]),
    }


def throughput_series(records, t0, t_end, max_points=60):
    """Output tokens/s per bin (tokens spread evenly over a request's chunks) and requests in flight at each
    bin's midpoint."""
    span = max(t_end - t0, 1e-3)
    width = next((w for w in (0.25, 0.5, 1, 2, 5, 10, 30, 60, 300) if span / w <= max_points), span / max_points)
    size = math.ceil(span / width) or 1
    tokens, active = [0.0] * size, [0] * size
    for record in records:
        if record.chunk_times and record.output_tokens:
            per_chunk = record.output_tokens / len(record.chunk_times)
            for t in record.chunk_times:
                tokens[min(size - 1, int((t - t0) / width))] += per_chunk
        if record.error_kind != "not_sent":  # in flight at the bin's midpoint
            end = record.end or t_end
            for b in range(size):
                if record.start <= t0 + (b + 0.5) * width < end:
                    active[b] += 1
    return {
        "bin_s": width,
        "t_s": [round((i + 0.5) * width, 3) for i in range(size)],
        "output_tokens_per_s": [round(v / width, 3) for v in tokens],
        "active_requests": active,
    }


def request_rows(records, t0, with_chunks=False):
    """Per-request timeline records (times relative to the run start, ms)."""
    rows = []
    for r in records:
        row = {
            "index": r.index,
            "start_ms": round((r.start - t0) * 1000, 3) if r.error_kind != "not_sent" else None,
            "ttft_ms": round(r.ttft * 1000, 3) if r.chunk_times else None,
            "e2el_ms": round(r.e2e * 1000, 3) if r.chunk_times else None,
            "end_ms": round((r.end - t0) * 1000, 3) if r.end else None,
            "chunks": len(r.chunk_times),
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "tokens_estimated": r.tokens_estimated,
            "status": r.status,
            "ok": r.ok,
            "error_kind": r.error_kind,
        }
        if with_chunks:
            row["chunk_ms"] = [round((t - r.start) * 1000, 3) for t in r.chunk_times]
        rows.append(row)
    return rows
