"""Wires the gateway together: connections, background tasks, the two route sets, error/log middleware.

Public app (the Endpoint, optionally HTTPS): the OpenAI routes only. Internal app (cluster-internal Service):
admin API, /metrics, /health, /ready. They never share a listener (server.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import aiohttp
import asyncpg
import orjson
import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import AuthenticationError, RedisError

from . import db, errors, schema, usage
from .admin import Admin
from .admission import Admission
from .budget import Budgets
from .invalidation import AuthInvalidation
from .keys import KeyCache
from .metering import MeterWriter
from .metrics import Metrics
from .portal import Portal
from .proxy import Proxy
from .runtime import RuntimeProbe
from .sources import RoutingRefresher, make_source
from .startup import until_answering
from .store import Store

ACCESS = logging.getLogger("tokenfactory_gateway.access")
LOG = logging.getLogger("tokenfactory_gateway")
QUIET_PATHS = frozenset(("/health", "/ready", "/metrics"))
AUTH_SETTLE_SECONDS = 1.0
READY_CHECK_SECONDS = 1.0


class Gateway:
    """Everything a request handler needs, created at start-up and torn down at shutdown."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.metrics = Metrics()
        self._background: set[asyncio.Task] = set()
        self.in_flight = 0  # proxied requests not yet metered
        self.shutting_down = False
        self.pool = self.redis = self.session = None
        self.keys = self.admission = self.budgets = self.meter = self.store = self.routing = self.invalidation = None
        self._settler = None
        self.runtime = RuntimeProbe(self.metrics, cfg.event_loop_probe_seconds, cfg.gc_young_threshold)

    async def start(self) -> None:
        cfg = self.cfg
        # First: a routing source that cannot be made (a missing kubeconfig) is a setting to fix, not worth waiting
        # for the datastores before saying so.
        source = make_source(cfg)
        self.pool = await until_answering("PostgreSQL", self._open_database, db.UNAVAILABLE, cfg.startup_wait_seconds)
        self.redis = aioredis.Redis.from_url(
            cfg.redis_url, socket_timeout=cfg.redis_timeout, socket_connect_timeout=cfg.redis_timeout
        )
        await until_answering("Redis", self.redis.ping, (RedisError, OSError), cfg.startup_wait_seconds,
                              permanent=(AuthenticationError,))  # fmt: skip
        pepper = cfg.key_pepper.encode()
        self.keys = KeyCache(self.pool, pepper, cfg.auth_cache_seconds, cfg.database_timeout)
        self.admission = Admission(self.redis, cfg.redis_key_prefix)
        self.budgets = Budgets(self.redis, self.pool, cfg.redis_key_prefix, cfg.database_timeout, self.metrics)
        self.store = Store(self.pool, pepper, cfg.database_timeout)
        self.invalidation = AuthInvalidation(self.redis, cfg.redis_key_prefix, self.keys)
        await self.invalidation.start()
        self.meter = MeterWriter(
            self.pool, cfg.spool_dir, cfg.metering_batch_size, cfg.metering_flush_interval, self.metrics,
            cfg.database_timeout, cfg.spool_fsync_seconds,
        )  # fmt: skip
        await self.meter.start()
        self.routing = RoutingRefresher(source, cfg.routing_endpoint, cfg.routing_refresh_seconds, self.metrics)
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
        self._settler = asyncio.create_task(self._settle_auth_loop())
        self.runtime.start()

    async def _open_database(self):
        """A pool whose schema is migrated; nothing left open when a step fails."""
        pool = await db.create_pool(self.cfg.database_url, self.cfg.database_timeout)
        try:
            async with pool.acquire(timeout=self.cfg.database_timeout) as conn:
                await schema.migrate(conn)
        except BaseException:
            pool.terminate()
            raise
        return pool

    async def stop(self) -> None:
        """After the public listener drained: nothing here may hang (every wait is bounded)."""
        self.runtime.stop()
        for part in (self._settler, self.routing, self.invalidation):
            if isinstance(part, asyncio.Task):
                part.cancel()
            elif part:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(part.stop(), self.cfg.redis_timeout * 2)
        if self._background:
            await asyncio.wait(self._background, timeout=self.cfg.redis_timeout * 2)
        if self.meter:
            await self.meter.close()
        if self.session:
            await self.session.close()
        if self.redis:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.redis.aclose(), self.cfg.redis_timeout)
        if self.pool:
            try:
                await asyncio.wait_for(self.pool.close(), self.cfg.database_timeout)
            except (TimeoutError, *db.UNAVAILABLE):
                self.pool.terminate()

    def spawn(self, coro) -> None:
        """Run a fire-and-forget coroutine (a request's settle) without letting it be garbage-collected."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._done)

    def _done(self, task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception():
            self.log_background_error(task.exception())

    @staticmethod
    def log_background_error(exc) -> None:
        LOG.error("rate-limit debit / budget settle failed: %s", exc)

    async def drain(self, timeout: float) -> None:
        """At shutdown (listener already closed): let proxied requests finish, so each one is metered."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.in_flight:
            LOG.error("%d request(s) still in flight after %s s of shutdown", self.in_flight, timeout)

    async def settle_auth(self) -> None:
        """Announce a saved rights-removing change that no replica has been told about yet (outbox in
        PostgreSQL); raises an OpenAI-style 503 while it cannot be confirmed on every replica."""
        changed = await self.store.pending_auth_change()
        if changed is None:
            return
        try:
            confirmed = await self.invalidation.publish()
        except (RedisError, OSError, TimeoutError):
            raise errors.redis_unavailable(
                "The change is saved, but the gateway replicas could not be told (Redis unavailable); it takes "
                "effect once Redis is back. Retry the call to confirm it."
            ) from None
        if not confirmed:
            raise errors.ApiError(503, "The change is saved, but not every gateway replica confirmed it; retry the "
                                  "call.", "service_unavailable", "auth_not_confirmed")  # fmt: skip
        await self.store.auth_change_published(changed)

    async def _settle_auth_loop(self) -> None:
        while True:
            await asyncio.sleep(AUTH_SETTLE_SECONDS)
            with contextlib.suppress(errors.ApiError):
                await self.settle_auth()


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
        err = errors.ApiError(exc.status, exc.reason, code=exc.reason.lower().replace(" ", "_"))
        response = err.response()
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
    except (asyncpg.PostgresError, asyncpg.InterfaceError):
        LOG.exception("database error on %s %s", request.method, request.path)
        response = errors.database_unavailable().response()
    except RedisError:
        LOG.exception("Redis error on %s %s", request.method, request.path)
        response = errors.redis_unavailable().response()
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
    """Ready = started and not shutting down. PostgreSQL and Redis are reported, not required: without them the
    gateway still answers (cached keys, journaled usage, OpenAI-style 503s) and must stay in the Service."""
    gw = request.app["gateway"]
    if gw.shutting_down:
        raise errors.ApiError(503, "shutting down", "service_unavailable", "shutting_down")
    postgres, redis = await asyncio.gather(_check(gw.pool.fetchval("SELECT 1")), _check(gw.redis.ping()))
    body = {"status": "ready", "deployments": len(gw.routing.table.deployments), "postgres": postgres,
            "redis": redis}  # fmt: skip
    return web.json_response(body)


async def _check(awaitable) -> str:
    try:
        async with asyncio.timeout(READY_CHECK_SECONDS):
            await awaitable
    except Exception as exc:
        return f"unavailable: {type(exc).__name__}"
    return "ok"


async def metrics(request):
    return web.Response(body=request.app["gateway"].metrics.render(), content_type="text/plain", charset="utf-8")


async def self_usage(request):
    gw = request.app["gateway"]
    info = (await gw.proxy.authenticate(request))[1]
    plan = usage.parse_query(request.query, {"model"}, {"model"}, {"key_id": str(info.key_id)})
    result = await db.bounded(usage.aggregate(gw.pool, plan), gw.cfg.database_timeout)
    result["key"] = {"id": str(info.key_id), "name": info.key_name, "tenant": info.tenant}
    return web.Response(body=orjson.dumps(result), content_type="application/json")


def build_apps(gw: Gateway) -> tuple[web.Application, web.Application]:
    """(public, internal) applications sharing one Gateway; lifecycle is driven by server.py."""
    cfg = gw.cfg
    gw.proxy = Proxy(gw)
    public = web.Application(client_max_size=cfg.max_body_bytes, middlewares=[handle_errors])
    internal = web.Application(client_max_size=cfg.max_body_bytes, middlewares=[handle_errors])
    for app in (public, internal):
        app["gateway"] = gw

    async def drain(app):
        await gw.drain(cfg.shutdown_timeout)

    public.on_shutdown.append(drain)
    public.add_routes(
        [
            web.post("/v1/chat/completions", gw.proxy.chat_completions),
            web.post("/v1/completions", gw.proxy.completions),
            web.post("/v1/embeddings", gw.proxy.embeddings),
            web.post("/v1/responses", gw.proxy.responses),
            web.get("/v1/models", gw.proxy.models),
            web.get("/v1/models/{model}", gw.proxy.model),
            web.get("/v1/usage", self_usage),
            *Portal(gw).routes(),  # tenant portal: its own routes, off the proxied requests' path
            web.route("*", "/v1/{tail:.*}", gw.proxy.unknown),  # last: never forwarded unmetered
        ]
    )
    internal.add_routes(
        [
            web.get("/health", health),
            web.get("/ready", ready),
            web.get("/metrics", metrics),
            *Admin(gw).routes(),
        ]
    )
    return public, internal
