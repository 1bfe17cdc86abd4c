"""Durable usage ledger: journaled locally first (journal.py), then group-committed to PostgreSQL.

A request is journaled when it is admitted, as a stream progresses, and with its ledger row before the client
gets the response's last byte. One background writer inserts what accumulated during `flush_interval` (or as
soon as `batch_size` rows wait), idempotently by request id, then deletes the journal segment the rows came
from. When PostgreSQL fails or hangs (every statement is bounded by the database timeout), the segment stays on
disk and is replayed every RETRY_SECONDS; so are the segments of gateway processes that died (this replica's
earlier life, or another replica sharing the spool directory). Rows PostgreSQL refuses as data (not as an
outage) are moved to `rejected.jsonl` instead of blocking the rows around them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import os
import pathlib
import time
import uuid
from decimal import Decimal

import asyncpg
import orjson

from .db import UNAVAILABLE
from .journal import Journal, read_lines
from .routing import Price

LOG = logging.getLogger("tokenfactory_gateway.metering")
COLUMNS = tuple(
    [
        "request_id",
        "started_at",
        "finished_at",
        "tenant",
        "key_id",
        "model",
        "deployment",
        "route",
        "stream",
        "status",
        "error",
        "client_disconnected",
        "usage_estimated",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "ttft_ms",
        "currency",
        "input_per_1m",
        "output_per_1m",
        "cost",
    ]
)
INSERT_SQL = (  # built from the fixed column list above
    f"INSERT INTO usage_records ({', '.join(COLUMNS)}) VALUES "  # noqa: S608
    f"({', '.join(f'${i}' for i in range(1, len(COLUMNS) + 1))}) ON CONFLICT (request_id) DO NOTHING"
)
RETRY_SECONDS = 2.0
TERMINATED = "gateway_terminated"  # error of a row rebuilt from a journal whose process died mid-request
UTC = datetime.UTC


@dataclasses.dataclass(slots=True)
class UsageRecord:
    request_id: uuid.UUID
    started_at: datetime.datetime
    finished_at: datetime.datetime
    tenant: str
    key_id: uuid.UUID
    model: str
    deployment: str
    route: str
    stream: bool
    status: int
    error: str | None
    client_disconnected: bool
    usage_estimated: bool
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    ttft_ms: float | None
    currency: str
    input_per_1m: Decimal
    output_per_1m: Decimal
    cost: Decimal

    def row(self) -> tuple:
        return tuple(getattr(self, c) for c in COLUMNS)

    def journal_line(self) -> bytes:
        return b'{"k":"d",' + orjson.dumps(self, default=str)[1:]

    @classmethod
    def from_journal(cls, raw: dict) -> UsageRecord:
        raw = {name: raw[name] for name in COLUMNS}
        for name in ("request_id", "key_id"):
            raw[name] = uuid.UUID(raw[name])
        for name in ("started_at", "finished_at"):
            raw[name] = datetime.datetime.fromisoformat(raw[name])
        for name in ("input_per_1m", "output_per_1m", "cost"):
            raw[name] = Decimal(str(raw[name]))
        return cls(**raw)


def opened_line(request_id: str, started: datetime.datetime, info, dep, route: str, stream: bool) -> bytes:
    """The journal line of an admitted request: enough to bill it if this process dies before it ends."""
    price = dep.price
    return orjson.dumps(
        {
            "k": "o",
            "request_id": request_id,
            "started_at": started,
            "tenant": info.tenant,
            "key_id": info.key_id,
            "model": dep.model,
            "deployment": dep.name,
            "route": route,
            "stream": stream,
            "currency": price.currency,
            "input_per_1m": str(price.input_per_1m),
            "output_per_1m": str(price.output_per_1m),
        },
        default=str,
    )  # fmt: skip - default: asyncpg's UUID type


PROGRESS = b'{"k":"p","request_id":"%b","prompt_tokens":%d,"completion_tokens":%d,"usage_estimated":%b,"at":%.6f}'


def progress_line(request_id: str, prompt: int, completion: int, estimated: bool) -> bytes:
    """A stream's progress (written once per upstream read: formatted, not serialized)."""
    return PROGRESS % (request_id.encode(), prompt, completion, b"true" if estimated else b"false", time.time())


def rows_of_dead_process(objects: list[dict]) -> list[UsageRecord]:
    """Ledger rows from the journal of a process that is gone: its done rows, and for every request it opened
    but never finished a `gateway_terminated` row with the last progress it journaled (the client may have
    received up to that much)."""
    done: dict[str, UsageRecord] = {}
    opened: dict[str, dict] = {}
    progress: dict[str, dict] = {}
    for obj in objects:
        kind = obj.get("k", "d")  # lines without a kind: spool files of earlier releases (done rows)
        if kind == "d":
            done[obj["request_id"]] = UsageRecord.from_journal(obj)
        elif kind == "o":
            opened.setdefault(obj["request_id"], obj)
        elif kind == "p":
            progress[obj["request_id"]] = obj
    rows = list(done.values())
    for request_id, obj in opened.items():
        if request_id not in done:
            rows.append(_terminated(obj, progress.get(request_id)))
    return rows


def _terminated(opened: dict, progress: dict | None) -> UsageRecord:
    started = datetime.datetime.fromisoformat(opened["started_at"])
    finished = datetime.datetime.fromtimestamp(progress["at"], UTC) if progress else started
    prompt, completion = (progress["prompt_tokens"], progress["completion_tokens"]) if progress else (0, 0)
    price = Price(opened["currency"], Decimal(opened["input_per_1m"]), Decimal(opened["output_per_1m"]))
    return UsageRecord(
        request_id=uuid.UUID(opened["request_id"]),
        started_at=started,
        finished_at=finished,
        tenant=opened["tenant"],
        key_id=uuid.UUID(opened["key_id"]),
        model=opened["model"],
        deployment=opened["deployment"],
        route=opened["route"],
        stream=opened["stream"],
        status=500,
        error=TERMINATED,
        client_disconnected=False,
        usage_estimated=progress["usage_estimated"] if progress else True,
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_ms=(finished - started).total_seconds() * 1000,
        ttft_ms=None,
        currency=price.currency,
        input_per_1m=price.input_per_1m,
        output_per_1m=price.output_per_1m,
        cost=price.cost(prompt, completion),
    )


class MeterWriter:
    def __init__(self, pool, spool_dir: str, batch_size: int, flush_interval: float, metrics, timeout: float,
                 fsync_seconds: float = 1.0):  # fmt: skip
        self.pool, self.batch_size, self.metrics, self.timeout = pool, batch_size, metrics, timeout
        self.flush_interval, self.fsync_seconds = flush_interval, fsync_seconds
        self.journal = Journal(spool_dir)
        self.rejected = pathlib.Path(spool_dir) / "rejected.jsonl"
        self._queue: list[UsageRecord] = []
        self._unwritten: list[pathlib.Path] = []  # own sealed segments whose insert failed
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._closing = False

    # -- the request path (synchronous: one write(2) each) ------------------------------------------
    def opened(self, request_id: str, line: bytes) -> None:
        """Raises OSError when the journal cannot be written: the request must then not be served."""
        self.journal.opened(request_id, line)

    def progressed(self, request_id: str, prompt: int, completion: int, estimated: bool) -> None:
        try:
            self.journal.progressed(request_id, progress_line(request_id, prompt, completion, estimated))
        except OSError as exc:
            LOG.error("usage journal write failed: %s", exc)

    def record(self, rec: UsageRecord) -> None:
        try:
            self.journal.done(str(rec.request_id), rec.journal_line())
        except OSError as exc:  # still inserted from memory; only a crash before that loses it
            LOG.error("usage journal write failed: %s", exc)
        self._queue.append(rec)
        if len(self._queue) == 1 or len(self._queue) >= self.batch_size:
            self._wake.set()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        self.journal.start()
        await self.recover()
        self._tasks = [asyncio.create_task(self._run())]
        if self.fsync_seconds:
            self._tasks.append(asyncio.create_task(self._fsync_loop()))

    async def close(self) -> None:
        """Flush what is queued; whatever PostgreSQL does not take stays journaled for the next process."""
        self._closing = True
        self._wake.set()
        for task in self._tasks[1:]:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._flush()
        if self._unwritten:
            with contextlib.suppress(*UNAVAILABLE):
                await self._replay_own()
        self.journal.close(clean=not self._unwritten and not self._queue)

    async def _run(self) -> None:
        next_recovery = time.monotonic() + RETRY_SECONDS
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=RETRY_SECONDS)
            self._wake.clear()
            if self._queue and len(self._queue) < self.batch_size and not self._closing:
                await asyncio.sleep(self.flush_interval)  # let the batch fill
            try:
                await self._flush()
                if time.monotonic() >= next_recovery:
                    next_recovery = time.monotonic() + RETRY_SECONDS
                    await self.recover()
            except Exception:  # the writer must outlive any bug: what it did not write stays journaled
                LOG.exception("usage writer iteration failed; retrying in %s s", RETRY_SECONDS)

    async def _fsync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.fsync_seconds)
            fd = self.journal.fsync_fd()
            if fd is not None:
                try:
                    await asyncio.to_thread(os.fsync, fd)
                finally:
                    os.close(fd)

    # -- writing -----------------------------------------------------------------------------------
    async def _flush(self) -> None:
        if not self._queue:
            return
        batch, self._queue = self._queue, []
        segment = self.journal.seal()
        self.metrics.meter_pending.set(0)
        try:
            await self._insert(batch)
        except Exception as exc:  # not known to be in PostgreSQL: the segment on disk is replayed later
            if isinstance(exc, UNAVAILABLE):
                LOG.error("usage insert failed (%s); %d record(s) stay journaled in %s", _why(exc), len(batch),
                          segment.path)  # fmt: skip
            else:
                LOG.exception("usage insert failed; %d record(s) stay journaled in %s", len(batch), segment.path)
            self._unwritten.append(segment.path)
            self.metrics.meter_spooled.inc(len(batch))
            await asyncio.to_thread(_fsync_path, segment.path)  # it may wait on disk for a while: make it durable
            return
        _unlink(segment.path)

    async def _insert(self, records: list[UsageRecord]) -> None:
        """Insert idempotently; UNAVAILABLE (incl. timeouts) propagates, rows refused as data are set aside."""
        for start in range(0, len(records), self.batch_size):
            chunk = records[start : start + self.batch_size]
            try:
                async with asyncio.timeout(self.timeout * 2):
                    await self.pool.executemany(INSERT_SQL, [r.row() for r in chunk], timeout=self.timeout)
            except UNAVAILABLE:
                raise
            except asyncpg.PostgresError:
                await self._insert_one_by_one(chunk)
            self.metrics.meter_written.inc(len(chunk))

    async def _insert_one_by_one(self, records: list[UsageRecord]) -> None:
        for rec in records:
            try:
                async with asyncio.timeout(self.timeout * 2):
                    await self.pool.execute(INSERT_SQL, *rec.row(), timeout=self.timeout)
            except UNAVAILABLE:
                raise
            except asyncpg.PostgresError as exc:
                LOG.error("usage row %s refused by PostgreSQL (%s); moved to %s", rec.request_id, exc, self.rejected)
                with self.rejected.open("ab") as fh:
                    fh.write(rec.journal_line() + b"\n")
                self.metrics.meter_rejected.inc()

    # -- replaying ---------------------------------------------------------------------------------
    async def recover(self) -> None:
        """Replay own failed segments, then the journals of gateway processes that are gone."""
        try:
            if self._unwritten:
                await self._replay_own()
            for lock in self.journal.dead_owner_locks():
                with self.journal.claim_dead_owner(lock) as owner:
                    if owner is not None:
                        await self._replay_dead(owner, lock)
            for legacy in self.journal.legacy_files():
                await self._replay_files([legacy], [legacy])
        except UNAVAILABLE as exc:
            LOG.error("usage replay postponed: %s", _why(exc))
        except Exception:
            LOG.exception("usage replay failed; retrying in %s s", RETRY_SECONDS)

    async def _replay_own(self) -> None:
        """Own segments hold done rows (inserted here) and snapshots of requests that finished or are still
        running in this process (ignored: their done rows are, or will be, in a later segment)."""
        while self._unwritten:
            path = self._unwritten[0]
            done = [UsageRecord.from_journal(o) for o in read_lines(path) if o.get("k") == "d"]
            await self._insert(done)
            self.metrics.meter_replayed.inc(len(done))
            path.unlink(missing_ok=True)
            self._unwritten.pop(0)

    async def _replay_dead(self, owner: str, lock: pathlib.Path) -> None:
        segments = self.journal.segment_paths(owner)
        await self._replay_files(segments, [*segments, lock])
        LOG.info("replayed the usage journal of %s (%d segment(s))", owner, len(segments))

    async def _replay_files(self, sources: list[pathlib.Path], remove: list[pathlib.Path]) -> None:
        rows = rows_of_dead_process([obj for path in sources for obj in read_lines(path)])
        await self._insert(rows)
        self.metrics.meter_replayed.inc(len(rows))
        for path in remove:
            path.unlink(missing_ok=True)


def _fsync_path(path: pathlib.Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _unlink(path: pathlib.Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
