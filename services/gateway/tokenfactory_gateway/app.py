"""Wires the gateway together: connections, background tasks, routes, error/log middleware."""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp
import asyncpg
import orjson
import redis.asyncio as aioredis
from aiohttp import web

from . import errors, schema, usage
from .admin import Admin
from .invalidation import AuthInvalidation
from .keys import KeyCache
from .metering import MeterWriter
from .metrics import Metrics
from .proxy import Proxy
from .ratelimit import RateLimiter
from .sources import RoutingRefresher, make_source
from .store import Store

ACCESS = logging.getLogger("tokenfactory_gateway.access")
LOG = logging.getLogger("tokenfactory_gateway")
QUIET_PATHS = frozenset(("/health", "/ready", "/metrics"))


class Gateway:
    """Everything a request handler needs, created at start-up and torn down at shutdown."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.metrics = Metrics()
        self._background: set[asyncio.Task] = set()
        self.in_flight = 0  # proxied requests not yet metered
        self.pool = self.redis = self.session = None
        self.keys = self.limiter = self.meter = self.store = self.routing = self.invalidation = None

    async def start(self) -> None:
        cfg = self.cfg
        self.pool = await asyncpg.create_pool(cfg.database_url, min_size=2, max_size=10)
        async with self.pool.acquire() as conn:
            await schema.migrate(conn)
        self.redis = aioredis.Redis.from_url(cfg.redis_url)
        await self.redis.ping()
        pepper = cfg.key_pepper.encode()
        self.keys = KeyCache(self.pool, pepper, cfg.auth_cache_seconds)
        self.limiter = RateLimiter(self.redis, cfg.redis_key_prefix)
        self.store = Store(self.pool, pepper)
        self.invalidation = AuthInvalidation(self.redis, cfg.redis_key_prefix, self.keys)
        await self.invalidation.start()
        self.meter = MeterWriter(
            self.pool, cfg.spool_dir, cfg.metering_batch_size, cfg.metering_flush_interval, self.metrics
        )
        await self.meter.start()
        self.routing = RoutingRefresher(
            make_source(cfg), cfg.routing_endpoint, cfg.routing_refresh_seconds, self.metrics
        )
        await self.routing.start()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=cfg.upstream_connect_timeout, sock_read=cfg.upstream_read_timeout
            ),
            skip_auto_headers=("Accept-Encoding", "User-Agent"),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),  # one session serves every tenant: never keep upstream cookies
        )

    async def stop(self) -> None:
        if self.routing:
            await self.routing.stop()
        if self.invalidation:
            await self.invalidation.stop()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self.meter:
            await self.meter.close()
        if self.session:
            await self.session.close()
        if self.redis:
            await self.redis.aclose()
        if self.pool:
            await self.pool.close()

    def spawn(self, coro) -> None:
        """Run a fire-and-forget coroutine (token debits) without letting it be garbage-collected."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._done)

    def _done(self, task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception():
            self.log_background_error(task.exception())

    @staticmethod
    def log_background_error(exc) -> None:
        LOG.error("rate-limit debit failed: %s", exc)

    async def drain(self, timeout: float = 60.0) -> None:
        """At shutdown (listener already closed): let proxied requests finish, so each one is metered."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.in_flight:
            LOG.error("%d request(s) still in flight after %s s of shutdown", self.in_flight, timeout)

    async def invalidate_auth(self) -> None:
        """Make every replica re-read keys, tenants and sharing before its next request."""
        if not await self.invalidation.publish():
            LOG.error("some replica did not confirm the auth change; it re-checks on its next Redis contact")


@web.middleware
async def handle_errors(request, handler):
    """OpenAI-style bodies for every failure, and one structured access-log line per request."""
    t0 = time.perf_counter()
    request["log"] = log = {"method": request.method, "path": request.path}
    try:
        response = await handler(request)
    except errors.ApiError as err:
        log["error"] = log.get("error") or err.code or err.err_type
        response = err.response()
    except web.HTTPRequestEntityTooLarge:
        limit = request.app["gateway"].cfg.max_body_bytes
        response = errors.ApiError(413, f"Request body too large (limit {limit} bytes).", code="request_too_large")
        response = response.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = errors.ApiError(exc.status, exc.reason, code=exc.reason.lower().replace(" ", "_")).response()
    except Exception:
        LOG.exception("unhandled error on %s %s", request.method, request.path)
        response = errors.ApiError(500, "Internal gateway error.", "api_error", "internal_error").response()
    if request.app["gateway"].cfg.access_log and request.path not in QUIET_PATHS:
        log["ts"] = round(time.time(), 3)
        log["status"] = response.status
        log["latency_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        ACCESS.info(orjson.dumps(log).decode())
    return response


async def health(request):
    return web.json_response({"status": "ok"})


async def ready(request):
    gw = request.app["gateway"]
    try:
        await gw.redis.ping()
        await gw.pool.fetchval("SELECT 1")
    except Exception as exc:
        raise errors.ApiError(503, f"not ready: {type(exc).__name__}", "service_unavailable", "not_ready") from None
    return web.json_response({"status": "ready", "deployments": len(gw.routing.table.deployments)})


async def metrics(request):
    return web.Response(body=request.app["gateway"].metrics.render(), content_type="text/plain", charset="utf-8")


async def self_usage(request):
    gw = request.app["gateway"]
    info = (await gw.proxy.authenticate(request))[1]
    plan = usage.parse_query(request.query, {"model"}, {"model"}, {"key_id": str(info.key_id)})
    result = await usage.aggregate(gw.pool, plan)
    result["key"] = {"id": str(info.key_id), "name": info.key_name, "tenant": info.tenant}
    return web.Response(body=orjson.dumps(result), content_type="application/json")


def build_app(cfg) -> web.Application:
    gw = Gateway(cfg)
    gw.proxy = Proxy(gw)
    app = web.Application(client_max_size=cfg.max_body_bytes, middlewares=[handle_errors])
    app["gateway"] = gw

    async def lifecycle(app):
        await gw.start()
        yield
        await gw.stop()

    app.cleanup_ctx.append(lifecycle)

    async def drain(app):
        await gw.drain(cfg.drain_timeout)

    app.on_shutdown.append(drain)
    app.add_routes(
        [
            web.post("/v1/chat/completions", gw.proxy.chat_completions),
            web.post("/v1/completions", gw.proxy.completions),
            web.get("/v1/models", gw.proxy.models),
            web.get("/v1/models/{model}", gw.proxy.model),
            web.get("/v1/usage", self_usage),
            web.get("/health", health),
            web.get("/ready", ready),
            web.get("/metrics", metrics),
            *Admin(gw).routes(),
        ]
    )
    return app
