"""OpenAI-compatible routes: authenticate, check the metering fields, route by `model`, rate-limit, forward, meter.

Metering order of a proxied request: journaled when admitted (before it is forwarded), a stream's progress
journaled before its bytes go to the client, the ledger row journaled before the response's last byte
(`data: [DONE]` of a stream). A response that cannot be metered is not handed out (non-streamed) or does not
end as a success (streamed: an error event instead of `[DONE]`).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid

import aiohttp
import orjson
from aiohttp import web

from . import apiroutes, domain, errors, fields
from .admission import OVER_BUDGET, RATE_LIMITED, STALE, UNSEEDED
from .budget import BudgetExceeded
from .keys import bearer_token
from .metering import UsageRecord, opened_line
from .ratelimit import scopes_for
from .sse import DONE_EVENT, KEEP_ALL, KEEP_FINAL, KEEP_NONE, SseFilter

LOG = logging.getLogger("tokenfactory_gateway")
UPSTREAM_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError)
UTC = datetime.UTC
TRUNCATED = "upstream_stream_truncated"


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

    async def admit(self, key, info, model, request_of=None):
        """Resolve the deployment and admit the request in one Redis call: the auth epoch (when it moved, the
        key is re-read before anything is decided), the rate limits and, given `request_of` (payload, route,
        started), the spend budgets' reservation. Model None: only the epoch check. Returns (info, dep, rate-limit
        scopes, budget reservation)."""
        gw = self.gw
        epoch_changes = seeds = 0
        while True:
            dep = None if model is None else gw.routing.table.resolve(model, info.tenant, info.granted_models)
            scopes = scopes_for(gw.cfg.redis_key_prefix, info, dep) if dep else []
            reservation = gw.budgets.reservation(info, dep, *request_of) if dep and request_of else None
            if not scopes and reservation is None and gw.invalidation.live:
                # No limits to count, no budget, and pushed invalidation is up: nothing to ask Redis.
                if dep is None and model is not None:
                    raise errors.model_not_found(model)
                return info, dep, scopes, None
            try:
                verdict = await gw.admission.admit(gw.keys.epoch, scopes, reservation)
            except Exception as exc:
                raise errors.redis_unavailable() from exc
            if verdict.status == STALE:
                epoch_changes += 1
                if epoch_changes == 3:
                    raise errors.ApiError(503, "Authorization state is changing; retry.", "service_unavailable",
                                          "auth_epoch")  # fmt: skip
                gw.keys.observe_epoch(verdict.epoch)
                info = await gw.keys.lookup(key)
                if info is None:
                    raise errors.invalid_api_key()
                continue
            if model is None:
                return info, None, scopes, None
            if dep is None:
                raise errors.model_not_found(model)
            if verdict.status == RATE_LIMITED:
                gw.metrics.rate_limited.labels(model, info.tenant, verdict.limited).inc()
                raise errors.rate_limited(verdict.limited, verdict.retry_after_s)
            if verdict.status == OVER_BUDGET:
                gw.metrics.budget_exceeded.labels(dep.model, info.tenant, verdict.budget.label).inc()
                raise BudgetExceeded(verdict.budget, verdict.what)
            if verdict.status == UNSEEDED:
                seeds += 1
                if seeds == 3:
                    raise errors.ApiError(503, "Budget state is being rebuilt; retry.", "service_unavailable",
                                          "budget_unavailable")  # fmt: skip
                await self.seed(info, verdict.budget)
                continue
            return info, dep, scopes, reservation

    async def seed(self, info, scope) -> None:
        """A budget's spend read back from the ledger into Redis, before the admission is asked again."""
        try:
            await self.gw.budgets.seed_from_ledger(info, scope)
        except errors.ApiError:
            raise
        except Exception as exc:
            raise errors.redis_unavailable("Budget accounting unavailable; retry later.") from exc

    # -- routes --------------------------------------------------------------------------------
    async def chat_completions(self, request):
        return await self.forward(request, "/v1/chat/completions")

    async def completions(self, request):
        return await self.forward(request, "/v1/completions")

    async def embeddings(self, request):
        return await self.forward(request, apiroutes.EMBEDDINGS)

    async def responses(self, request):
        return await self.forward(request, apiroutes.RESPONSES)

    async def unknown(self, request):
        """Every /v1 path no other route serves (404), or serves with other methods (405 with Allow)."""
        here = request.match_info.route.resource
        allowed = set()
        for resource in request.app.router.resources():
            if resource is not here:
                allowed |= (await resource.resolve(request))[1]
        if allowed:
            raise web.HTTPMethodNotAllowed(request.method, sorted(allowed))
        await self.authenticate(request, fresh=False)
        raise apiroutes.unknown_route(request.method, request.path)

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
        payload = _json_object(await request.read())
        model = payload.get("model")
        if not isinstance(model, str) or not model:
            raise errors.ApiError(400, "`model` is required and must be a string.", param="model", code="missing_model")
        metered = fields.check(payload)
        apiroutes.check_route(route, payload)
        info, dep, scopes, reservation = await self.admit(key, info, model, (payload, route, started))
        if metered.stream:  # usage always comes back; on every chunk where the engine can do it
            options = {**payload.get("stream_options", {}), "include_usage": True}
            if domain.running_usage(dep.engine):
                options["continuous_usage_stats"] = True
            payload["stream_options"] = options
        keep = KEEP_ALL if metered.wants_running_usage else KEEP_FINAL if metered.wants_usage else KEEP_NONE
        request["log"].update(model=model, deployment=dep.name, stream=metered.stream)
        call = Call(self.gw, request, info, dep, scopes, route, metered.stream, t0, started)
        call.reservation = reservation
        self.gw.metrics.in_flight.inc()
        self.gw.in_flight += 1
        try:
            return await call.run(orjson.dumps(payload), keep)  # what was checked is what is sent
        finally:
            self.gw.in_flight -= 1
            self.gw.metrics.in_flight.dec()
            call.record()  # no-op for a stream: recorded before its last byte
            call.finish()


class Call:
    """One proxied request: forwards it and turns what happened into a ledger record, metrics and a log."""

    def __init__(self, gw, request, info, dep, scopes, route, stream, t0, started):
        self.gw, self.request, self.info, self.dep, self.scopes = gw, request, info, dep, scopes
        self.route, self.stream, self.t0, self.started = route, stream, t0, started
        self.status = 0
        self.error: str | None = None
        self.usage: tuple[int, int] | None = None
        self.events = 0
        self.ttft: float | None = None
        self.disconnected = False
        self.request_id = uuid.uuid4()
        self.rid = str(self.request_id)
        self.debited = False
        self.opened = False
        self.answered = False  # the engine answered 2xx: there must be usage
        self.metered: tuple[int, int, bool] | None = None  # prompt, completion, estimated (set by record)
        self.reservation = None  # budget.Reservation of an admitted request with a budget

    async def run(self, body: bytes, keep: str):
        try:
            self.gw.meter.opened(self.rid, opened_line(self.rid, self.started, self.info, self.dep, self.route,
                                                       self.stream))  # fmt: skip
        except OSError as exc:
            LOG.error("usage journal write failed, refusing the request: %s", exc)
            raise errors.ApiError(503, "Usage metering unavailable; retry later.", "service_unavailable",
                                  "metering_unavailable") from None  # fmt: skip
        self.opened = True
        headers = {"Content-Type": "application/json", "X-Request-Id": self.rid}
        try:
            upstream = await self.gw.session.post(self.dep.upstream + self.route, data=body, headers=headers)
        except TimeoutError:
            raise self.fail(504, "Upstream model server timed out.", "upstream_timeout") from None
        except UPSTREAM_ERRORS:
            raise self.fail(502, "Upstream model server unavailable.", "upstream_unavailable") from None
        async with upstream:
            self.status = upstream.status
            ok = self.answered = 200 <= upstream.status < 300
            if ok and upstream.content_type == "text/event-stream":  # also if the engine streams unasked
                return await self.relay_stream(upstream, keep)
            try:
                data = await upstream.read()
            except TimeoutError:
                raise self.fail(504, "Upstream model server timed out.", "upstream_timeout") from None
            except UPSTREAM_ERRORS:
                raise self.fail(502, "Upstream model server closed the connection.", "upstream_unavailable") from None
            if ok:
                self.usage = apiroutes.usage_of_route(self.route, data)
                if self.usage is None:
                    self.status, self.error = 502, "upstream_usage_invalid"
                    raise errors.upstream_usage_invalid()
            else:
                self.error = f"upstream status {upstream.status}"
            await self.debit()
            return web.Response(
                status=upstream.status,
                body=data,
                headers={
                    "Content-Type": upstream.headers.get("Content-Type", "application/json"),
                    "X-Request-Id": self.rid,
                },
            )

    async def relay_stream(self, upstream, keep: str):
        sse = SseFilter(keep)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Request-Id": self.rid}
        )
        await resp.prepare(self.request)
        deadline = None
        last = None
        journaled = None
        meter = self.gw.meter
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
                progress = sse.usage or (0, sse.content_events)
                if progress != journaled:  # on disk before the client can have these tokens
                    meter.progressed(self.rid, progress[0], progress[1], sse.usage is None)
                    journaled = progress
                if self.disconnected:
                    if time.monotonic() > deadline:
                        self.error = "client disconnected; drain timeout"
                        break
                elif out:
                    try:
                        await resp.write(out)
                    except ConnectionError:
                        self.disconnected, deadline = True, time.monotonic() + self.gw.cfg.drain_timeout
                if sse.done:
                    break  # answer the client now; the rest of the upstream body is read afterwards
        except TimeoutError:
            self.status, self.error = 504, "upstream_timeout"
        except UPSTREAM_ERRORS:
            self.status, self.error = 502, TRUNCATED
        except Exception:  # headers are sent: end the stream with an error event instead of a second response
            LOG.exception("stream relay failed")
            self.status, self.error = 500, "gateway error mid-stream"
        tail = sse.finish()
        drained_out = self.error is not None  # the client left and the drain timed out
        self.usage, self.error = sse.usage, self.error or sse.error
        if 200 <= self.status < 300 and not drained_out:
            if not sse.done:  # ended, cleanly or not, before [DONE]
                self.status, self.error = 502, self.error or TRUNCATED
            elif sse.usage_invalid or sse.usage is None:
                self.status, self.error = 502, "upstream_usage_invalid"
        await self.debit()
        self.record()  # journaled before the client gets its last byte
        if not self.disconnected:
            try:
                if 200 <= self.status < 300 and sse.done:
                    tail += DONE_EVENT
                else:
                    tail += b"data: " + errors.error_body(*_stream_error(self.status, self.error)) + b"\n\n"
                await resp.write(tail)
                await resp.write_eof()
            except ConnectionError:
                self.disconnected = True
        if sse.done:
            await _read_to_end(upstream)  # the connection can then serve the next request
        # The client has its last byte. Let streams whose chunks are already waiting be relayed before this
        # one's bookkeeping (metrics, access log): when many streams end at once, it would otherwise delay
        # each of their last chunks by every earlier stream's bookkeeping.
        await asyncio.sleep(0)
        return resp

    async def debit(self) -> None:
        """Charge token limits and budgets with the real usage before the response completes (one Redis call
        for both)."""
        if self.usage is None:
            return  # finish() charges what the ledger row says
        settle = self.settle(*self.usage)
        if settle is not None:
            try:
                await settle
            except Exception as exc:  # the response must still complete
                self.gw.log_background_error(exc)

    def settle(self, prompt: int, completion: int):
        """The one Redis call that debits the token limits and settles the budget reservation with this usage,
        each once (None: nothing left to charge)."""
        tokens = prompt + completion
        limits = self.scopes if tokens and not self.debited and any(s.tpm for s in self.scopes) else []
        reservation = self.reservation if self.reservation is not None and not self.reservation.settled else None
        if not limits and reservation is None:
            return None
        if limits:
            self.debited = True
        if reservation is not None:
            reservation.settled = True
        return self._charge(limits, reservation, tokens, self.dep.price.cost(prompt, completion))

    async def _charge(self, limits, reservation, tokens, cost) -> None:
        spent = await self.gw.admission.settle(limits, reservation, tokens, cost)
        if reservation is not None:
            self.gw.budgets.settled(reservation, self.info.tenant, spent)

    def fail(self, status, message, code):
        self.status, self.error = status, code
        return errors.ApiError(status, message, "api_error", code)

    def record(self) -> None:
        """Journal and queue the ledger row (once; only for requests that were admitted and journaled)."""
        if self.metered is not None or not self.opened:
            return
        prompt, completion = self.usage or (0, 0)
        estimated = self.usage is None and (self.events > 0 or self.answered)
        if self.usage is None:
            completion = self.events  # one streamed chunk per token: the best evidence left
        self.metered = (prompt, completion, estimated)
        price = self.dep.price
        self.gw.meter.record(
            UsageRecord(
                request_id=self.request_id,
                started_at=self.started,
                finished_at=datetime.datetime.now(UTC),
                tenant=self.info.tenant,
                key_id=self.info.key_id,
                model=self.dep.model,
                deployment=self.dep.name,
                route=self.route,
                stream=self.stream,
                status=self.status or 500,
                error=self.error,
                client_disconnected=self.disconnected,
                usage_estimated=estimated,
                prompt_tokens=prompt,
                completion_tokens=completion,
                latency_ms=(time.perf_counter() - self.t0) * 1000,
                ttft_ms=None if self.ttft is None else self.ttft * 1000,
                currency=price.currency,
                input_per_1m=price.input_per_1m,
                output_per_1m=price.output_per_1m,
                cost=price.cost(prompt, completion),
            )
        )

    def finish(self) -> None:
        """Debit token limits and settle budgets (if not done yet), count and log; never raises (the row is
        already journaled)."""
        settle = self.settle(*self.metered[:2]) if self.metered else self.settle(0, 0)  # what the row says
        if settle is not None:
            self.gw.spawn(settle)
        if self.metered is None:
            return
        try:
            self._count()
        except Exception:
            LOG.exception("request bookkeeping failed")

    def _count(self) -> None:
        gw, info, dep = self.gw, self.info, self.dep
        prompt, completion, _estimated = self.metered
        status = self.status or 500
        m = gw.metrics.route(dep.model, info.tenant)
        m.request(status).inc()
        if status >= 400 or self.error:
            gw.metrics.errors.labels(*m.labels, self.error or str(status)).inc()
        m.prompt.inc(prompt)
        m.completion.inc(completion)
        m.cost_in(dep.price.currency).inc(float(dep.price.cost(prompt, completion)))
        m.latency.observe(time.perf_counter() - self.t0)
        if self.ttft is not None:
            m.ttft.observe(self.ttft)
        if self.disconnected:
            m.disconnects.inc()
        self.request["log"].update(
            request_id=self.rid,
            upstream_status=self.status,
            prompt_tokens=prompt,
            completion_tokens=completion,
            ttft_ms=None if self.ttft is None else round(self.ttft * 1000, 3),
            client_disconnected=self.disconnected,
            error=self.error,
        )


async def _read_to_end(upstream) -> None:
    """What follows [DONE] (the chunked terminator, normally already received); the connection is dropped if
    the engine keeps it waiting."""
    try:
        async with asyncio.timeout(1.0):
            async for _chunk in upstream.content.iter_any():
                pass
    except (TimeoutError, *UPSTREAM_ERRORS):
        upstream.close()


def _stream_error(status: int, error: str | None) -> tuple[str, str, str]:
    """(message, type, code) of the error event that ends a stream which did not succeed."""
    if error == TRUNCATED:
        return "The model server closed the stream before it finished.", "api_error", TRUNCATED
    if error == "upstream_usage_invalid":
        return "The model server reported no valid token usage for this stream.", "api_error", error
    if error == "upstream_timeout":
        return "The model server timed out mid-stream.", "api_error", error
    return error or f"upstream status {status}", "api_error", "upstream_error"


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
