"""Deterministic OpenAI-compatible upstream shaped like vLLM's server (a test double for the engine).

Timing is scheduled from the request's arrival, not accumulated: the first content chunk goes out at
`ttft_ms`, and each later chunk of k tokens `k * itl_ms` after the previous one, so a streamed request
ends at ttft + itl * (tokens - tokens in the first chunk). Output length: the request's `max_tokens`
(or `max_completion_tokens`) when it is at most `output_tokens` (finish_reason "length"), otherwise
`output_tokens` (finish_reason "stop"). Token i is the text TOKEN_WORDS[i % 8]; prompt tokens are
whitespace-separated words (+ 3 per chat message for its template). /v1/embeddings answers one
EMBEDDING_DIMENSIONS-long vector per input (usage: prompt_tokens only, as vLLM's pooling runner), and
/v1/responses a non-streamed Responses API object (usage: input_tokens/output_tokens) for a string `input`.

In a test:   with SyntheticUpstream(ttft_ms=50, itl_ms=5) as upstream: upstream.base_url ...
Subprocess:  SyntheticUpstream(..., subprocess=True), or
             python -m tests.engine.synthetic --port 0 --ttft-ms 50 --itl-ms 5  (prints "READY <url>")
"""

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import itertools
import json
import os
import pathlib
import select
import signal
import subprocess as sp
import sys
import threading
import time
import uuid

from tests.engine import http11
from tests.engine.synthetic_metrics import EngineMetrics

TOKEN_WORDS = (" alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel")
REPO = pathlib.Path(__file__).resolve().parents[2]
EMBEDDING_DIMENSIONS = 8


@dataclasses.dataclass
class UpstreamConfig:
    model: str = "tiny-qwen2"
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    tokens_per_chunk: int = 1
    output_tokens: int = 16
    max_model_len: int = 4096
    kv_cache_tokens: int = 8192  # vllm:kv_cache_usage_perc = tokens of running requests / this
    error_after_chunks: int | None = None  # send vLLM's in-stream error event (HTTP 200) after N chunks
    abort_after_chunks: int | None = None  # drop the connection after N chunks (no [DONE])
    end_after_chunks: int | None = None  # end the HTTP body cleanly after N chunks, without usage or [DONE]
    die_after_requests: int | None = None  # serve N generation requests, then stop listening and drop all
    fail_status: int | None = None  # answer every generation request with this HTTP status (e.g. 503)
    journal: str | None = None  # append-only file of what was counted: survives a kill -9 of this process
    metric_names: str = "vllm"  # name the /metrics series as vllm, nim (served at /v1/metrics too) or dynamo


def completion_text(tokens: int) -> str:
    return "".join(TOKEN_WORDS[i % len(TOKEN_WORDS)] for i in range(tokens))


def count_prompt_tokens(path: str, body: dict) -> int:
    if path.endswith("/chat/completions"):
        total = 0
        for message in body["messages"]:
            content = message.get("content") or ""
            if isinstance(content, list):
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            total += len(str(content).split()) + 3
        return total
    prompt = body["input"] if path.endswith(("/embeddings", "/responses")) else body["prompt"]
    if isinstance(prompt, list):
        return len(prompt) if all(isinstance(t, int) for t in prompt) else sum(len(str(p).split()) for p in prompt)
    return len(str(prompt).split())


def error_body(message: str, err_type: str, code: int, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


class RequestError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status, self.body = status, error_body(message, err_type, status, param)


class Generation:
    """One chat/completions request: validated parameters and the OpenAI payload shapes."""

    def __init__(self, config: UpstreamConfig, path: str, body: dict):
        if not isinstance(body, dict):
            raise RequestError(400, "request body must be a JSON object")
        self.chat = path.endswith("/chat/completions")
        required = "messages" if self.chat else "prompt"
        if not body.get(required) or (self.chat and not isinstance(body["messages"], list)):
            raise RequestError(400, f"field '{required}' is required", param=required)
        if body.get("model") != config.model:
            raise RequestError(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model")
        if body.get("n", 1) != 1:
            raise RequestError(400, "only n=1 is supported by the synthetic upstream", param="n")
        self.prompt_tokens = count_prompt_tokens(path, body)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise RequestError(400, "max_tokens must be a positive integer", param="max_tokens")
        if self.prompt_tokens + (limit or 0) > config.max_model_len:
            raise RequestError(400, f"prompt + max_tokens exceed max_model_len={config.max_model_len}", "max_tokens")
        self.tokens = min(limit, config.output_tokens) if limit else config.output_tokens
        self.finish_reason = "length" if limit and limit <= config.output_tokens else "stop"
        self.stream = bool(body.get("stream"))
        options = body.get("stream_options") or {}
        self.include_usage = self.stream and bool(options.get("include_usage"))
        self.continuous_usage = self.include_usage and bool(options.get("continuous_usage_stats"))
        self.model = config.model
        self.id = f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex[:16]}"
        self.created = int(time.time())
        self.object = "chat.completion" if self.chat else "text_completion"

    def usage(self, completion_tokens: int) -> dict:
        total = self.prompt_tokens + completion_tokens
        return {"prompt_tokens": self.prompt_tokens, "total_tokens": total, "completion_tokens": completion_tokens}

    def _envelope(self, obj: str, choices: list) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": choices}

    def response(self) -> dict:
        text = completion_text(self.tokens)
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice |= {"logprobs": None, "finish_reason": self.finish_reason, "stop_reason": None}
        return self._envelope(self.object, [choice]) | {"usage": self.usage(self.tokens)}

    def chunk(self, text: str | None, finish: bool, sent: int) -> dict:
        """A stream chunk; text None is the chat role preamble. `sent`: tokens emitted so far."""
        reason = self.finish_reason if finish else None
        if self.chat:
            delta = {"role": "assistant", "content": ""} if text is None else {"content": text}
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        if finish:
            choice["stop_reason"] = None
        payload = self._envelope(self.object + (".chunk" if self.chat else ""), [choice])
        if self.continuous_usage:
            payload["usage"] = self.usage(sent)
        return payload

    def usage_chunk(self) -> dict:
        return self._envelope(self.object + (".chunk" if self.chat else ""), []) | {"usage": self.usage(self.tokens)}


class Outcome:
    """A request's finish reason, counted in the metrics once, when it is decided (vLLM counts it then too)."""

    def __init__(self, metrics, request_id: int, arrival: float):
        self.metrics, self.request_id, self.arrival = metrics, request_id, arrival
        self.reason: str | None = None

    def decide(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            elapsed = asyncio.get_running_loop().time() - self.arrival
            self.metrics.request_finished(self.request_id, reason, elapsed)


class SyntheticUpstream:
    """Serve the synthetic upstream on 127.0.0.1 from a background thread (or a subprocess)."""

    def __init__(self, port: int = 0, subprocess: bool = False, **options):
        self.config = UpstreamConfig(**options)
        self.port = port
        self.subprocess = subprocess
        self.metrics = EngineMetrics(self.config.model, self.config.kv_cache_tokens, self.config.metric_names)
        self.received: collections.deque = collections.deque(maxlen=1000)  # (method, path, headers, body)
        self.generation_requests = 0
        self.died = threading.Event()  # set when die_after_requests fired
        self._closed: asyncio.Event | None = None
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread: threading.Thread | None = None
        self._proc: sp.Popen | None = None
        self._journal = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self, timeout: float = 10) -> str:
        if self.subprocess:
            return self._start_subprocess(timeout)
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_thread, args=(ready,), name="synthetic-upstream", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self._server is None:
            raise RuntimeError("synthetic upstream did not start")
        return self.base_url

    def _run_thread(self, ready: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.listen())
        finally:
            ready.set()
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    async def listen(self) -> None:
        self._closed = asyncio.Event()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    def _start_subprocess(self, timeout: float) -> str:
        args = [sys.executable, "-m", "tests.engine.synthetic", "--port", str(self.port)]
        for field in dataclasses.fields(UpstreamConfig):
            value = getattr(self.config, field.name)
            if value is not None:
                args += [f"--{field.name.replace('_', '-')}", str(value)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self._proc = sp.Popen(args, stdout=sp.PIPE, text=True, env=env, cwd=REPO, start_new_session=True)
        readable = select.select([self._proc.stdout], [], [], timeout)[0]
        line = self._proc.stdout.readline() if readable else ""  # "READY http://127.0.0.1:PORT"
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"synthetic upstream subprocess did not start within {timeout} s: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        return self.base_url

    def kill(self) -> None:
        """SIGKILL the subprocess (a crashed engine); start() brings it back on the same port."""
        proc, self._proc = self._proc, None
        proc.kill()
        proc.wait()
        proc.stdout.close()

    def stop(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            proc.terminate()
            try:
                proc.wait(10)
            except sp.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            return
        if self._loop is None:
            return
        loop, self._loop = self._loop, None
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)

    async def _shutdown(self) -> None:
        self._closed.set()
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()

    def __enter__(self) -> "SyntheticUpstream":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- HTTP ------------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while request := await http11.read_request(reader):
                self.received.append((request.method, request.path, request.headers, request.body))
                if not await self._dispatch(request, writer) or not request.keep_alive:
                    break
        except http11.BadRequest as exc:
            await http11.send_json(writer, 400, error_body(str(exc), "BadRequestError", 400), keep_alive=False)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _dispatch(self, request: http11.Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close."""
        route = (request.method, request.path)
        keep = request.keep_alive
        if route == ("GET", "/health"):
            await http11.send(writer, 200, b"", "application/json", keep)
        elif request.method == "GET" and request.path in ("/metrics", self.metrics.names["path"]):
            await http11.send(writer, 200, self.metrics.render().encode(), "text/plain; version=0.0.4", keep)
        elif route == ("GET", "/v1/models"):
            await http11.send_json(writer, 200, self._models(), keep)
        elif route in (("POST", "/v1/embeddings"), ("POST", "/v1/responses")):
            await self._answer_at_once(request, writer)
        elif request.path in ("/v1/chat/completions", "/v1/completions"):
            if request.method != "POST":
                await http11.send_json(writer, 405, error_body("Method Not Allowed", "BadRequestError", 405), keep)
                return keep
            return await self._generate(request, writer)
        else:
            await http11.send_json(writer, 404, error_body("Not Found", "NotFoundError", 404), keep)
        return keep

    async def _answer_at_once(self, request: http11.Request, writer: asyncio.StreamWriter) -> None:
        """/v1/embeddings or a non-streamed /v1/responses, with the usage shape vLLM gives each."""
        body = request.json()
        if not isinstance(body, dict) or not body.get("input"):
            await http11.send_json(writer, 400, error_body("field 'input' is required", "BadRequestError", 400),
                                   request.keep_alive)  # fmt: skip
            return
        self.generation_requests += 1
        prompt = count_prompt_tokens(request.path, body)
        if request.path.endswith("/embeddings"):
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vector = [round(0.1 * (i + 1), 3) for i in range(EMBEDDING_DIMENSIONS)]
            data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(len(inputs))]
            usage = {"prompt_tokens": prompt, "total_tokens": prompt}
            answer = {"object": "list", "model": self.config.model, "data": data, "usage": usage}
        else:
            tokens = min(body.get("max_output_tokens") or self.config.output_tokens, self.config.output_tokens)
            text = {"type": "output_text", "text": completion_text(tokens), "annotations": []}
            output = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [text]}]
            usage = {"input_tokens": prompt, "output_tokens": tokens, "total_tokens": prompt + tokens}
            answer = {"id": f"resp_{uuid.uuid4().hex[:16]}", "object": "response", "created_at": int(time.time()),
                      "model": self.config.model, "status": "completed", "output": output, "usage": usage}  # fmt: skip
        await http11.send_json(writer, 200, answer, request.keep_alive)

    def _models(self) -> dict:
        model = {"id": self.config.model, "object": "model", "created": int(time.time()), "owned_by": "vllm"}
        return {"object": "list", "data": [model | {"root": self.config.model, "max_model_len": 4096}]}

    async def _generate(self, request: http11.Request, writer: asyncio.StreamWriter) -> bool:
        arrival = asyncio.get_running_loop().time()
        self.generation_requests += 1
        limit = self.config.die_after_requests
        if limit is not None and self.generation_requests > limit:
            await self._die()
            return False
        if self.config.fail_status is not None:
            status = self.config.fail_status
            body = error_body(f"synthetic upstream answers HTTP {status}", "ServiceUnavailableError", status)
            await http11.send_json(writer, status, body, request.keep_alive)
            return request.keep_alive
        try:
            gen = Generation(self.config, request.path, request.json())
        except http11.BadRequest as exc:
            await http11.send_json(writer, 400, error_body(str(exc), "BadRequestError", 400), request.keep_alive)
            return request.keep_alive
        except RequestError as exc:
            await http11.send_json(writer, exc.status, exc.body, request.keep_alive)
            return request.keep_alive
        request_id = next(self._ids)
        self.metrics.request_started(request_id, gen.prompt_tokens)
        gen.caller_id = request.headers.get("x-request-id", "")
        self._record(gen, "prompt", gen.prompt_tokens)
        outcome = Outcome(self.metrics, request_id, arrival)
        try:
            if gen.stream:
                await self._stream(gen, writer, request.keep_alive, outcome)
            else:
                await self._sleep_until(arrival, self._finish_offset(gen.tokens))
                self.metrics.tokens_generated(request_id, gen.tokens)
                self._record(gen, "tokens", gen.tokens)
                self.metrics.ttft.observe(self.config.ttft_ms / 1000)
                outcome.decide(gen.finish_reason)
                await http11.send_json(writer, 200, gen.response(), request.keep_alive)
        finally:
            outcome.decide("abort")  # no effect when already decided
        return outcome.reason != "abort" and request.keep_alive

    def _record(self, gen: Generation, kind: str, count: int) -> None:
        """Journal a count before the bytes it stands for are sent (a write(2): kept when this process is killed)."""
        if self.config.journal is None:
            return
        if self._journal is None:
            self._journal = os.open(self.config.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._journal, json.dumps({"rid": gen.caller_id, kind: count}).encode() + b"\n")

    async def _die(self) -> None:
        self.died.set()
        await self._shutdown()

    def _finish_offset(self, tokens: int) -> float:
        first = min(tokens, self.config.tokens_per_chunk)
        return (self.config.ttft_ms + self.config.itl_ms * (tokens - first)) / 1000

    @staticmethod
    async def _sleep_until(start: float, offset: float) -> None:
        delay = start + offset - asyncio.get_running_loop().time()
        if delay > 0:
            await asyncio.sleep(delay)

    async def _stream(self, gen: Generation, writer, keep_alive: bool, outcome: Outcome) -> None:
        """Send the SSE stream; its finish reason is decided (and counted) before the closing events are sent."""
        config, body, arrival = self.config, http11.ChunkedStream(writer), outcome.arrival

        async def event(payload) -> None:  # compact JSON, as vLLM (pydantic) sends its chunks
            data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
            await body.write(f"data: {data}\n\n".encode())

        await body.begin(200, "text/event-stream; charset=utf-8", keep_alive)
        if gen.chat:
            await event(gen.chunk(None, False, 0))
        sent, chunks, offset, last = 0, 0, config.ttft_ms / 1000, None
        while sent < gen.tokens:
            if config.abort_after_chunks is not None and chunks >= config.abort_after_chunks:
                writer.transport.abort()
                return
            if config.end_after_chunks is not None and chunks >= config.end_after_chunks:
                outcome.decide("error")
                with contextlib.suppress(ConnectionError):
                    await body.end()
                return
            if config.error_after_chunks is not None and chunks >= config.error_after_chunks:
                outcome.decide("error")
                await self._last_events(body, event, error_body("Internal server error", "InternalServerError", 500))
                return
            count = min(config.tokens_per_chunk, gen.tokens - sent)
            if chunks:
                offset += config.itl_ms * count / 1000
            await self._sleep_until(arrival, offset)
            now = asyncio.get_running_loop().time()
            if last is None:
                self.metrics.ttft.observe(now - arrival)
            else:
                for _token in range(count):
                    self.metrics.itl.observe((now - last) / count)
            last = now
            text = "".join(TOKEN_WORDS[i % len(TOKEN_WORDS)] for i in range(sent, sent + count))
            sent += count
            chunks += 1
            self.metrics.tokens_generated(outcome.request_id, count)
            self._record(gen, "tokens", count)
            await event(gen.chunk(text, sent == gen.tokens, sent))
        outcome.decide(gen.finish_reason)
        await self._last_events(body, event, *([gen.usage_chunk()] if gen.include_usage else []))

    @staticmethod
    async def _last_events(body, event, *payloads) -> None:
        """Send the closing events and end the body. The outcome is already counted: a client that leaves as soon
        as it has what it needs (the SDK closes on an error event) must not turn it into an abort, and one that
        reads /metrics right after must find it."""
        with contextlib.suppress(ConnectionError):
            for payload in (*payloads, "[DONE]"):
                await event(payload)
            await body.end()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Deterministic OpenAI-compatible upstream (vLLM-shaped).")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed as READY <url>)")
    for field in dataclasses.fields(UpstreamConfig):
        text = field.name in ("model", "journal", "metric_names")
        kind = str if text else float if field.name.endswith("_ms") else int
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=field.default)
    return parser.parse_args(argv)


async def serve_forever(upstream: SyntheticUpstream) -> int:
    await upstream.listen()
    print(f"READY {upstream.base_url}", flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, upstream._closed.set)
    await upstream._closed.wait()
    await upstream._shutdown()
    return 1 if upstream.died.is_set() else 0


def main(argv: list[str] | None = None) -> int:
    args = vars(parse_args(argv))
    upstream = SyntheticUpstream(port=args.pop("port"), **args)
    return asyncio.run(serve_forever(upstream))


if __name__ == "__main__":
    sys.exit(main())
