# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""One validation run: warmup, metrics scrape before, measured load with sampled scrapes, scrape after.

`run_validation(options)` returns a JSON-ready dict (vLLM bench serve key names at the top level). The
API key is only ever placed in the Authorization header; it is not part of any returned value.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.http_stream import (
    HTTPClient,
    Target,
    fetch,
    redact_url,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.loadgen import LoadGenerator, LoadSpec
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import event_loop, prom_scrape, stats

SCHEMA = "tokenfactory.spark/validation/v1"
FIRST_SAMPLE_GAP = 0.1  # seconds between the first engine gauge samples (then doubling up to scrape_interval)
LOAD_OPTIONS = (
    "mode",
    "concurrency",
    "request_rate",
    "max_concurrency",
    "num_requests",
    "warmup_requests",
    "prompt_tokens",
    "output_tokens",
    "ignore_eos",
    "seed",
    "request_timeout",
    "max_duration",
)


def build_spec(options):
    """LoadSpec from module-style options (unknown/None values fall back to LoadSpec defaults)."""
    kwargs = {k: options[k] for k in LOAD_OPTIONS if options.get(k) is not None}
    for key in ("api", "api_key", "prompts", "extra_body", "validate_certs", "ca_path"):
        if options.get(key) is not None:
            kwargs[key] = options[key]
    return LoadSpec(options["base_url"], options["model"], **kwargs)


def plan(options):
    """What a run would send (check mode): no request is made."""
    spec = build_spec(options)
    stats.slo_config(options.get("slo"))
    return {
        "url": redact_url(spec.url),
        "metrics_url": redact_url(options["metrics_url"]) if options.get("metrics_url") else None,
        "config": _config(spec),
    }


def run_validation(options):
    return event_loop.run(_run(options))


async def _run(options):
    spec = build_spec(options)
    slo = stats.slo_config(options.get("slo"))
    model = options["model"]
    client = HTTPClient()
    generator = LoadGenerator(spec, client)
    metrics = _MetricsReader(options, client, model)
    started_at = time.time()
    try:
        warmup = await generator.warmup()
        before = await metrics.full()
        sampler = asyncio.ensure_future(metrics.sample_loop())
        records, t0, t_end = await generator.run()
        metrics.stop()
        await sampler
        client_usage_tokens = sum(r.output_tokens for r in records if r.usage_reported)
        after = await metrics.full_settled(before, client_usage_tokens)
    finally:
        client.close()
    result = {"schema": SCHEMA, "deployment": options.get("deployment") or model, "model": model}
    result.update(stats.summarize(records, t_end - t0, slo))
    result.update(
        {
            "api": spec.api,
            "url": redact_url(spec.url),
            "started_at": started_at,
            "ended_at": time.time(),
            "first_token_at": generator.first_success_wall,
            "deadline_hit": generator.deadline_hit,
            "config": _config(spec),
            "warmup": {
                "requests": len(warmup),
                "succeeded": sum(r.ok for r in warmup),
                "prompt_token_model": {
                    "overhead_tokens": round(generator.token_model[0], 3),
                    "tokens_per_word": round(generator.token_model[1], 4),
                },
            },
            "series": stats.throughput_series(records, t0, t_end),
            "distributions": stats.distributions(records),
        }
    )
    result["server"] = metrics.summary(before, after, t0)
    result["token_check"] = _token_check(result["server"], client_usage_tokens, records)
    if options.get("return_requests"):
        result["requests"] = stats.request_rows(records, t0, with_chunks=True)
    return result


def _config(spec):
    return {
        "mode": spec.mode,
        "concurrency": spec.concurrency if spec.mode == "closed" else None,
        "request_rate": spec.request_rate if spec.mode != "closed" else None,
        "max_concurrency": spec.max_concurrency,
        "num_requests": spec.num_requests,
        "warmup_requests": spec.warmup_requests,
        "prompt_tokens": spec.prompt_tokens,
        "output_tokens": spec.output_tokens,
        "ignore_eos": spec.ignore_eos,
        "seed": spec.seed,
        "explicit_prompts": bool(spec.prompts),
        "request_timeout": spec.request_timeout,
        "max_duration": spec.max_duration,
        "api_key_used": bool(spec.api_key),
    }


def _token_check(server, client_usage_tokens, records):
    delta = (server or {}).get("generation_tokens_delta")
    return {
        "client_usage_output_tokens": client_usage_tokens,
        "server_generation_tokens_delta": delta,
        "all_requests_reported_usage": all(r.usage_reported for r in records),
        "match": None if delta is None else round(delta) == client_usage_tokens,
    }


class _MetricsReader:
    """Scrapes the engine's /metrics (if a URL is given): full snapshots and periodic gauge samples. The URL is
    dialled directly, or (options["metrics_proxy"], a service_proxy.ProxiedMetrics) read through the Kubernetes
    API server's service proxy, which a controller outside the cluster reaches."""

    def __init__(self, options, client, model):
        url = options.get("metrics_url")
        self.interval = float(options.get("scrape_interval") or 1.0)
        self.model = model
        self.client = client
        self.proxy = options.get("metrics_proxy") if url else None
        direct = url and self.proxy is None
        self.target = Target(url, options.get("validate_certs", True), options.get("ca_path")) if direct else None
        self.headers = [("Authorization", f"Bearer {options['metrics_token']}")] if options.get("metrics_token") else []
        self.samples = []
        self.errors = []
        self._stop = asyncio.Event()

    @property
    def enabled(self):
        return self.target is not None or self.proxy is not None

    async def _get(self, timeout):
        if self.proxy is not None:
            loop = asyncio.get_running_loop()
            body, error = await loop.run_in_executor(None, self.proxy.get, timeout)
            if error:
                self.errors.append(error)
            return body
        status, body, error = await fetch(self.client, self.target, timeout, self.headers)
        if error or status != 200:
            self.errors.append(error or f"HTTP {status}")
            return None
        return body

    async def full(self):
        if not self.enabled:
            return None
        body = await self._get(10.0)
        return prom_scrape.snapshot(prom_scrape.parse(body), self.model) if body is not None else None

    async def full_settled(self, before, client_tokens, tries=5):
        """Scrape after the run; re-read briefly while the engine's token counter trails the client."""
        after = await self.full()
        for _try in range(tries):
            if after is None or before is None:
                break
            got = after["counters"].get("generation_tokens", 0) - before["counters"].get("generation_tokens", 0)
            if got >= client_tokens:
                break
            await asyncio.sleep(0.2)
            after = await self.full()
        return after

    async def sample_loop(self):
        """Gauge samples from the start of the load: 0.1 s apart at first, the gap doubling up to scrape_interval,
        so a run of a second or two still charts KV cache and queue; one more sample when the load ends."""
        if not self.enabled:
            return
        wait = min(FIRST_SAMPLE_GAP, self.interval)
        while not self._stop.is_set():
            await self._sample()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait)
            wait = min(wait * 2, self.interval)
        await self._sample()

    async def _sample(self):
        started = time.perf_counter()
        body = await self._get(max(3.0, 2 * self.interval))
        if body is not None:
            sample = prom_scrape.sample_gauges(body, self.model)
            sample["t"] = started
            self.samples.append(sample)

    def stop(self):
        self._stop.set()

    def summary(self, before, after, t0):
        if not self.enabled:
            return {"scraped": False, "reason": "no metrics_url given"}
        if before is None or after is None:
            return {"scraped": False, "reason": "scrape failed", "errors": self.errors[:5]}
        out = prom_scrape.server_summary(before, after, self.samples)
        out["scraped"] = True
        out["scrape_errors"] = len(self.errors)
        out["series"] = {
            "t_s": [round(s["t"] - t0, 3) for s in self.samples],
            "kv_cache_usage": [s.get("kv_cache_usage") for s in self.samples],
            "running": [s.get("running") for s in self.samples],
            "waiting": [s.get("waiting") for s in self.samples],
        }
        return out
