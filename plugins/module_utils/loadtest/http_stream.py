# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Small asyncio HTTP/1.1 client (stdlib only) for streamed responses, with a keep-alive pool.

Body bytes go to a sink as they arrive, stamped with time.perf_counter() taken once per socket read,
so SSE chunk arrival times are measured in the read callback without extra task switches. Plain-TCP
connections are read straight from the event loop's readiness callback (no transport/protocol layers);
TLS connections go through an asyncio transport. The per-chunk path avoids `needle in bytes`, which costs
a formatted TypeError per call on CPython 3.11 (it tries the needle as an integer first).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 65536
_HEAD, _BODY, _DONE = 0, 1, 2
_LENGTH, _CHUNKED, _UNTIL_CLOSE = 0, 1, 2
_SIZE, _DATA, _CRLF, _TRAILER = 0, 1, 2, 3


class Target:
    """A parsed URL plus connection settings; `key` selects the keep-alive pool."""

    def __init__(self, url, validate_certs=True, ca_path=None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"URL must be http(s)://host[:port]/path, got {redact_url(url)!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = self.port == (443 if self.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if default_port else f"{host}:{self.port}"
        self.ssl = None
        if self.scheme == "https":
            ctx = ssl.create_default_context(cafile=ca_path)
            if not validate_certs:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self.ssl = ctx
        self.key = (self.scheme, self.host, self.port)

    def request_head(self, method, headers, body_length):
        """Bytes of the request line and headers; `headers` is a list of (name, value)."""
        lines = [f"{method} {self.path} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(f"Content-Length: {body_length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def redact_url(url):
    """URL without user:password@ (never report credentials)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return parts._replace(netloc=netloc).geturl()


class BodyCollector:
    """Sink that keeps the first `limit` bytes of a body (error messages, /metrics text)."""

    def __init__(self, limit=8 * 1024 * 1024):
        self.limit = limit
        self.parts = []
        self.size = 0

    def feed(self, data, now):
        if self.size < self.limit:
            self.parts.append(data[: self.limit - self.size])
        self.size += len(data)

    def body(self):
        return b"".join(self.parts)


class Exchange:
    """One request/response on a connection. After completion: status, headers, sink, error_kind, error."""

    def __init__(self, conn, sink_factory, future, reused):
        self.conn = conn
        self.sink_factory = sink_factory
        self.future = future
        self.reused = reused
        self.state = _HEAD
        self.buf = bytearray()
        self.status = 0
        self.headers = {}
        self.sink = None
        self.mode = _UNTIL_CLOSE
        self.remaining = 0
        self.chunk_state = _SIZE
        self.pending = b""
        self.keep_alive = False
        self.bytes_received = 0
        self.error_kind = None
        self.error = None
        self.timer = None

    # -- protocol callbacks -------------------------------------------------------------------
    def on_data(self, data):
        now = time.perf_counter()
        self.bytes_received += len(data)
        at_chunk = self.state == _BODY and self.mode == _CHUNKED and self.chunk_state == _SIZE and not self.pending
        if at_chunk and data.endswith(b"\r\n"):  # fast path: the read is exactly one whole chunk
            size, _crlf, rest = data.partition(b"\r\n")
            if len(size) < 9:
                try:
                    length = int(size, 16)
                except ValueError:
                    length = 0
                if length and len(rest) == length + 2:
                    self.sink.feed(rest[:-2], now)
                    return
        if self.state == _HEAD:
            self.buf += data
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD_BYTES:
                    self.fail("protocol_error", "response head too large")
                return
            head = bytes(self.buf[:end])
            data = bytes(self.buf[end + 4 :])
            del self.buf[:]
            if not self._start_body(head):
                return
            if not data:
                return
        if self.state != _BODY:
            return
        if self.mode == _CHUNKED:
            self._chunked(data, now)
        elif self.mode == _LENGTH:
            take = data[: self.remaining]
            self.remaining -= len(take)
            self.sink.feed(take, now)
            if self.remaining <= 0:
                self.finish()
        else:
            self.sink.feed(data, now)

    def on_lost(self, exc):
        if self.state == _DONE:
            return
        if self.state == _BODY and self.mode == _UNTIL_CLOSE:
            self.keep_alive = False
            self.finish()
            return
        detail = f": {exc}" if exc else ""
        self.fail("connection_lost", f"connection closed before the response ended{detail}")

    def on_timeout(self):
        self.fail("timeout", "request timed out")

    # -- parsing ------------------------------------------------------------------------------
    def _start_body(self, head):
        lines = head.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        try:
            self.status = int(status_line[1])
        except (IndexError, ValueError):
            self.fail("protocol_error", f"bad status line {lines[0][:80]!r}")
            return False
        for line in lines[1:]:
            name, _colon, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        connection = self.headers.get("connection", "").lower()
        self.keep_alive = status_line[0] == "HTTP/1.1" and "close" not in connection
        self.sink = self.sink_factory(self.status, self.headers)
        self.state = _BODY
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self.mode = _CHUNKED
        elif "content-length" in self.headers:
            self.mode = _LENGTH
            self.remaining = int(self.headers["content-length"])
        elif self.status in (204, 304) or 100 <= self.status < 200:
            self.mode = _LENGTH
            self.remaining = 0
        else:
            self.mode = _UNTIL_CLOSE
            self.keep_alive = False
        if self.mode == _LENGTH and self.remaining == 0:
            self.finish()
        return True

    def _chunked(self, data, now):
        if self.pending:
            data = self.pending + data
            self.pending = b""
        pos, size, out, complete = 0, len(data), [], False
        while pos < size:
            state = self.chunk_state
            if state == _DATA:
                take = min(size - pos, self.remaining)
                out.append(data[pos : pos + take])
                pos += take
                self.remaining -= take
                if self.remaining == 0:
                    self.chunk_state = _CRLF
            elif state == _CRLF:
                if size - pos < 2:
                    break
                pos += 2
                self.chunk_state = _SIZE
            else:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    break
                line = data[pos:eol]
                pos = eol + 2
                if state == _TRAILER:
                    if not line:
                        complete = True
                        break
                    continue
                try:
                    length = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    self.fail("protocol_error", "bad chunk size")
                    return
                if length == 0:
                    self.chunk_state = _TRAILER
                else:
                    self.remaining = length
                    self.chunk_state = _DATA
        if pos < size and not complete:
            self.pending = data[pos:]
        if out:
            self.sink.feed(out[0] if len(out) == 1 else b"".join(out), now)
        if complete:
            self.finish()

    # -- completion ---------------------------------------------------------------------------
    def finish(self):
        if self.state == _DONE:
            return
        self.state = _DONE
        self._settle()

    def fail(self, kind, message):
        if self.state == _DONE:
            return
        self.state = _DONE
        self.error_kind, self.error = kind, message
        self.keep_alive = False
        self.conn.abort()
        self._settle()

    def _settle(self):
        if self.timer is not None:
            self.timer.cancel()
        self.conn.exchange = None
        if not self.future.done():
            self.future.set_result(self)


class _SocketConnection:
    """Plain TCP: `_readable` runs when the socket has bytes (inside the selector on a StreamLoop, else as a
    loop reader) and hands what one recv() returns to the exchange (recv(64 KiB) costs no more than
    recv_into() plus a slice, and bytes slice cheaper than a bytearray)."""

    def __init__(self, loop, sock):
        self.loop = loop
        self.sock = sock
        self.exchange = None
        self.lost = False
        self._fd = sock.fileno()
        self._streams = getattr(loop, "streams", None)
        if self._streams is not None:
            self._streams.add_stream(self._fd, self._readable)
        else:
            loop.add_reader(self._fd, self._readable)

    def _readable(self):
        exchange = self.exchange
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
        else:
            try:
                if not data:
                    self._lost(None)
                elif exchange is not None:
                    exchange.on_data(data)
                else:  # bytes on an idle connection: it cannot be reused safely
                    self.abort()
            except Exception as exc:  # a parsing bug fails the request, not the event loop
                if exchange is not None:
                    exchange.fail("client_error", f"{type(exc).__name__}: {exc}")
        if self.exchange is not exchange and self._streams is not None:
            self._streams.wake()  # the request completed: its task must run

    def _lost(self, exc):
        self.abort()
        if self.exchange is not None:
            self.exchange.on_lost(exc)

    async def write(self, data):
        try:
            sent = self.sock.send(data)  # a request usually fits the socket buffer: no future needed
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._lost(exc)
            return
        if sent < len(data):
            try:
                await self.loop.sock_sendall(self.sock, data[sent:])
            except OSError as exc:
                self._lost(exc)

    def closing(self):
        return self.lost

    def abort(self):
        if not self.lost:
            self.lost = True
            if self._streams is not None:
                self._streams.remove_stream(self._fd)
            else:
                self.loop.remove_reader(self._fd)
            self.sock.close()

    close = abort


class _TransportConnection(asyncio.BufferedProtocol):
    """TLS through an asyncio transport; reads into one preallocated buffer (plain Protocol makes asyncio
    allocate 256 KiB per read)."""

    def __init__(self):
        self.transport = None
        self.exchange = None
        self.lost = False
        self._buffer = bytearray(65536)
        self._view = memoryview(self._buffer)

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        return self._view

    def buffer_updated(self, nbytes):
        if self.exchange is not None:
            self.exchange.on_data(self._view[:nbytes].tobytes())
        else:  # bytes on an idle connection: it cannot be reused safely
            self.lost = True
            self.transport.abort()

    def connection_lost(self, exc):
        self.lost = True
        if self.exchange is not None:
            self.exchange.on_lost(exc)

    async def write(self, data):
        self.transport.write(data)

    def closing(self):
        return self.lost or self.transport.is_closing()

    def abort(self):
        if self.transport is not None:
            self.transport.abort()

    def close(self):
        if self.transport is not None:
            self.transport.close()


def _literal_address(host, port):
    """getaddrinfo's answer for an IP literal, without a resolver thread (as asyncio's create_connection)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))]
    return None


async def _connect(loop, target):
    if target.ssl is not None:
        _transport, conn = await loop.create_connection(
            _TransportConnection, target.host, target.port, ssl=target.ssl, server_hostname=target.host
        )
        return conn
    infos = _literal_address(target.host, target.port) or await loop.getaddrinfo(
        target.host, target.port, type=socket.SOCK_STREAM
    )
    error = OSError(f"no address found for {target.host}")
    for family, kind, proto, _name, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return _SocketConnection(loop, sock)
    raise error


class _Failed:
    """Result of a request that never reached a connection."""

    def __init__(self, kind, message):
        self.status, self.headers, self.sink = 0, {}, None
        self.error_kind, self.error = kind, message
        self.bytes_received = 0


class HTTPClient:
    """Keep-alive pool of raw HTTP/1.1 connections; `abort_all` fails every exchange in flight."""

    def __init__(self):
        self._idle = {}
        self._active = set()

    async def request(self, target, head, body, sink_factory, timeout):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for attempt in (0, 1):
            conn, reused = self._take(target.key)
            if conn is None:
                try:
                    conn = await asyncio.wait_for(_connect(loop, target), max(0.001, deadline - loop.time()))
                except asyncio.TimeoutError:  # noqa: UP041 - not TimeoutError before Python 3.11
                    return _Failed("timeout", "connect timed out")
                except (OSError, ssl.SSLError) as exc:
                    return _Failed("connect_error", f"{type(exc).__name__}: {exc}")
            exchange = Exchange(conn, sink_factory, loop.create_future(), reused)
            conn.exchange = exchange
            self._active.add(exchange)
            exchange.timer = loop.call_at(deadline, exchange.on_timeout)
            try:
                await conn.write(head + body)
                await exchange.future
            finally:
                self._active.discard(exchange)
                if exchange.state != _DONE:  # cancelled by the caller
                    exchange.fail("cancelled", "request cancelled")
            stale = exchange.error_kind == "connection_lost" and reused and exchange.bytes_received == 0
            if stale and attempt == 0 and loop.time() < deadline:
                continue  # the server closed an idle keep-alive connection: retry once on a new one
            if exchange.keep_alive and not conn.lost:
                self._idle.setdefault(target.key, []).append(conn)
            else:
                conn.close()
            return exchange
        return exchange  # pragma: no cover - loop always returns

    def _take(self, key):
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closing():
                return conn, True
        return None, False

    def abort_all(self, kind, message):
        for exchange in list(self._active):
            exchange.fail(kind, message)

    def close(self):
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


async def fetch(client, target, timeout, headers=(), limit=8 * 1024 * 1024):
    """GET a small document; returns (status, body bytes, error text or None)."""
    head = target.request_head("GET", list(headers), 0)
    collector = BodyCollector(limit)
    result = await client.request(target, head, b"", lambda status, hdrs: collector, timeout)
    if result.error_kind:
        return result.status, b"", f"{result.error_kind}: {result.error}"
    return result.status, collector.body(), None
