# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Self-contained HTML report (inline CSS and SVG, no scripts or external resources)."""

from __future__ import annotations

import datetime
from html import escape

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.stats import METRIC_LABELS, METRICS
from ansible_collections.tokenfactory.spark.plugins.plugin_utils import report_data
from ansible_collections.tokenfactory.spark.plugins.plugin_utils import report_svg as svg

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1a202c;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #cbd5e0;padding-bottom:4px;margin-top:32px}
h3{font-size:15px}table{border-collapse:collapse;margin:8px 0 16px}
td,th{border:1px solid #e2e8f0;padding:4px 8px;font-size:13px;text-align:right}
th{background:#f7fafc}td:first-child,th:first-child{text-align:left}
.pass{color:#276749;font-weight:bold}.fail{color:#c53030;font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #edf2f7;background:#fff}
.note{color:#4a5568;font-size:12px}.facts td{text-align:left}
dt{font-weight:bold;font-size:13px}dd{font-size:13px;margin:0 0 6px 16px}
"""


def _num(value, digits=1, suffix=""):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{suffix}"
    return f"{value}{suffix}"


def _table(header, rows):
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _when(epoch):
    if not epoch:
        return "-"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _verdict(passed):
    return '<span class="pass">PASS</span>' if passed else '<span class="fail">FAIL</span>'


def _overview(doc):
    rows = []
    for item in doc["validations"]:
        v = item["validation"]
        rows.append(
            [
                escape(str(v.get("deployment"))),
                escape(str(item.get("host"))),
                f"{v['completed']}/{v['num_prompts']}",
                _num(v.get("p95_ttft_ms")),
                _num(v.get("p95_itl_ms")),
                _num(v.get("p50_tpot_ms")),
                _num(v.get("p95_e2el_ms")),
                _num(v.get("output_throughput")),
                _num(v.get("request_goodput"), 2),
                _bound_cell(v),
                str(v["errors"]["rate_limited"]),
                _verdict(v["slo"]["passed"]),
            ]
        )
    return _table(
        [
            "deployment",
            "host",
            "ok/total",
            "TTFT p95 ms",
            "ITL p95 ms",
            "TPOT p50 ms",
            "E2E p95 ms",
            "output tok/s",
            "goodput req/s",
            "memory-bandwidth limit",
            "HTTP 429",
            "SLO",
        ],
        rows,
    )


def _bound_cell(v):
    bound = v.get("memory_bound") or {}
    return _num(bound["fraction_of_bound"] * 100, 1, "%") if bound.get("computed") else "-"


def _latency_table(v):
    percentiles = v.get("percentiles", [50, 90, 95, 99])
    header = ["metric", "mean", "median", "std"] + [f"p{p:g}" for p in percentiles] + ["samples"]
    rows = []
    for metric in METRICS:
        row = [METRIC_LABELS[metric] + " (ms)"]
        row += [_num(v.get(f"{k}_{metric}_ms"), 2) for k in ("mean", "median", "std")]
        row += [_num(v.get(f"p{p:g}_{metric}_ms"), 2) for p in percentiles]
        row.append(str(v.get(f"count_{metric}", "-")))
        rows.append(row)
    return _table(header, rows)


def _slo_table(v):
    rows = []
    for check in v["slo"]["checks"]:
        measured = check.get("value_ms", check.get("value"))
        rows.append([escape(check["description"]), _num(measured, 3), _verdict(check["passed"])])
    return _table(["objective", "measured", "result"], rows)


def _server_table(server):
    if not server or not server.get("scraped"):
        reason = (server or {}).get("reason", "not collected")
        return f'<p class="note">Engine metrics: {escape(str(reason))}.</p>'
    kv = server.get("kv_cache_usage", {})
    rows = [
        ["KV-cache usage avg / peak", f"{_num((kv.get('avg') or 0) * 100)}% / {_num((kv.get('peak') or 0) * 100)}%"],
        [
            "requests running max / waiting max",
            f"{_num(server.get('num_requests_running_max'), 0)} / {_num(server.get('num_requests_waiting_max'), 0)}",
        ],
        ["preemptions", _num(server.get("preemptions_delta"), 0)],
        [
            "prefix-cache hit rate",
            _num((server["prefix_cache_hit_rate"] or 0) * 100, 1, "%")
            if server.get("prefix_cache_hit_rate") is not None
            else "-",
        ],
        ["generated tokens (server delta)", _num(server.get("generation_tokens_delta"), 0)],
        ["prompt tokens (server delta)", _num(server.get("prompt_tokens_delta"), 0)],
    ]
    for key in ("ttft", "itl", "e2el"):
        entry = server.get(f"server_{key}")
        if entry:
            rows.append(
                [
                    f"server {METRIC_LABELS[key]} mean / p50 / p95 / p99 ms (approx.)",
                    " / ".join(_num(entry.get(k), 1) for k in ("mean_ms", "p50_ms", "p95_ms", "p99_ms")),
                ]
            )
    return _table(["engine metric", "value"], [[escape(a), b] for a, b in rows])


def _charts(v):
    percentiles = v.get("percentiles", [50, 90, 95, 99])
    slo = v["slo"]["config"]
    thresholds = {
        "ttft": slo.get("ttft_ms"),
        "itl": slo.get("itl_ms"),
        "tpot": slo.get("tpot_ms"),
        "e2el": slo.get("e2e_ms"),
    }
    charts = [
        svg.bar_chart(
            f"{METRIC_LABELS[m]} percentiles",
            [f"p{p:g}" for p in percentiles],
            [v.get(f"p{p:g}_{m}_ms") for p in percentiles],
            "ms",
            thresholds[m],
        )
        for m in METRICS
    ]
    dist = v.get("distributions", {})
    for key, title, y_unit in (("ttft_ms", "TTFT distribution", "requests"), ("itl_ms", "ITL distribution", "chunks")):
        hist = dist.get(key) or {}
        charts.append(svg.histogram_chart(title, hist.get("edges", []), hist.get("counts", []), "ms", y_unit))
    series = v.get("series") or {}
    for title, key, label, y_unit in (
        ("Output throughput over time", "output_tokens_per_s", "output tok/s", "tok/s"),
        ("Requests in flight (client)", "active_requests", "active", "requests"),
    ):
        charts.append(svg.line_chart(title, series.get("t_s", []), [(label, series.get(key, []))], y_unit))
    server = v.get("server") or {}
    s_series = server.get("series") or {}
    if server.get("scraped"):
        kv = [x * 100 if x is not None else None for x in s_series.get("kv_cache_usage", [])]
        charts.append(
            svg.line_chart("KV-cache usage over time", s_series.get("t_s", []), [("KV %", kv)], "%", y_max=100)
        )
        charts.append(
            svg.line_chart(
                "Engine queue over time",
                s_series.get("t_s", []),
                [("running", s_series.get("running", [])), ("waiting", s_series.get("waiting", []))],
                "requests",
            )
        )
    return '<div class="charts">' + "".join(charts) + "</div>"


def _memory_bound(v):
    line = report_data.memory_bound_line(v)
    if line is None:
        return ""
    return f'<p class="bound">Memory bandwidth: {escape(line)}.</p>'


def _errors(v):
    errors = v["errors"]
    if not errors["by_kind"]:
        return '<p class="note">No failed requests.</p>'
    rows = [[escape(k), str(n)] for k, n in sorted(errors["by_kind"].items())]
    samples = [
        [str(s["index"]), escape(str(s["kind"])), str(s["status"]), escape(str(s["message"]))]
        for s in errors["samples"]
    ]
    return _table(["error kind", "requests"], rows) + _table(["request", "kind", "HTTP", "message"], samples)


def _validation_section(item):
    v = item["validation"]
    cfg = v.get("config", {})
    load = (
        f"{cfg.get('mode')} load, concurrency {cfg.get('concurrency')}"
        if cfg.get("mode") == "closed"
        else f"{cfg.get('mode')} load at {cfg.get('request_rate')} req/s"
    )
    tokens_note = " (estimated: some streams had no usage)" if v.get("tokens_estimated") else ""
    check = v.get("token_check", {})
    match = check.get("match")
    token_line = (
        "generated-token delta not available"
        if match is None
        else f"engine generated-token delta {check.get('server_generation_tokens_delta'):.0f} "
        f"{'equals' if match else 'differs from'} client usage sum {check.get('client_usage_output_tokens')}"
    )
    return f"""
<h2>{escape(str(v.get("deployment")))} on {escape(str(item.get("host")))} {_verdict(v["slo"]["passed"])}</h2>
<p class="note">{escape(str(v.get("api")))} API at {escape(str(v.get("url")))}, model {escape(str(v.get("model")))};
{escape(load)}; {cfg.get("num_requests")} requests after {cfg.get("warmup_requests")} warmup;
~{cfg.get("prompt_tokens")} prompt / {cfg.get("output_tokens")} output tokens, seed {cfg.get("seed")};
started {_when(v.get("started_at"))}, duration {_num(v.get("duration"), 2)} s.</p>
<p>Throughput: {_num(v.get("request_throughput"), 2)} req/s, {_num(v.get("output_throughput"))} output tok/s,
{_num(v.get("total_token_throughput"))} total tok/s; tokens in {v.get("total_input_tokens")} /
out {v.get("total_output_tokens")}{escape(tokens_note)}; {escape(token_line)}.</p>
{_memory_bound(v)}
<h3>Service level objectives</h3>{_slo_table(v)}
<h3>Latency (client, successful requests)</h3>{_latency_table(v)}
{_charts(v)}
<h3>Engine</h3>{_server_table(v.get("server"))}
<h3>Errors</h3>{_errors(v)}
"""


def _rollout(doc):
    rollout = doc["rollout"]
    roles = rollout.get("per_role_s") or {}
    plays = rollout.get("per_play_s") or {}
    lines = [
        ["playbook run (first task to last task)", _num(rollout.get("total_s"), 1, " s")],
        ["first task to serving endpoint", _num(rollout.get("first_task_to_serving_s"), 1, " s")],
        ["tasks", str(rollout.get("tasks"))],
    ]
    charts = svg.hbar_chart("Time per role", list(roles), list(roles.values()), "s")
    charts += svg.hbar_chart("Time per play (phase)", list(plays), list(plays.values()), "s")
    return _table(["rollout", "value"], lines) + f'<div class="charts">{charts}</div>'


def _hosts(doc):
    rows = []
    for host, facts in sorted(doc["hosts"].items()):
        text = ", ".join(f"{escape(str(k))}={escape(str(v))}" for k, v in facts.items())
        rows.append([escape(host), text])
    return (
        f'<div class="facts">{_table(["host", "facts"], rows)}</div>'
        if rows
        else '<p class="note">No facts gathered.</p>'
    )


def _definitions(doc):
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in doc["metric_definitions"].items())
    return f"<dl>{items}</dl>"


def render(doc):
    verdict = "no validations" if doc["passed"] is None else ("all SLOs met" if doc["passed"] else "SLO missed")
    sections = "".join(_validation_section(item) for item in doc["validations"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Token Factory validation report</title>
<style>{CSS}</style></head><body>
<h1>Token Factory validation report: {escape(verdict)}</h1>
<p class="note">Playbook {escape(str(doc.get("playbook")))}, generated {_when(doc.get("generated_at"))}.</p>
{_overview(doc)}
{sections}
<h2>Rollout timings</h2>{_rollout(doc)}
<h2>Hosts</h2>{_hosts(doc)}
<h2>Metric definitions</h2>{_definitions(doc)}
</body></html>
"""
