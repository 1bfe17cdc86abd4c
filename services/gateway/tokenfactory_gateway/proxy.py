"""OpenAI-compatible routes: authenticate, route by `model`, rate-limit, forward, meter."""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid

import aiohttp
import orjson
from aiohttp import web

from . import errors
from .keys import bearer_token
from .metering import UsageRecord
from .ratelimit import scopes_for
from .sse import SseFilter, token_counts, usage_of

LOG = logging.getLogger("tokenfactory_gateway")
UPSTREAM_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError)
UTC = datetime.UTC


class Proxy:
    def __init__(self, gw):
        self.gw = gw

    # -- authentication and admission ---------------------------------------------------------
    async def authenticate(self, request: web.Request, fresh=True):
        """The caller's KeyInfo; `fresh` also confirms with Redis that no admin change invalidated it."""
        key = bearer_token(request.headers.get("Authorization"))
        info = await self.gw.keys.lookup(key) if key else None
        if info is None:
            raise errors.invalid_api_key()
        if fresh:
            info = (await self.admit(key, info, None))[0]
        request["log"].update(tenant=info.tenant, key_id=str(info.key_id))
        return key, info

    async def admit(self, key, info, model):
        """Resolve the deployment and pass its rate limits in one Redis call that also carries the auth
        epoch; when the epoch moved, the key is re-read before anything is decided (model None: only
        the epoch check)."""
        gw = self.gw
        for _attempt in range(3):
            dep = None if model is None else gw.routing.table.resolve(model, info.tenant, info.granted_models)
            scopes = scopes_for(gw.cfg.redis_key_prefix, info, dep) if dep else []
            if not scopes and gw.invalidation.live:
                # No limits to count, and pushed invalidation is up: nothing to ask Redis.
                if dep is None and model is not None:
                    raise errors.model_not_found(model)
                return info, dep, scopes
            try:
                verdict = await gw.limiter.admit(scopes, gw.keys.epoch)
            except Exception as exc:
                raise errors.ApiError(
                    503, "Rate limiter unavailable.", "service_unavailable", "redis_unavailable"
                ) from exc
            if verdict.stale_epoch:
                gw.keys.observe_epoch(verdict.epoch)
                info = await gw.keys.lookup(key)
                if info is None:
                    raise errors.invalid_api_key()
                continue
            if model is None:
                return info, None, scopes
            if dep is None:
                raise errors.model_not_found(model)
            if not verdict.allowed:
                gw.metrics.rate_limited.labels(model, info.tenant, verdict.scope).inc()
                raise errors.rate_limited(verdict.scope, verdict.retry_after_s)
            return info, dep, scopes
        raise errors.ApiError(503, "Authorization state is changing; retry.", "service_unavailable", "auth_epoch")

    # -- routes --------------------------------------------------------------------------------
    async def chat_completions(self, request):
        return await self.forward(request, "/v1/chat/completions")

    async def completions(self, request):
        return await self.forward(request, "/v1/completions")

    async def models(self, request):
        info = (await self.authenticate(request))[1]
        names = self.gw.routing.table.models_for(info.tenant, info.granted_models)
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "tokenfactory"} for n in names]
        return web.json_response({"object": "list", "data": data}, dumps=_dumps)

    async def model(self, request):
        info = (await self.authenticate(request))[1]
        name = request.match_info["model"]
        if name not in self.gw.routing.table.models_for(info.tenant, info.granted_models):
            raise errors.model_not_found(name)
        return web.json_response(
            {"id": name, "object": "model", "created": 0, "owned_by": "tokenfactory"}, dumps=_dumps
        )

    # -- forwarding ----------------------------------------------------------------------------
    async def forward(self, request: web.Request, route: str):
        t0 = time.perf_counter()
        started = datetime.datetime.now(UTC)
        key, info = await self.authenticate(request, fresh=False)  # admit() below checks the epoch
        raw = await request.read()
        payload = _json_object(raw)
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            raise errors.ApiError(400, "`model` is required and must be a string.", param="model", code="missing_model")
        stream = payload.get("stream") is True
        options = payload.get("stream_options")
        wants_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
        if stream and not wants_usage:
            payload["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        info, dep, scopes = await self.admit(key, info, model)
        log = request["log"]
        log.update(model=model, deployment=dep.name, stream=stream)
        call = Call(self.gw, request, info, dep, scopes, route, stream, t0, started)
        self.gw.metrics.in_flight.inc()
        self.gw.in_flight += 1
        try:
            body = orjson.dumps(payload) if stream and not wants_usage else raw
            return await call.run(body, strip_usage=stream and not wants_usage)
        finally:
            self.gw.in_flight -= 1
            self.gw.metrics.in_flight.dec()
            call.finish()


class Call:
    """One proxied request: forwards it and turns what happened into metrics, a ledger record and a log."""

    def __init__(self, gw, request, info, dep, scopes, route, stream, t0, started):
        self.gw, self.request, self.info, self.dep, self.scopes = gw, request, info, dep, scopes
        self.route, self.stream, self.t0, self.started = route, stream, t0, started
        self.status = 0
        self.error: str | None = None
        self.usage: dict | None = None
        self.events = 0
        self.ttft: float | None = None
        self.disconnected = False
        self.request_id = uuid.uuid4()
        self.debited = False

    async def run(self, body: bytes, strip_usage: bool):
        headers = {"Content-Type": "application/json", "X-Request-Id": str(self.request_id)}
        try:
            upstream = await self.gw.session.post(self.dep.upstream + self.route, data=body, headers=headers)
        except TimeoutError:
            raise self.fail(504, "Upstream model server timed out.", "upstream_timeout") from None
        except UPSTREAM_ERRORS:
            raise self.fail(502, "Upstream model server unavailable.", "upstream_unavailable") from None
        async with upstream:
            self.status = upstream.status
            if self.stream and upstream.status == 200 and upstream.content_type == "text/event-stream":
                return await self.relay_stream(upstream, strip_usage)
            try:
                data = await upstream.read()
            except TimeoutError:
                raise self.fail(504, "Upstream model server timed out.", "upstream_timeout") from None
            except UPSTREAM_ERRORS:
                raise self.fail(502, "Upstream model server closed the connection.", "upstream_unavailable") from None
            self.usage = usage_of(data) if upstream.status == 200 else None
            if upstream.status >= 400:
                self.error = f"upstream status {upstream.status}"
            await self.debit()
            return web.Response(
                status=upstream.status,
                body=data,
                headers={
                    "Content-Type": upstream.headers.get("Content-Type", "application/json"),
                    "X-Request-Id": str(self.request_id),
                },
            )

    async def relay_stream(self, upstream, strip_usage: bool):
        sse = SseFilter(strip_usage)
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Request-Id": str(self.request_id),
            }
        )
        await resp.prepare(self.request)
        deadline = None
        last = None
        itl = self.gw.metrics.route(self.dep.model, self.info.tenant).itl
        try:
            async for chunk in upstream.content.iter_any():
                out = sse.feed(chunk)
                fresh = sse.content_events - self.events
                if fresh:
                    now = time.perf_counter()
                    if last is None:
                        self.ttft, last, fresh = now - self.t0, now, fresh - 1
                    gap = (now - last) / fresh if fresh else 0.0
                    for _event in range(fresh):  # events that arrived together share the gap
                        itl.observe(gap)
                    last, self.events = now, sse.content_events
                if self.disconnected:
                    if time.monotonic() > deadline:
                        self.error = "client disconnected; drain timeout"
                        break
                    continue
                if out:
                    try:
                        await resp.write(out)
                    except ConnectionError:
                        self.disconnected, deadline = True, time.monotonic() + self.gw.cfg.drain_timeout
        except TimeoutError:
            self.status, self.error = 504, "upstream timed out mid-stream"
        except UPSTREAM_ERRORS:
            self.status, self.error = 502, "upstream closed the stream"
        except Exception:  # headers are sent: end the stream cleanly instead of a second response
            LOG.exception("stream relay failed")
            self.status, self.error = 500, "gateway error mid-stream"
        tail = sse.finish()
        self.usage, self.error = sse.usage, self.error or sse.error
        await self.debit()
        if not self.disconnected:
            try:
                if self.status != 200:
                    tail += b"data: " + errors.error_body(self.error, "api_error", "upstream_error") + b"\n\n"
                if tail:
                    await resp.write(tail)
                await resp.write_eof()
            except ConnectionError:
                self.disconnected = True
        # The client has its last byte. Let streams whose chunks are already waiting be relayed before this
        # one's bookkeeping (ledger record, metrics, access log): when many streams end at once, it would
        # otherwise delay each of their last chunks by every earlier stream's bookkeeping.
        await asyncio.sleep(0)
        return resp

    async def debit(self) -> None:
        """Charge token limits with the real usage before the response completes (one Redis call)."""
        prompt, completion = token_counts(self.usage)
        if not any(s.tpm for s in self.scopes) or not prompt + completion:
            return
        self.debited = True
        try:
            await self.gw.limiter.debit(self.scopes, prompt + completion)
        except Exception as exc:  # the response must still complete
            self.gw.log_background_error(exc)

    def fail(self, status, message, code):
        self.status, self.error = status, code
        return errors.ApiError(status, message, "api_error", code)

    def finish(self) -> None:
        """Meter, debit token limits, count and log; runs for every admitted request, also on errors."""
        gw, info, dep = self.gw, self.info, self.dep
        latency = time.perf_counter() - self.t0
        prompt, completion = token_counts(self.usage)
        estimated = self.usage is None and self.events > 0
        if estimated:
            completion = self.events  # one streamed chunk per token: the best evidence left
        status = self.status or 500
        price = dep.price
        cost = price.cost(prompt, completion)
        gw.meter.record(
            UsageRecord(
                request_id=self.request_id,
                started_at=self.started,
                finished_at=datetime.datetime.now(UTC),
                tenant=info.tenant,
                key_id=info.key_id,
                model=dep.model,
                deployment=dep.name,
                route=self.route,
                stream=self.stream,
                status=status,
                error=self.error,
                client_disconnected=self.disconnected,
                usage_estimated=estimated,
                prompt_tokens=prompt,
                completion_tokens=completion,
                latency_ms=latency * 1000,
                ttft_ms=None if self.ttft is None else self.ttft * 1000,
                currency=price.currency,
                input_per_1m=price.input_per_1m,
                output_per_1m=price.output_per_1m,
                cost=cost,
            )
        )
        if prompt + completion and not self.debited and any(s.tpm for s in self.scopes):
            gw.spawn(gw.limiter.debit(self.scopes, prompt + completion))
        m = gw.metrics.route(dep.model, info.tenant)
        m.request(status).inc()
        if status >= 400 or self.error:
            gw.metrics.errors.labels(*m.labels, self.error or str(status)).inc()
        m.prompt.inc(prompt)
        m.completion.inc(completion)
        m.cost_in(price.currency).inc(float(cost))
        m.latency.observe(latency)
        if self.ttft is not None:
            m.ttft.observe(self.ttft)
        if self.disconnected:
            m.disconnects.inc()
        self.request["log"].update(
            request_id=str(self.request_id),
            upstream_status=self.status,
            prompt_tokens=prompt,
            completion_tokens=completion,
            ttft_ms=None if self.ttft is None else round(self.ttft * 1000, 3),
            client_disconnected=self.disconnected,
            error=self.error,
        )


def _json_object(body: bytes) -> dict:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise errors.ApiError(400, "Request body is not valid JSON.", code="invalid_json") from None
    if not isinstance(payload, dict):
        raise errors.ApiError(400, "Request body must be a JSON object.", code="invalid_json")
    return payload


def _dumps(obj) -> str:
    return orjson.dumps(obj).decode()
