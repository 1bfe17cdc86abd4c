# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Records the arrival of OpenAI streaming chunks (Server-Sent Events) without parsing every one.

A content chunk is an SSE `data:` event whose JSON carries at least one choice: `"choices": [{...`,
as `vllm bench serve` counts chunks (the text may be empty, e.g. while the detokenizer holds bytes back
or for a special token), except the chat preamble whose delta only announces the role
(`{"role": "assistant", "content": ""}`): it carries no generated token and some servers send it
before the first token. The JSON is only decoded for events that carry `usage`, a role or an error;
the rest is substring search. A quote can only appear unescaped in JSON as a string delimiter, so the
patterns cannot match inside generated text.

Within a stream, consecutive content chunks usually differ only in the generated text. After a content
chunk is classified, its bytes before and after the text value are kept as a template: a later event
that has the same bytes around a middle without quote, backslash or newline has the same JSON structure
(only that string's content differs), so it is a content chunk too, found with two comparisons.
"""

from __future__ import annotations

import json
import re

_CHOICE = re.compile(rb'"choices"\s*:\s*\[\s*\{')
_USAGE = re.compile(rb'"usage"\s*:\s*\{')
_DONE = b"[DONE]"
_COMPACT = (b":[{", b": [{")  # the spellings of vLLM (pydantic) and Python's json.dumps: no regex needed
_TEXT_VALUE = re.compile(rb'"(?:text|content)"\s*:\s*"')  # completions text / chat delta content
_STRING_REST = re.compile(rb'(?:[^"\\\n]|\\.)*"')  # rest of a JSON string, through its closing quote
_QUOTE, _BACKSLASH, _NEWLINE = 34, 92, 10


class SSERecorder:
    """Sink for a 200 streaming response; fills chunk_times, usage, done and stream_error."""

    __slots__ = ("_after", "_before", "_pending", "chunk_times", "done", "events", "stream_error", "usage")

    def __init__(self):
        self._pending = b""
        self._before = self._after = None  # template: the last content event around its text value
        self.chunk_times = []
        self.usage = None
        self.done = False
        self.stream_error = None
        self.events = 0

    def feed(self, data, now):
        before, after = self._before, self._after
        if before is not None and data.startswith(before) and data.endswith(after) and not self._pending:
            end = len(data) - len(after)
            text = data[len(before) : end]
            if end >= len(before) and _QUOTE not in text and _BACKSLASH not in text and _NEWLINE not in text:
                self.events += 1  # same structure as the template: a content chunk
                self.chunk_times.append(now)
                return
        single = not self._pending and data.endswith(b"\n\n") and data.find(b"\n") == len(data) - 2
        if single and data.startswith(b"data:"):  # exactly one single-line data event
            if self._payload(data[5:-2].strip(), now):
                self._template(data)
            return
        if self._pending:
            data = self._pending + data
        if data.find(b"\r") >= 0:
            data = data.replace(b"\r\n", b"\n")
        events = data.split(b"\n\n")
        self._pending = events.pop()
        for event in events:
            if event.startswith(b"data:") and event.find(b"\n") < 0:
                self._payload(event[5:].strip(), now)
            else:
                payload = _data_of(event)
                if payload is not None:
                    self._payload(payload, now)

    def _payload(self, payload, now):
        """Classify one event's data; True for a plain content chunk (no role, no usage)."""
        self.events += 1
        at = payload.find(b'"choices"')
        if at >= 0 and (payload.startswith(_COMPACT, at + 9) or _CHOICE.search(payload, at) is not None):
            plain = payload.find(b'"role"') < 0
            if plain or not _role_only(payload):
                self.chunk_times.append(now)
            if payload.find(b'"usage"') >= 0 and _USAGE.search(payload) is not None:
                self._read_usage(payload)
                return False
            return plain
        if payload == _DONE:
            self.done = True
        elif payload.find(b'"usage"') >= 0 and _USAGE.search(payload) is not None:
            self._read_usage(payload)
        elif payload.find(b'"error"') >= 0:
            self._read_error(payload)
        return False

    def _template(self, event):
        """Keep a plain content event's bytes before and after its text value (none if it has none)."""
        value = _TEXT_VALUE.search(event)
        rest = _STRING_REST.match(event, value.end()) if value else None
        if rest is None:
            self._before = self._after = None
        else:
            self._before, self._after = bytes(event[: value.end()]), bytes(event[rest.end() - 1 :])

    def _read_usage(self, payload):
        try:
            usage = json.loads(payload).get("usage")
        except ValueError:
            return
        if isinstance(usage, dict):
            self.usage = usage

    def _read_error(self, payload):
        try:
            doc = json.loads(payload)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        err = doc.get("error")
        if err is None and doc.get("object") == "error":
            err = doc
        if err is None:
            return
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("type") or err)
            code = err.get("code")
        else:
            message, code = str(err), None
        self.stream_error = {"message": message[:300], "code": code}


def _role_only(payload):
    """True for a chat chunk whose deltas carry a role and nothing generated."""
    try:
        choices = json.loads(payload).get("choices") or []
    except ValueError:
        return False
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            return False
        if any(value for key, value in delta.items() if key != "role"):
            return False
    return True


def _data_of(event):
    """Joined data lines of a multi-line SSE event; None for comments / events without data."""
    lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    if not lines:
        return None
    return b"\n".join(lines).strip()
