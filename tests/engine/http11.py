"""Minimal asyncio HTTP/1.1 server plumbing (keep-alive, chunked bodies) for the synthetic upstream."""

import asyncio
import dataclasses
import json

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}
MAX_BODY = 16 * 1024 * 1024


class BadRequest(Exception):
    pass


@dataclasses.dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from exc


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on the connection, or None when the client closed it."""
    line = await reader.readline()
    if not line:
        return None
    try:
        method, target, version = line.decode("latin-1").split()
    except ValueError as exc:
        raise BadRequest(f"malformed request line {line!r}") from exc
    headers = {}
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _sep, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY:
            raise BadRequest("request body too large")
        body = await reader.readexactly(length)
    return Request(method, target.split("?", 1)[0], version, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
        body += await reader.readexactly(size)
        await reader.readline()
        if len(body) > MAX_BODY:
            raise BadRequest("request body too large")
    while await reader.readline() not in (b"\r\n", b"\n", b""):
        pass  # trailers
    return bytes(body)


def _head(status: int, headers: dict[str, str], keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append("connection: keep-alive" if keep_alive else "connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str, keep_alive: bool) -> None:
    headers = {"content-type": content_type, "content-length": str(len(body))}
    writer.write(_head(status, headers, keep_alive) + body)
    await writer.drain()


async def send_json(writer: asyncio.StreamWriter, status: int, payload, keep_alive: bool) -> None:
    await send(writer, status, json.dumps(payload).encode(), "application/json", keep_alive)


class ChunkedStream:
    """A chunked response body: `await write(bytes)` per piece, `await end()` to finish it."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer

    async def begin(self, status: int, content_type: str, keep_alive: bool) -> None:
        headers = {"content-type": content_type, "transfer-encoding": "chunked", "cache-control": "no-cache"}
        self.writer.write(_head(status, headers, keep_alive))
        await self.writer.drain()

    async def write(self, data: bytes) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
