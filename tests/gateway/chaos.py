"""Steady client traffic, revocation probes and the ledger-versus-engine audit of the fault-injection test.

The client side records, per request, what it was served (the gateway's X-Request-Id, whether the last byte
arrived, the tokens it received, every refusal's body); the engine side is the synthetic upstream's journal
(a write(2) per count, kept when the engine is killed); the ledger is PostgreSQL. `audit()` joins the three.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import random
import time

import aiohttp

MODEL = "tiny-qwen2"
OPENAI_ERROR_FIELDS = {"message", "type", "param", "code"}
# Statuses a refusal may have: the client's fault (4xx) or an upstream/dependency that failed (502, 503,
# 504). A 500 (`internal_error`) is a gateway bug, never an acceptable answer to a fault.
REFUSAL_STATUSES = frozenset(range(400, 500)) | {502, 503, 504}


@dataclasses.dataclass
class Served:
    phase: str
    stream: bool
    outcome: str  # complete | refused | stream_error | transport
    request_id: str | None = None
    status: int | None = None
    code: str | None = None
    shaped: bool = True  # every refusal an OpenAI-shaped error
    delivered: int = 0  # completion tokens that reached the client
    ended_in: str = ""  # phase when the answer ended (a kill hits requests started in the phase before)
    detail: str = ""  # transport errors: the exception


def openai_shaped(body) -> tuple[bool, str | None]:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or set(error) != OPENAI_ERROR_FIELDS:
        return False, None
    return True, error.get("code")


def acceptable_refusal(status: int, body) -> bool:
    """An OpenAI-shaped error with a status from REFUSAL_STATUSES and not the gateway's internal_error."""
    shaped, code = openai_shaped(body)
    return shaped and status in REFUSAL_STATUSES and code != "internal_error"


class Traffic:
    """`workers` closed-loop clients on `url`, each request on a new connection (so a port shared by several
    processes spreads them). Mix: chat and completions, streamed (with and without usage) and not."""

    def __init__(self, url: str, key: str, workers: int = 8):
        self.url, self.key, self.workers = url, key, workers
        self.phase = "start"
        self.served: list[Served] = []
        self._random = random.Random(15)  # a reproducible mix

    async def run(self, stop: asyncio.Event) -> None:
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await asyncio.gather(*(self._worker(session, stop) for _worker in range(self.workers)))

    async def _worker(self, session, stop) -> None:
        while not stop.is_set():
            kind = self._random.randrange(4)
            served = await self.one(session, stream=kind < 2, chat=kind != 3, usage=kind == 0)
            self.served.append(served)
            if served.outcome != "complete":
                await asyncio.sleep(0.05)  # a client backs off a little after an error

    async def one(self, session, stream: bool, chat: bool, usage: bool) -> Served:
        body = {"model": MODEL, "max_tokens": self._random.randrange(4, 13)}
        if chat:
            body["messages"] = [{"role": "user", "content": "tell me about the sea"}]
        else:
            body["prompt"] = "the sea is"
        if stream:
            body["stream"] = True
            if usage:
                body["stream_options"] = {"include_usage": True}
        path = "/v1/chat/completions" if chat else "/v1/completions"
        served = Served(self.phase, stream, "transport")
        try:
            async with session.post(self.url + path, json=body, headers={"Authorization": f"Bearer {self.key}"}) as r:
                served.request_id, served.status = r.headers.get("X-Request-Id"), r.status
                if r.status != 200:
                    served.outcome = "refused"
                    served.shaped, served.code = openai_shaped(await _json(r))
                elif stream:
                    await _read_stream(r, served)
                else:
                    answer = await r.json()
                    served.delivered = answer["usage"]["completion_tokens"]
                    served.outcome = "complete"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            served.outcome, served.detail = "transport", f"{type(exc).__name__}: {exc}"[:200]
        served.ended_in = self.phase
        return served


async def _json(response):
    try:
        return json.loads(await response.read())
    except ValueError:
        return None


async def _read_stream(response, served: Served) -> None:
    buffer = b""
    served.outcome, served.shaped = "stream_error", False  # until [DONE] or an OpenAI-shaped error event
    async for chunk in response.content.iter_any():
        buffer += chunk
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            data = event.removeprefix(b"data: ")
            if data == b"[DONE]":
                served.outcome = "complete"
                return
            obj = json.loads(data)
            if "error" in obj:
                served.shaped, served.code = openai_shaped(obj)
                return
            for choice in obj.get("choices") or ():
                if choice.get("text") or (choice.get("delta") or {}).get("content"):
                    served.delivered += 1  # the synthetic engine sends one token per chunk


class Revocations:
    """Keys revoked one per phase; each is probed on every replica's own port every `interval` seconds."""

    def __init__(self, gateway, keys: dict[str, str], interval: float = 0.05):
        self.gw, self.keys, self.interval = gateway, keys, interval
        self.calls: list[dict] = []  # name, replica, phase, started, done, status, code
        self.probes: list[tuple[float, str, int, int]] = []  # sent, key name, replica index, status
        self._revoked: list[str] = []

    async def revoke(self, name: str, replica: int, phase: str) -> dict:
        started = time.monotonic()
        status, body = await asyncio.to_thread(
            self.gw.admin, "DELETE", f"/tenants/probe/keys/{name}", None, None, replica
        )
        shaped, code = (acceptable_refusal(status, body), openai_shaped(body)[1]) if status != 200 else (True, None)
        call = {"name": name, "replica": replica, "phase": phase, "started": started, "done": time.monotonic(),
                "status": status, "code": code, "shaped": shaped}  # fmt: skip
        self.calls.append(call)
        self._revoked.append(name)
        return call

    async def probe(self, stop: asyncio.Event) -> None:
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=5)) as session:
            while not stop.is_set():
                await asyncio.gather(*(self._probe_one(session, n, i) for n in self._revoked
                                       for i in range(len(self.gw.replicas))))  # fmt: skip
                await asyncio.sleep(self.interval)

    async def _probe_one(self, session, name: str, index: int) -> None:
        sent = time.monotonic()
        url = self.gw.replicas[index].url + "/v1/models"
        try:
            async with session.get(url, headers={"Authorization": f"Bearer {self.keys[name]}"}) as response:
                await response.read()
                self.probes.append((sent, name, index, response.status))
        except (aiohttp.ClientError, OSError, TimeoutError):
            self.probes.append((sent, name, index, 0))  # replica down (killed): nothing served

    def summary(self, repaired: dict[str, float]) -> list[dict]:
        """Per revocation: the admin call's result; the last time any replica still served the key after the
        call answered (seconds; None: never), and for a call that failed, after its phase's fault was repaired."""
        rows = []
        for call in self.calls:
            since = call["done"] if call["status"] == 200 else repaired.get(call["phase"], call["done"])
            served_after = [sent - since for sent, name, _i, status in self.probes
                            if name == call["name"] and status == 200 and sent > since]  # fmt: skip
            refused_at = {}
            for sent, name, index, status in self.probes:
                if name == call["name"] and sent > call["done"] and status in (401,) and index not in refused_at:
                    refused_at[index] = round(sent - call["done"], 3)
            rows.append({**{k: call[k] for k in ("name", "phase", "status", "code", "shaped")},
                         "served_after_s": round(max(served_after), 3) if served_after else None,
                         "measured_from": "answer" if call["status"] == 200 else "repair",
                         "first_401_after_s": refused_at})  # fmt: skip
        return rows


def upstream_counts(journal_text: str) -> dict[str, list[int]]:
    """request id -> [prompt tokens, generated tokens] from the synthetic engine's journal."""
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for line in journal_text.splitlines():
        entry = json.loads(line)
        row = counts[entry["rid"]]
        row[0] += entry.get("prompt", 0)
        row[1] += entry.get("tokens", 0)
    return dict(counts)


def ledger_rows(gw) -> dict[str, dict]:
    out = gw.sql(
        "SELECT request_id, status, coalesce(error, ''), prompt_tokens, completion_tokens, usage_estimated"
        " FROM usage_records"
    )
    rows = {}
    for line in out.splitlines():
        rid, status, error, prompt, completion, estimated = line.split("|")
        rows[rid] = {"status": int(status), "error": error, "prompt": int(prompt), "completion": int(completion),
                     "estimated": estimated == "t"}  # fmt: skip
    return rows


def audit(served: list[Served], ledger: dict[str, dict], engine: dict[str, list[int]]) -> dict:
    by_id = {s.request_id: s for s in served if s.request_id}
    complete = [s for s in served if s.outcome == "complete"]
    figures = {
        "requests_sent": len(served),
        "outcomes": dict(collections.Counter(s.outcome for s in served)),
        "refusals_by_code": dict(collections.Counter(f"{s.status}:{s.code}" for s in served if s.outcome == "refused")),
        "stream_errors_by_code": dict(collections.Counter(s.code for s in served if s.outcome == "stream_error")),
        "transport_errors_by_phase": dict(collections.Counter(s.ended_in for s in served if s.outcome == "transport")),
        "transport_error_kinds": dict(collections.Counter(s.detail.split(":")[0] for s in served if s.detail)),
        "refusals_not_openai_shaped": sum(not s.shaped for s in served if s.outcome in ("refused", "stream_error")),
        # A 500 / internal_error (or any status outside REFUSAL_STATUSES) is a failure, however well shaped.
        "refusals_with_disallowed_status": sum(
            (s.outcome == "refused" and s.status not in REFUSAL_STATUSES) or s.code == "internal_error"
            for s in served
            if s.outcome in ("refused", "stream_error")
        ),
        "completed_responses": len(complete),
        "completed_rows_lost": sum(s.request_id not in ledger for s in complete),
        "engine_requests": len(engine),
        "engine_requests_without_row": sum(rid not in ledger for rid in engine),
        "ledger_rows": len(ledger),
        "completed_token_mismatches": sum(
            (ledger[s.request_id]["prompt"], ledger[s.request_id]["completion"]) != tuple(engine[s.request_id])
            for s in complete
            if s.request_id in ledger and s.request_id in engine
        ),
        "engine_tokens": [sum(v[0] for v in engine.values()), sum(v[1] for v in engine.values())],
        "ledger_tokens_of_engine_requests": [
            sum(ledger[r]["prompt"] for r in engine if r in ledger),
            sum(ledger[r]["completion"] for r in engine if r in ledger),
        ],
    }
    unmetered = unmetered_prompt = over = unbilled = billed_undelivered = 0
    for rid, (prompt, generated) in engine.items():
        row = ledger.get(rid, {"prompt": 0, "completion": 0})
        client = by_id.get(rid)
        delivered = client.delivered if client else 0
        unmetered += max(0, delivered - row["completion"])
        if delivered:
            unmetered_prompt += max(0, prompt - row["prompt"])
        over += max(0, row["completion"] - generated)
        if client is None or client.outcome != "complete":
            unbilled += max(0, generated - row["completion"])
            billed_undelivered += max(0, row["completion"] - delivered)
    figures["unmetered_completion_tokens"] = unmetered  # reached a client, not in the ledger
    figures["unmetered_prompt_tokens"] = unmetered_prompt  # of requests that served tokens
    figures["ledger_tokens_above_engine"] = over
    # Requests cut by a kill (engine or gateway): what the engine generated that reached nobody and is not
    # billed, and what is billed although the client did not receive it (the chunk in flight at the kill).
    figures["cut_generated_not_billed"] = unbilled
    figures["cut_billed_not_delivered"] = billed_undelivered
    cut = [rid for rid in engine if rid in ledger and ledger[rid]["error"]]
    figures["rows_with_error_by_kind"] = dict(collections.Counter(ledger[rid]["error"] for rid in cut))
    return figures
