"""Server-sent-event passthrough that picks out `usage` (and errors) without re-encoding other events."""

from __future__ import annotations

import re

import orjson

# An event worth parsing: it carries a usage object or an error (one C-level scan per upstream read).
INTERESTING = re.compile(rb'"usage": ?\{|"error" ?:')


def _interesting(chunk: bytes) -> bool:
    return INTERESTING.search(chunk) is not None


class SseFilter:
    """Feed upstream bytes, get back the bytes to send to the client.

    Complete events pass through byte for byte. Events carrying a `usage` object are parsed; when the
    client did not ask for usage (`strip_usage`) the usage-only chunk is dropped, or its `usage`
    field removed if the chunk also carries choices.
    """

    __slots__ = ("_buf", "_started", "content_events", "error", "strip_usage", "usage")

    def __init__(self, strip_usage: bool):
        self.strip_usage = strip_usage
        self.usage: dict | None = None
        self.error: str | None = None
        self.content_events = 0  # chunks carrying generated output (a chat role preamble is not one)
        self._started = False
        self._buf = b""

    def feed(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return b""
        complete, self._buf = buf[: end + 2], buf[end + 2 :]
        return self._process(complete)

    def finish(self) -> bytes:
        """Whatever is left when the upstream closed (a last event without its blank line)."""
        rest, self._buf = self._buf, b""
        return self._process(rest + b"\n\n") if rest.strip() else b""

    def _process(self, complete: bytes) -> bytes:
        if self._started and not _interesting(complete):
            events = complete.count(b"\n\n")
            self.content_events += events - (1 if b"data: [DONE]" in complete else 0)
            return complete
        return b"".join(self._event(e) for e in complete.split(b"\n\n")[:-1])

    def _event(self, event: bytes) -> bytes:
        data = b"".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if not data or data == b"[DONE]":
            return event + b"\n\n"
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return event + b"\n\n"
        if not isinstance(obj, dict):
            return event + b"\n\n"
        if obj.get("error"):
            err = obj["error"]
            self.error = str(err.get("message", err) if isinstance(err, dict) else err)[:500]
        usage = obj.get("usage")
        choices = obj.get("choices")
        if choices and (self._started or not _is_preamble(choices)):
            self._started = True
            self.content_events += 1
        if not isinstance(usage, dict):
            return event + b"\n\n"
        self.usage = usage
        if not self.strip_usage:
            return event + b"\n\n"
        if not obj.get("choices"):
            return b""
        del obj["usage"]
        return b"data: " + orjson.dumps(obj) + b"\n\n"


def _is_preamble(choices) -> bool:
    """vLLM's first chat chunk: the assistant role with empty content, before any token."""
    delta = choices[0].get("delta") if isinstance(choices[0], dict) else None
    return isinstance(delta, dict) and "role" in delta and not delta.get("content") and not delta.get("tool_calls")


def usage_of(body: bytes) -> dict | None:
    """`usage` of a non-streamed OpenAI response body, if any."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = obj.get("usage") if isinstance(obj, dict) else None
    return usage if isinstance(usage, dict) else None


def token_counts(usage: dict | None) -> tuple[int, int]:
    if not usage:
        return 0, 0
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    return (prompt if isinstance(prompt, int) else 0), (completion if isinstance(completion, int) else 0)
