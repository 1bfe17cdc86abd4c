"""Durable usage ledger: records are group-committed to PostgreSQL by one background writer.

A record is queued when its response ends (including client disconnects). The writer inserts what
accumulated during the last `flush_interval` (or as soon as `batch_size` records wait), idempotently by
request id, so a busy gateway does one insert per interval instead of one per request. If PostgreSQL is
unreachable the batch is appended to a local spool file (fsync'ed) and replayed later; on shutdown
the queue is flushed (or spooled) before the process exits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
import pathlib
import uuid
from decimal import Decimal

import orjson
import contextlib

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

    def to_json(self) -> bytes:
        return orjson.dumps({c: _jsonable(getattr(self, c)) for c in COLUMNS})

    @classmethod
    def from_json(cls, line: bytes) -> UsageRecord:
        raw = orjson.loads(line)
        for name in ("request_id", "key_id"):
            raw[name] = uuid.UUID(raw[name])
        for name in ("started_at", "finished_at"):
            raw[name] = datetime.datetime.fromisoformat(raw[name])
        for name in ("input_per_1m", "output_per_1m", "cost"):
            raw[name] = Decimal(raw[name])
        return cls(**raw)


def _jsonable(value):
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return value


class MeterWriter:
    def __init__(self, pool, spool_dir: str, batch_size: int, flush_interval: float, metrics):
        self.pool, self.batch_size, self.metrics = pool, batch_size, metrics
        self.flush_interval = flush_interval
        self.spool = pathlib.Path(spool_dir) / "usage.jsonl"
        self._queue: list[UsageRecord] = []
        self._wake = asyncio.Event()
        self._task = None
        self._closing = False

    def record(self, rec: UsageRecord) -> None:
        self._queue.append(rec)
        if len(self._queue) == 1 or len(self._queue) >= self.batch_size:
            self._wake.set()

    async def start(self) -> None:
        await self.replay_spool()
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task:
            await self._task
        await self._flush_all()

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=RETRY_SECONDS if self.spool.exists() else None)
            self._wake.clear()
            if len(self._queue) < self.batch_size and not self._closing:
                await asyncio.sleep(self.flush_interval)  # let the batch fill
            self.metrics.meter_pending.set(len(self._queue))
            await self._flush_all()
            if self.spool.exists():
                await self.replay_spool()

    async def _flush_all(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self.batch_size], self._queue[self.batch_size :]
            try:
                await self.pool.executemany(INSERT_SQL, [r.row() for r in batch])
                self.metrics.meter_written.inc(len(batch))
            except Exception as exc:
                LOG.error("usage insert failed (%s); spooling %d record(s) to %s", exc, len(batch), self.spool)
                self._spool(batch)
            self.metrics.meter_pending.set(len(self._queue))

    def _spool(self, batch) -> None:
        self.spool.parent.mkdir(parents=True, exist_ok=True)
        with self.spool.open("ab") as fh:
            fh.write(b"".join(r.to_json() + b"\n" for r in batch))
            fh.flush()
            os.fsync(fh.fileno())
        self.metrics.meter_spooled.inc(len(batch))

    async def replay_spool(self) -> None:
        if not self.spool.exists():
            return
        claimed = self.spool.with_suffix(f".replay-{os.getpid()}")
        self.spool.rename(claimed)
        records = [UsageRecord.from_json(line) for line in claimed.read_bytes().splitlines() if line.strip()]
        try:
            for start in range(0, len(records), self.batch_size):
                chunk = records[start : start + self.batch_size]
                await self.pool.executemany(INSERT_SQL, [r.row() for r in chunk])
                self.metrics.meter_written.inc(len(chunk))
        except Exception as exc:
            LOG.error("spool replay failed (%s); keeping %d record(s)", exc, len(records))
            self._spool(records)  # idempotent inserts make re-sending already written ones harmless
        claimed.unlink()
