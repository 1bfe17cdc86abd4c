"""Server-sent-event relay that meters as it goes: picks out `usage` (checked, never trusted) and errors, removes
the usage the client did not ask for, and holds back `[DONE]` so the relay sends it only once the row is safe."""

from __future__ import annotations

import re

import orjson

# An event worth parsing: it carries a usage object, an error or the end marker (one C-level scan per read).
INTERESTING = re.compile(rb'"usage": ?\{|"error" ?:|\[DONE\]')
MAX_USAGE_TOKENS = 100_000_000  # per request; anything larger (or negative, or not an integer) is not usage
DONE_EVENT = b"data: [DONE]\n\n"
KEEP_NONE, KEEP_FINAL, KEEP_ALL = "none", "final", "all"  # which usage the client sees


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def checked_usage(usage) -> tuple[int, int] | None:
    """(prompt, completion) of an OpenAI usage object, or None unless both are integers in 0..MAX_USAGE_TOKENS."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    # bool is an int subclass, and True is not a token count
    if not (_is_count(prompt) and _is_count(completion)):
        return None
    return (prompt, completion) if 0 <= prompt <= MAX_USAGE_TOKENS and 0 <= completion <= MAX_USAGE_TOKENS else None


class SseFilter:
    """Feed upstream bytes, get back the bytes to send to the client.

    Events pass through byte for byte, except: usage the client did not ask for is removed (a usage-only chunk
    dropped, the `usage` member of a chunk with choices cut out), and `data: [DONE]` is kept back (`done`).
    `usage` is (prompt, completion) of the latest usage object seen: with running usage on every chunk (vLLM's
    continuous_usage_stats) a stream cut short still says what was served. If that object is not valid usage,
    `usage` is None and `usage_invalid` is set.

    Running usage comes on every chunk, so the common shape (compact JSON, a flat `"usage":{...}` member after
    another member: vLLM's) is handled on the bytes: the member is found and cut out, and only its own few bytes
    are parsed, when `usage` is read. Any other shape is parsed whole (and re-encoded if usage is removed).
    """

    __slots__ = ("_bad", "_buf", "_counts", "_raw", "_started", "content_events", "done", "error", "keep")

    def __init__(self, keep: str = KEEP_NONE):
        self.keep = keep
        self._counts: tuple[int, int] | None = None
        self._raw: bytes | None = None  # latest usage object, not parsed yet
        self._bad = False
        self.error: str | None = None
        self.done = False
        self.content_events = 0  # chunks carrying generated output (a chat role preamble is not one)
        self._started = False
        self._buf = b""

    @property
    def usage(self) -> tuple[int, int] | None:
        if self._raw is not None:
            raw, self._raw = self._raw, None
            try:
                self._take(orjson.loads(raw))
            except orjson.JSONDecodeError:
                self._take(None)
        return self._counts

    @property
    def usage_invalid(self) -> bool:
        return self.usage is None and self._bad

    def _take(self, usage) -> None:
        self._counts = checked_usage(usage)
        self._bad = self._counts is None

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
        if self._started and not self.done and INTERESTING.search(complete) is None:
            self.content_events += complete.count(b"\n\n")
            return complete
        return b"".join([self._event(e) for e in complete.split(b"\n\n")[:-1]])

    def _event(self, event: bytes) -> bytes:
        if self.done:
            return b""  # nothing follows [DONE]
        single = event.startswith(b"data: ") and b"\n" not in event  # one data line: most engines
        if single:
            data = event[6:]
        else:
            data = b"".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if data == b"[DONE]":
            self.done = True
            return b""
        whole = event + b"\n\n"
        if not data:
            return whole
        if single and b'"error"' not in data and (self._started or b'"role"' not in data):
            cut = self._cut_usage(data, whole)
            if cut is not None:
                return cut
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return whole
        if not isinstance(obj, dict):
            return whole
        err = obj.get("error")
        if err:
            self.error = str(err.get("message", err) if isinstance(err, dict) else err)[:500]
        choices = obj.get("choices")
        if choices and (self._started or not _is_preamble(choices)):
            self._started = True
            self.content_events += 1
        usage = obj.get("usage")
        if not isinstance(usage, dict):
            return whole
        self._raw = None
        self._take(usage)
        if self.keep == KEEP_ALL or (self.keep == KEEP_FINAL and not choices):
            return whole
        if not choices:
            return b""
        del obj["usage"]
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def _cut_usage(self, data: bytes, whole: bytes) -> bytes | None:
        """Bytes path for a compact chunk with a flat usage member after another member; None: parse it whole.
        Safe on the raw bytes: in compact JSON `,"usage":{` cannot occur inside a string (quotes are escaped)."""
        at = data.rfind(b',"usage":{')
        if at < 0:
            return None
        end = data.find(b"}", at + 10)
        if end < 0 or b"{" in data[at + 10 : end]:
            return None  # not flat: parse it whole
        self._raw = data[at + 9 : end + 1]
        content = b'"choices":[]' not in data
        if content:
            self._started = True
            self.content_events += 1
        if self.keep == KEEP_ALL or (self.keep == KEEP_FINAL and not content):
            return whole
        if not content:
            return b""
        return b"data: " + data[:at] + data[end + 1 :] + b"\n\n"


def _is_preamble(choices) -> bool:
    """vLLM's first chat chunk: the assistant role with empty content, before any token."""
    delta = choices[0].get("delta") if isinstance(choices[0], dict) else None
    return isinstance(delta, dict) and "role" in delta and not delta.get("content") and not delta.get("tool_calls")


def usage_of(body: bytes) -> tuple[int, int] | None:
    """Checked usage of a non-streamed OpenAI response body; None when missing or not valid."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return checked_usage(obj.get("usage")) if isinstance(obj, dict) else None
