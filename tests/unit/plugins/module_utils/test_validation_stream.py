"""SSE chunk recording and the raw HTTP/1.1 client on crafted bytes (loopback only, no engine)."""

import asyncio
import json
import random

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import event_loop, http_stream
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.loadgen import LoadGenerator, LoadSpec
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.sse_recorder import SSERecorder


def sse(*docs):
    return b"".join(b"data: " + (d if isinstance(d, bytes) else json.dumps(d).encode()) + b"\n\n" for d in docs)


CHAT = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
    {"choices": [{"index": 0, "delta": {"content": ""}}]},  # a token with no text yet: still a chunk
    {"choices": [{"index": 0, "delta": {"content": ' "choices": [{ x'}, "finish_reason": "length"}]},
    {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}},
    b"[DONE]",
]


def feed_split(recorder, data, pieces, seed=0):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), pieces - 1))
    for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(data)], strict=True)):
        recorder.feed(data[a:b], float(i))


@pytest.mark.parametrize("pieces", [1, 2, 7, 40])
def test_chat_stream_any_split(pieces):
    recorder = SSERecorder()
    feed_split(recorder, sse(*CHAT), pieces, seed=pieces)
    assert len(recorder.chunk_times) == 3  # role preamble excluded, empty-text token included
    assert recorder.usage["completion_tokens"] == 4 and recorder.done
    assert recorder.stream_error is None


def test_role_with_content_counts_and_crlf_comments_multiline():
    recorder = SSERecorder()
    data = (
        b": ping\r\n\r\n"
        + b'data: {"choices":[{"delta":{"role":"assistant","content":"Hello"}}]}\r\n\r\n'
        + b'data: {"choices":\ndata: [{"text":"x"}]}\n\n'
        + b"data: [DONE]\n\n"
    )
    recorder.feed(data, 1.0)
    assert recorder.chunk_times == [1.0, 1.0] and recorder.done and recorder.events == 3


def test_error_inside_200_stream():
    recorder = SSERecorder()
    recorder.feed(
        sse(CHAT[1], {"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}, b"[DONE]"), 0.5
    )
    assert recorder.stream_error == {"message": "engine died", "code": 500}
    legacy = SSERecorder()
    legacy.feed(sse({"object": "error", "message": "boom", "code": 429}), 0.5)
    assert legacy.stream_error == {"message": "boom", "code": 429}


def chunked(body, size=7):
    out = b""
    for i in range(0, len(body), size):
        piece = body[i : i + size]
        out += b"%x;ext=1\r\n%s\r\n" % (len(piece), piece)
    return out + b"0\r\nX-Trailer: y\r\n\r\n"


class FakeConn:
    exchange = None

    def abort(self):
        pass


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
def test_exchange_decodes_body_framings(framing):
    body = sse(*CHAT)
    if framing == "chunked":
        raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body)
    elif framing == "length":
        raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    else:
        raw = b"HTTP/1.0 200 OK\r\n\r\n" + body
    loop = asyncio.new_event_loop()
    try:
        recorder = SSERecorder()
        ex = http_stream.Exchange(FakeConn(), lambda status, headers: recorder, loop.create_future(), False)
        for i in range(0, len(raw), 5):
            ex.on_data(raw[i : i + 5])
        if framing == "close":
            ex.on_lost(None)
        assert ex.future.done() and ex.error_kind is None
        assert ex.keep_alive is (framing != "close")
        assert len(recorder.chunk_times) == 3 and recorder.done
    finally:
        loop.close()


def test_exchange_reports_truncated_stream():
    loop = asyncio.new_event_loop()
    try:
        recorder = SSERecorder()
        ex = http_stream.Exchange(FakeConn(), lambda s, h: recorder, loop.create_future(), False)
        ex.on_data(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(sse(CHAT[1]))[:-20])
        ex.on_lost(ConnectionResetError("reset"))
        assert ex.error_kind == "connection_lost" and len(recorder.chunk_times) == 1
    finally:
        loop.close()


def test_redact_url_and_target():
    assert http_stream.redact_url("http://u:pw@h:8/v1") == "http://h:8/v1"
    target = http_stream.Target("http://[::1]:8000/v1/completions?x=1")
    assert target.host_header == "[::1]:8000" and target.path == "/v1/completions?x=1"
    with pytest.raises(ValueError, match="http"):
        http_stream.Target("ftp://h/x")


async def _serve(responses):
    """Loopback server answering each connection's requests with the given raw responses in order."""
    queue = list(responses)

    async def handle(reader, writer):
        while queue:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            action = queue.pop(0)
            if action == "hang":
                await asyncio.sleep(5)
            elif action == "drop":
                writer.transport.abort()
                return
            else:
                writer.write(action)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


RUNNERS = {"stock asyncio loop": asyncio.run, "StreamLoop": event_loop.run}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_load_generator_outcomes_on_loopback(runner):
    ok_body = sse(*CHAT)
    ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(ok_body)
    error = json.dumps({"error": {"message": "rate limit for key sk-test-secret", "code": 429}}).encode()
    limited = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: %d\r\n\r\n" % len(error) + error
    no_usage = sse(CHAT[1]) + sse(b"[DONE]")
    estimate = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(no_usage) + no_usage

    async def scenario():
        server, port = await _serve([ok, limited, estimate, "hang", "drop"])
        spec = LoadSpec(
            f"http://127.0.0.1:{port}/v1",
            "m",
            api_key="sk-test-secret",
            num_requests=5,
            concurrency=1,
            warmup_requests=0,
            request_timeout=0.5,
        )
        gen = LoadGenerator(spec)
        records, _t0, _t_end = await gen.run(prompts=["hello world"] * 5)
        gen.client.close()
        server.close()
        return records

    records = RUNNERS[runner](scenario())
    assert [r.error_kind for r in records] == [None, "rate_limited", None, "timeout", "connection_lost"]
    assert records[0].ok and records[0].output_tokens == 4 and records[0].prompt_tokens == 7
    assert records[1].retry_after == "3" and "sk-test-secret" not in records[1].error
    assert records[2].ok and records[2].tokens_estimated and records[2].output_tokens == 1
    assert not records[3].ok and records[3].end - records[3].start < 2


def test_spec_validation_names_fields():
    with pytest.raises(ValueError, match="api must be one of chat, completions"):
        LoadSpec("http://h/v1", "m", api="embeddings")
    with pytest.raises(ValueError, match="request_rate must be > 0 for mode poisson"):
        LoadSpec("http://h/v1", "m", mode="poisson")
    with pytest.raises(ValueError, match="concurrency must be > 0"):
        LoadSpec("http://h/v1", "m", concurrency=0)
    assert LoadSpec("http://h:1", "m", api="completions").url == "http://h:1/v1/completions"
    body = json.loads(LoadSpec("http://h/v1", "m", extra_body={"temperature": 0}, output_tokens=9).body("hi"))
    assert body["max_tokens"] == 9 and body["ignore_eos"] and body["temperature"] == 0
    assert body["stream_options"] == {"include_usage": True}


async def _trickle(chunks, gap):
    """Loopback server streaming `chunks` SSE content events, `gap` seconds apart, then usage and [DONE]."""

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        event = sse(CHAT[1])
        for _i in range(chunks):
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))  # one whole HTTP chunk per event
            await asyncio.sleep(gap)
        writer.write(chunked(sse(CHAT[4], b"[DONE]"), size=4096))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_stream_loop_serves_streams_inline_and_keeps_timers_and_tasks_running():
    """While a stream is read inside the selector, asyncio's timers and other tasks still run, and the
    request's completion wakes its task."""

    async def scenario():
        server, port = await _trickle(chunks=100, gap=0.005)
        ticks = []

        async def ticker():
            for _i in range(5):
                await asyncio.sleep(0.01)
                ticks.append(len(recorder_times))

        spec = LoadSpec(f"http://127.0.0.1:{port}/v1", "m", num_requests=1, warmup_requests=0, concurrency=1)
        gen = LoadGenerator(spec)
        recorder_times = []
        tick_task = asyncio.ensure_future(ticker())
        record = (await gen.run(prompts=["hi"]))[0][0]
        recorder_times.extend(record.chunk_times)
        await tick_task
        gen.client.close()
        server.close()
        return record, ticks, asyncio.get_running_loop()

    record, ticks, loop = event_loop.run(scenario())
    assert isinstance(loop, event_loop.StreamLoop) and (loop.streams is not None) is event_loop.EPOLL
    assert record.ok and len(record.chunk_times) == 100
    assert record.chunk_times == sorted(record.chunk_times)
    assert len(ticks) == 5 and ticks[0] == 0  # the ticker ran while the 0.5 s stream was still going


def test_parser_error_fails_the_request_not_the_loop(monkeypatch):
    def broken(self, data, now):
        raise ValueError("parser bug")

    monkeypatch.setattr(SSERecorder, "feed", broken)
    ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(sse(*CHAT))

    async def scenario():
        server, port = await _serve([ok])
        spec = LoadSpec(f"http://127.0.0.1:{port}/v1", "m", num_requests=1, warmup_requests=0, request_timeout=5)
        gen = LoadGenerator(spec)
        records, _t0, _t_end = await gen.run(prompts=["hi"])
        gen.client.close()
        server.close()
        return records[0]

    record = event_loop.run(scenario())
    assert record.error_kind == "client_error" and "parser bug" in record.error


def _vllm_chunk(text, finish=None, role=False, usage=None):
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    if role:
        choice = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": finish}
    doc = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}
    if usage:
        doc["usage"] = usage
    return json.dumps(doc, separators=(",", ":")).encode()


TEXTS = [" world", "", ' say "hi"', "back\\slash", "new\nline", "é", ' {"choices":[{', "\\", '"', " x"]


@pytest.mark.parametrize("seed", range(6))
def test_template_shortcut_classifies_like_the_full_parser(seed):
    """Content chunks recognised from the previous chunk's bytes (template) are exactly those the full
    classification finds, whatever the generated text contains and however the bytes are split."""
    rng = random.Random(seed)
    docs = []
    for _i in range(60):
        kind = rng.random()
        if kind < 0.05:
            docs.append(_vllm_chunk("", role=True))  # chat-style role preamble: not content
        elif kind < 0.1:
            docs.append(_vllm_chunk(rng.choice(TEXTS), usage={"prompt_tokens": 1, "completion_tokens": 2}))
        else:
            docs.append(_vllm_chunk(rng.choice(TEXTS), finish=rng.choice([None, None, None, "length"])))
    docs += [json.dumps(CHAT[4]).encode(), b"[DONE]"]
    events = [b"data: " + d + b"\n\n" for d in docs]

    class Reference(SSERecorder):
        __slots__ = ()

        def _template(self, event):  # never a shortcut: every event through the full classification
            self._before = self._after = None

    fast, reference = SSERecorder(), Reference()
    for i, event in enumerate(events):
        fast.feed(event, float(i))
        reference.feed(event, float(i))
    assert fast.chunk_times == reference.chunk_times and len(fast.chunk_times) >= 50
    assert fast.usage == reference.usage and fast.done and reference.done
    split = SSERecorder()
    feed_split(split, b"".join(events), 25, seed=seed)
    assert len(split.chunk_times) == len(reference.chunk_times)


def test_https_streams_through_the_asyncio_transport(tmp_path):
    """TLS connections keep asyncio's SSL transport (only plain TCP is read inside the selector)."""
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(sse(*CHAT))

    async def scenario():
        async def handle(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-len")))
            await reader.readexactly(length)
            writer.write(ok)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        spec = LoadSpec(f"https://127.0.0.1:{port}/v1", "m", num_requests=1, warmup_requests=0, ca_path=str(cert))
        gen = LoadGenerator(spec)
        records, _t0, _t_end = await gen.run(prompts=["hi"])
        gen.client.close()
        server.close()
        return records[0]

    record = event_loop.run(scenario())
    assert record.ok and len(record.chunk_times) == 3 and record.output_tokens == 4
