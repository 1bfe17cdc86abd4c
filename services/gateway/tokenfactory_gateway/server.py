"""The two listeners and the process lifecycle.

Public listener(s) (`listen`, HTTPS when a certificate is configured, optional SO_REUSEPORT): the OpenAI routes.
Internal listener (`internal_listen`, plain HTTP for a cluster-internal Service): admin API, metrics, probes.
SIGTERM/SIGINT: /ready turns 503, the public listener stops accepting, in-flight requests finish (up to
`shutdown_timeout`), the usage queue is flushed (or stays journaled), then the internal listener closes.
Requests aiohttp cannot even parse (oversized request line or header, bad syntax) get OpenAI-style errors too.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from . import errors
from .app import Gateway, build_apps
from .tls import CertificateReloader

LOG = logging.getLogger("tokenfactory_gateway")


class _JsonErrorHandler(RequestHandler):
    def handle_error(self, request, status=500, exc=None, message=None):
        """aiohttp's own answers (unparsable requests, handler crashes) as OpenAI-style JSON, never echoing
        the request (its line or headers may carry secrets)."""
        if request.writer.output_size > 0:
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        LOG.info("refused a malformed HTTP request (%s, HTTP %s)", type(exc).__name__ if exc else "-", status)
        response = errors.protocol_error(status, exc).response()
        response.force_close()
        return response


class _JsonErrorServer(Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorServer  # same state, only the per-connection handler class differs
        return server


async def serve(cfg) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    gw = Gateway(cfg)
    public_app, internal_app = build_apps(gw)
    try:
        tls = CertificateReloader(cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_reload_seconds, gw.metrics) if (
            cfg.tls_cert_file) else None  # fmt: skip
        await gw.start()
    except Exception as exc:
        LOG.error("gateway start-up failed: %s: %s", type(exc).__name__, exc)
        await gw.stop()
        return 1
    public = _Runner(public_app, access_log=None, shutdown_timeout=cfg.shutdown_timeout)
    internal = _Runner(internal_app, access_log=None, shutdown_timeout=5)
    await public.setup()
    await internal.setup()
    await web.TCPSite(internal, *cfg.internal_address).start()
    for host, port in cfg.public_addresses:
        site = web.TCPSite(public, host, port, ssl_context=tls.context if tls else None,
                           reuse_port=cfg.reuse_port or None, backlog=1024)  # fmt: skip
        await site.start()
    if tls:
        tls.start()
    LOG.info("gateway listening: public %s (%s), internal %s", cfg.public_addresses, "https" if tls else "http",
             cfg.internal_address)  # fmt: skip
    await stop.wait()
    LOG.info("shutting down: draining in-flight requests (up to %s s)", cfg.shutdown_timeout)
    gw.shutting_down = True
    await public.cleanup()
    if tls:
        tls.stop()
    await gw.stop()
    await internal.cleanup()
    return 0
