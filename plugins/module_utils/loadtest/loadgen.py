# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Load generator for OpenAI-compatible streaming endpoints (stdlib only: asyncio + raw HTTP/1.1).

Modes: `closed` (N concurrent streams, each sends its next request when the last ends), `poisson`
(open loop, exponential inter-arrival times, rescaled like `vllm bench serve` so the n-th request is
sent at n/rate) and `constant` (open loop, fixed interval). Open-loop runs may cap concurrency with
`max_concurrency`; a request's clock starts when it is sent (after waiting for that cap), as in vLLM.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.http_stream import (
    BodyCollector,
    HTTPClient,
    Target,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.prompts import (
    estimate_tokens,
    fit_token_model,
    make_prompts,
    words_for_tokens,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.sse_recorder import SSERecorder

MODES = ("closed", "poisson", "constant")
_PROMPT_MARK = "\x00tokenfactory-prompt\x00"
APIS = ("chat", "completions")


class LoadSpec:
    """What to send. Validated in __init__ (errors name the field and the allowed values)."""

    def __init__(
        self,
        base_url,
        model,
        api="chat",
        api_key=None,
        mode="closed",
        concurrency=4,
        request_rate=None,
        max_concurrency=None,
        num_requests=32,
        warmup_requests=2,
        prompt_tokens=128,
        output_tokens=64,
        ignore_eos=True,
        seed=0,
        prompts=None,
        request_timeout=60.0,
        max_duration=300.0,
        extra_body=None,
        validate_certs=True,
        ca_path=None,
    ):
        if api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, got {api!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode != "closed" and not (request_rate and request_rate > 0):
            raise ValueError(f"request_rate must be > 0 for mode {mode}")
        _positive(concurrency=concurrency, num_requests=num_requests, output_tokens=output_tokens)
        _positive(prompt_tokens=prompt_tokens, request_timeout=request_timeout, max_duration=max_duration)
        if warmup_requests < 0:
            raise ValueError("warmup_requests must be >= 0")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if prompts is not None and not prompts:
            raise ValueError("prompts must not be empty when given")
        root = base_url.rstrip("/")
        if root.split("://", 1)[-1].count("/") == 0:
            root += "/v1"  # http://host:port -> http://host:port/v1
        path = "/chat/completions" if api == "chat" else "/completions"
        self.url = root + path
        self.target = Target(self.url, validate_certs=validate_certs, ca_path=ca_path)
        self.model, self.api, self.api_key, self.mode = model, api, api_key, mode
        self.concurrency, self.request_rate, self.max_concurrency = concurrency, request_rate, max_concurrency
        self.num_requests, self.warmup_requests = num_requests, warmup_requests
        self.prompt_tokens, self.output_tokens, self.ignore_eos = prompt_tokens, output_tokens, ignore_eos
        self.seed, self.prompts = seed, list(prompts) if prompts else None
        self.request_timeout, self.max_duration = float(request_timeout), float(max_duration)
        self.extra_body = dict(extra_body or {})
        self._body_parts = None

    def body(self, prompt):
        """Request body for one prompt: the fixed JSON around the prompt is encoded once per spec."""
        if self._body_parts is None:
            self._body_parts = self._encode(_PROMPT_MARK).split(json.dumps(_PROMPT_MARK).encode())
        if len(self._body_parts) != 2:  # the mark also occurs elsewhere (extra_body): encode it all
            return self._encode(prompt)
        return json.dumps(prompt).encode().join(self._body_parts)

    def _encode(self, prompt):
        doc = {"model": self.model}
        if self.api == "chat":
            doc["messages"] = [{"role": "user", "content": prompt}]
        else:
            doc["prompt"] = prompt
        doc.update(max_tokens=self.output_tokens, stream=True, stream_options={"include_usage": True})
        if self.ignore_eos:
            doc["ignore_eos"] = True
        doc.update(self.extra_body)
        return json.dumps(doc, separators=(",", ":")).encode()

    def headers(self):
        headers = [("Content-Type", "application/json"), ("Accept", "text/event-stream")]
        if self.api_key:
            headers.append(("Authorization", f"Bearer {self.api_key}"))
        return headers


def _positive(**values):
    for name, value in values.items():
        if value is None or value <= 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")


class RequestRecord:
    """Timeline of one request (perf_counter seconds) and its outcome."""

    __slots__ = (
        "chunk_times",
        "end",
        "error",
        "error_kind",
        "index",
        "ok",
        "output_tokens",
        "prompt",
        "prompt_tokens",
        "retry_after",
        "start",
        "status",
        "tokens_estimated",
        "usage_reported",
    )

    def __init__(self, index, prompt):
        self.index, self.prompt = index, prompt
        self.start = self.end = 0.0
        self.chunk_times = []
        self.status = 0
        self.ok = False
        self.error_kind = self.error = self.retry_after = None
        self.prompt_tokens = self.output_tokens = 0
        self.usage_reported = False
        self.tokens_estimated = False

    @property
    def ttft(self):
        return self.chunk_times[0] - self.start if self.chunk_times else None

    @property
    def e2e(self):
        return self.chunk_times[-1] - self.start if self.chunk_times else None


def _sink_factory(status, headers):
    return SSERecorder() if status == 200 else BodyCollector(limit=4096)


class LoadGenerator:
    """Runs warmup and the measured load against `spec.url`; results are RequestRecord lists."""

    def __init__(self, spec, client=None, redact=()):
        self.spec = spec
        self.client = client or HTTPClient()
        self.redact = [s for s in redact if s]
        if spec.api_key:
            self.redact.append(spec.api_key)
        self._head_start = spec.target.request_head("POST", spec.headers(), 0)[: -len(b"0\r\n\r\n")]
        self.token_model = (0.0, 1.0)
        self.first_success_wall = None
        self.deadline_hit = False

    # -- requests -----------------------------------------------------------------------------
    async def send(self, record):
        body = self.spec.body(record.prompt)
        head = self._head_start + b"%d\r\n\r\n" % len(body)
        record.start = time.perf_counter()
        result = await self.client.request(self.spec.target, head, body, _sink_factory, self.spec.request_timeout)
        record.end = time.perf_counter()
        self._complete(record, result)
        return record

    def _complete(self, record, result):
        record.status = result.status
        sink = result.sink
        if isinstance(sink, SSERecorder):
            record.chunk_times = sink.chunk_times
            usage = sink.usage
            if usage and usage.get("completion_tokens") is not None:
                record.usage_reported = True
                record.output_tokens = int(usage.get("completion_tokens") or 0)
                record.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            else:  # documented fallback: one token per content chunk, prompt characters / 4
                record.tokens_estimated = True
                record.output_tokens = len(sink.chunk_times)
                record.prompt_tokens = estimate_tokens(record.prompt)
        if result.error_kind:
            record.error_kind, record.error = result.error_kind, result.error
        elif record.status != 200:
            record.error_kind = "rate_limited" if record.status == 429 else f"http_{record.status}"
            record.error = _error_text(sink.body() if sink else b"") or f"HTTP {record.status}"
            record.retry_after = result.headers.get("retry-after")
        elif sink.stream_error:
            code = sink.stream_error.get("code")
            record.error_kind = "rate_limited" if code in (429, "429") else "stream_error"
            record.error = sink.stream_error["message"]
        elif not sink.chunk_times:
            record.error_kind, record.error = "no_content", "stream ended without a content chunk"
        elif not sink.done:
            record.error_kind, record.error = "incomplete_stream", "stream ended without data: [DONE]"
        else:
            record.ok = True
            if self.first_success_wall is None:
                self.first_success_wall = time.time() - (time.perf_counter() - record.chunk_times[0])
        if record.error:
            record.error = self._redacted(record.error)[:300]

    def _redacted(self, text):
        for secret in self.redact:
            text = text.replace(secret, "***")
        return text

    # -- phases -------------------------------------------------------------------------------
    async def warmup(self):
        """Warmup requests (excluded from results); fits the prompt word/token model from their usage."""
        spec = self.spec
        if not spec.warmup_requests:
            return []
        base = words_for_tokens(spec.prompt_tokens)
        lengths = [max(1, base // 2) if i % 2 else base for i in range(spec.warmup_requests)]
        prompts = [make_prompts(1, words, spec.seed, f"warmup-{i}")[0] for i, words in enumerate(lengths)]
        records = [RequestRecord(-1 - i, p) for i, p in enumerate(prompts)]
        await self._closed_loop(records, min(spec.concurrency, len(records)), time.perf_counter() + spec.max_duration)
        _mark_unfinished(records)
        samples = [(w, r.prompt_tokens) for w, r in zip(lengths, records, strict=True) if r.ok and r.usage_reported]
        if samples:
            self.token_model = fit_token_model(samples)
        return records

    def measured_prompts(self):
        spec = self.spec
        if spec.prompts:
            return [spec.prompts[i % len(spec.prompts)] for i in range(spec.num_requests)]
        words = words_for_tokens(spec.prompt_tokens, self.token_model)
        return make_prompts(spec.num_requests, words, spec.seed)

    async def run(self, prompts=None):
        """The measured run; returns (records, t0, t_end) with perf_counter times."""
        spec = self.spec
        records = [RequestRecord(i, p) for i, p in enumerate(prompts or self.measured_prompts())]
        t0 = time.perf_counter()
        deadline = t0 + spec.max_duration
        if spec.mode == "closed":
            await self._closed_loop(records, spec.concurrency, deadline)
        else:
            await self._open_loop(records, deadline)
        _mark_unfinished(records)
        return records, t0, time.perf_counter()

    async def _closed_loop(self, records, workers, deadline):
        queue = iter(records)
        stop = asyncio.Event()

        async def worker():
            for record in queue:
                if stop.is_set():
                    _not_sent(record)
                    continue
                await self.send(record)

        await self._bounded([worker() for _i in range(min(workers, len(records)))], deadline, stop)

    async def _open_loop(self, records, deadline):
        spec = self.spec
        offsets = arrival_offsets(len(records), spec.mode, spec.request_rate, spec.seed)
        cap = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        stop = asyncio.Event()

        async def one(record, offset, t_start):
            delay = t_start + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if stop.is_set():
                _not_sent(record)
                return
            if cap is None:
                await self.send(record)
                return
            async with cap:
                if stop.is_set():
                    _not_sent(record)
                    return
                await self.send(record)

        t_start = time.perf_counter()
        await self._bounded([one(r, o, t_start) for r, o in zip(records, offsets, strict=True)], deadline, stop)

    async def _bounded(self, coroutines, deadline, stop):
        """Run coroutines; at the deadline stop issuing and fail in-flight requests (no hang)."""
        tasks = [asyncio.ensure_future(c) for c in coroutines]
        if not tasks:
            return
        loop = asyncio.get_running_loop()
        gathered = asyncio.gather(*tasks)
        timeout = max(0.0, deadline - time.perf_counter())
        done, _pending = await asyncio.wait([gathered], timeout=timeout)
        if not done:
            self.deadline_hit = True
            stop.set()
            self.client.abort_all("deadline", "run exceeded max_duration")
            grace = loop.time() + 5.0
            while not gathered.done() and loop.time() < grace:
                await asyncio.sleep(0.05)
                self.client.abort_all("deadline", "run exceeded max_duration")
            if not gathered.done():
                gathered.cancel()
        await asyncio.gather(gathered, return_exceptions=True)


def _mark_unfinished(records):
    for record in records:
        if not record.ok and record.error_kind is None:
            record.error_kind, record.error = "deadline", "cancelled at the end of max_duration"


def _not_sent(record):
    record.error_kind, record.error = "not_sent", "not sent: run exceeded max_duration"


def _error_text(body):
    try:
        doc = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:300]
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)[:300]
        return str(err)[:300]
    return str(doc)[:300]


def arrival_offsets(count, mode, rate, seed):
    """Send offsets (s) of open-loop requests: constant 1/rate spacing or Poisson, rescaled to count/rate."""
    if mode == "constant":
        return [i / rate for i in range(count)]
    rng = random.Random(f"tokenfactory-{seed}-arrivals")  # noqa: S311 - reproducible load, not crypto
    gaps = [rng.expovariate(rate) for _i in range(count)]
    offsets, total = [], 0.0
    for gap in gaps:
        total += gap
        offsets.append(total)
    scale = (count / rate) / total if total else 1.0
    return [o * scale for o in offsets]
