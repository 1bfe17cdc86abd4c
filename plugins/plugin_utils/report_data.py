# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Report document of a playbook run (validations, rollout timings, hosts): scrubbing, JSON, table, JUnit."""

from __future__ import annotations

import json
import re
import time
from xml.etree import ElementTree

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.http_stream import redact_url
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.stats import METRIC_DEFINITIONS

REPORT_SCHEMA = "tokenfactory.spark/validation-report/v1"
SECRET_KEY = re.compile(
    r"(^|[_-])(api_?key|token|password|passwd|secret|authorization|credentials?|private_key|bearer)$", re.I
)
NO_LOG_MARKERS = ("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER", "********")
HOST_FACTS = (
    "hostname",
    "fqdn",
    "architecture",
    "distribution",
    "distribution_version",
    "kernel",
    "processor_vcpus",
    "processor_count",
    "memtotal_mb",
    "product_name",
    "virtualization_type",
)
GPU_FACT = re.compile(r"(gpu|nvidia|cuda)", re.I)


def scrub(value, secrets=()):
    """Copy of `value` without secret-named keys, no_log placeholders, URL credentials or known secrets."""
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items() if not SECRET_KEY.search(str(k))}
    if isinstance(value, list | tuple):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, str):
        if "://" in value and "@" in value:
            value = redact_url(value)
        if value in NO_LOG_MARKERS:
            return "***"
        for secret in secrets:
            if secret:
                value = value.replace(secret, "***")
        return value
    return value


def host_facts(facts):
    """Whitelisted host facts plus any GPU-related ones (never the environment)."""

    def get(name):
        return facts.get(name, facts.get(f"ansible_{name}"))

    out = {name: get(name) for name in HOST_FACTS if get(name) is not None}
    for key, value in facts.items():
        bare = key[len("ansible_") :] if key.startswith("ansible_") else key
        if GPU_FACT.search(bare) and bare not in out and len(json.dumps(value, default=str)) < 4000:
            out[bare] = value
    return out


def rollout_timings(tasks, first_token_at=None):
    """tasks: [{'play', 'role', 'name', 'start', 'end'}] (epoch s). Per role, per play, and time to serving."""
    per_role, per_play = {}, {}
    for task in tasks:
        if task.get("end") is None:
            continue
        took = task["end"] - task["start"]
        role = task.get("role") or "(play tasks)"
        per_role[role] = per_role.get(role, 0.0) + took
        per_play[task["play"]] = per_play.get(task["play"], 0.0) + took
    starts = [t["start"] for t in tasks]
    ends = [t["end"] for t in tasks if t.get("end") is not None]
    first = min(starts) if starts else None
    return {
        "per_role_s": dict(sorted(per_role.items(), key=lambda kv: -kv[1])),
        "per_play_s": per_play,
        "first_task_at": first,
        "last_task_end_at": max(ends) if ends else None,
        "total_s": (max(ends) - first) if ends and first is not None else None,
        "serving_at": first_token_at,
        "first_task_to_serving_s": (first_token_at - first) if first_token_at and first is not None else None,
        "tasks": len(tasks),
    }


def build_report(playbook, validations, tasks, hosts, secrets=()):
    serving = [v["validation"].get("first_token_at") for v in validations if v["validation"].get("first_token_at")]
    doc = {
        "schema": REPORT_SCHEMA,
        "generated_at": time.time(),
        "playbook": playbook,
        "metric_definitions": METRIC_DEFINITIONS,
        "validations": validations,
        "rollout": rollout_timings(tasks, min(serving) if serving else None),
        "hosts": hosts,
    }
    doc["passed"] = all(v["validation"]["slo"]["passed"] for v in validations) if validations else None
    return scrub(doc, secrets)


def _ms(value):
    return f"{value:.1f}" if value is not None else "-"


def summary_table(doc):
    """Compact fixed-width table for the playbook output."""
    header = (
        "deployment",
        "host",
        "ok/total",
        "TTFT p50/p95",
        "ITL p50/p95",
        "TPOT p50",
        "E2E p95",
        "out tok/s",
        "KV peak",
        "BW limit",
        "429",
        "SLO",
    )
    rows = [header]
    for item in doc["validations"]:
        v = item["validation"]
        kv = (v.get("server") or {}).get("kv_cache_usage", {}).get("peak")
        bound = v.get("memory_bound") or {}
        rows.append(
            (
                str(v.get("deployment")),
                str(item.get("host")),
                f"{v['completed']}/{v['num_prompts']}",
                f"{_ms(v.get('p50_ttft_ms'))}/{_ms(v.get('p95_ttft_ms'))} ms",
                f"{_ms(v.get('p50_itl_ms'))}/{_ms(v.get('p95_itl_ms'))} ms",
                f"{_ms(v.get('p50_tpot_ms'))} ms",
                f"{_ms(v.get('p95_e2el_ms'))} ms",
                f"{v['output_throughput']:.0f}",
                f"{kv * 100:.0f}%" if kv is not None else "-",
                f"{bound['fraction_of_bound']:.1%}" if bound.get("computed") else "-",
                str(v["errors"]["rate_limited"]),
                "PASS" if v["slo"]["passed"] else "FAIL",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for item in doc["validations"]:
        line = memory_bound_line(item["validation"])
        if line:
            lines.append(f"{item['validation'].get('deployment')}: {line}")
    rollout = doc["rollout"]
    if rollout.get("total_s") is not None:
        line = f"rollout: {rollout['total_s']:.1f} s in {rollout['tasks']} tasks"
        if rollout.get("first_task_to_serving_s") is not None:
            line += f", first task -> serving endpoint {rollout['first_task_to_serving_s']:.1f} s"
        lines.append(line)
    return "\n".join(lines)


def memory_bound_line(v):
    """The measured decode rate next to the memory-bandwidth limit, in words (None without the inputs)."""
    bound = v.get("memory_bound")
    if not bound:
        return None
    if not bound.get("computed"):
        return f"memory-bandwidth limit not computed: {bound.get('reason')}"
    gpu = f"{bound.get('gpu_type') or 'GPU'} {bound['memory_bandwidth_gbps']:g} GB/s"
    gpu += f" x {bound['gpus']}" if bound.get("gpus", 1) > 1 else ""
    line = (
        f"decode {bound['decode_tokens_per_s']:.0f} tok/s is {bound['fraction_of_bound']:.1%} of the memory-bandwidth "
        f"limit {bound['bound_tokens_per_s']:.0f} tok/s ({gpu} / {bound['bytes_read_per_decoded'] / 1e6:.2f} MB read "
        f"per token: {bound['weights_bytes'] / 1e9:.2f} GB weights / {bound['streams']:.1f} streams + "
        f"{bound['context_tokens']:.0f} tokens x {bound['kv_bytes_per_context_position'] / 1024:.1f} KiB KV)"
    )
    if bound.get("above_bound"):
        line += "; above the limit: the model served is smaller than the one sized, or the GPU is not the one named"
    return line


def junit_xml(doc):
    """One <testsuite> per deployment, one <testcase> per SLO check (failure element when missed)."""
    suites = ElementTree.Element("testsuites", name="tokenfactory.spark validation")
    total = failures = 0
    for item in doc["validations"]:
        v = item["validation"]
        checks = v["slo"]["checks"]
        missed = [c for c in checks if not c["passed"]]
        suite = ElementTree.SubElement(
            suites,
            "testsuite",
            name=f"{v.get('deployment')}@{item.get('host')}",
            tests=str(len(checks)),
            failures=str(len(missed)),
            errors="0",
            time=f"{v.get('duration', 0):.3f}",
        )
        for check in checks:
            case = ElementTree.SubElement(
                suite, "testcase", classname=f"slo.{v.get('deployment')}", name=check["description"]
            )
            measured = (
                f"{check['value_ms']:.3f} ms"
                if check.get("value_ms") is not None
                else f"{check['value']:.4f}"
                if check.get("value") is not None
                else "no data"
            )
            ElementTree.SubElement(case, "system-out").text = f"measured {measured}"
            if not check["passed"]:
                failure = ElementTree.SubElement(
                    case, "failure", message=f"{check['description']}: measured {measured}", type="SLOBreach"
                )
                failure.text = json.dumps(check, default=str)
        total += len(checks)
        failures += len(missed)
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


def to_json(doc):
    return json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n"
