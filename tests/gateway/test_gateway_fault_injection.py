"""Fault injection under steady traffic, then the ledger audited against the engine's own counts.

Two gateway replicas behind one port (SO_REUSEPORT, shared spool directory), real PostgreSQL 15 and Redis 7, the
synthetic engine as a separate process journaling its counts. While 8 clients keep sending a mix of streamed and
non-streamed requests, in turn: PostgreSQL stopped, frozen (SIGSTOP) and restarted, Redis stopped and restarted
empty, the engine killed (kill -9) mid-stream and restarted, one replica killed (kill -9) and restarted. In every
phase a key is revoked and then probed on both replicas. The figures are printed at the end of the run (and
written to tests/output/gateway-fault-injection.json).
"""

import asyncio
import contextlib
import json
import os
import signal
import time

import pytest

from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.chaos import MODEL, Revocations, Traffic, audit, ledger_rows, upstream_counts
from tests.gateway.fixtures import FAULT_FIGURES
from tests.gateway.gateway import ROOT, Gateway, deployment_objects
from lab.datastores import PostgresServer, RedisServer
from lab.processes import free_port
from lab.wait import wait_until

pytestmark = [pytest.mark.gateway, pytest.mark.slow]
PHASES = ("steady", "postgres-stopped", "postgres-frozen", "postgres-restarted", "redis-restarted-empty",
          "engine-killed", "replica-killed", "steady-again")  # fmt: skip


class Stack:
    def __init__(self, tmp_path):
        self.postgres = PostgresServer().start()
        self.redis = RedisServer().start()
        self.journal = tmp_path / "engine.journal"
        self.engine = SyntheticUpstream(model=MODEL, subprocess=True, ttft_ms=20, itl_ms=10, output_tokens=16,
                                        journal=str(self.journal))  # fmt: skip
        self.engine.start()
        self.shared_port = free_port()
        self.gw = Gateway(self.postgres, self.redis, deployment_objects("tiny", MODEL, self.engine.base_url),
                          database_timeout=1.0, reuse_port=True)  # fmt: skip
        for _replica in range(2):  # its own port first (probes), then the shared one (traffic)
            self.gw.add_replica(listen=f"127.0.0.1:{free_port()},127.0.0.1:{self.shared_port}")

    def stop(self):
        for part in (self.gw, self.engine, self.redis, self.postgres):
            part.stop()


@pytest.fixture
def stack(tmp_path):
    stack = Stack(tmp_path)
    yield stack
    stack.stop()


async def drive(stack, traffic, revocations) -> dict[str, float]:
    """Run the phases; returns when each phase's fault was repaired (monotonic time)."""
    gw, postgres, redis, engine = stack.gw, stack.postgres, stack.redis, stack.engine
    repaired = {}
    stop = asyncio.Event()
    running = [asyncio.create_task(traffic.run(stop)), asyncio.create_task(revocations.probe(stop))]

    async def phase(name, fault=None, hold=4.0, repair=None, revoke_on=0, revoke_during=True, settle=3.0):
        traffic.phase = name
        if fault:
            await asyncio.to_thread(fault)
        if revoke_during:
            await asyncio.sleep(hold / 2)
            await revocations.revoke(name, revoke_on, name)
            await asyncio.sleep(hold / 2)
        else:
            await asyncio.sleep(hold)
        if repair:
            await asyncio.to_thread(repair)
        repaired[name] = time.monotonic()
        if not revoke_during:
            await asyncio.sleep(settle / 2)
            await revocations.revoke(name, revoke_on, name)
            await asyncio.sleep(settle / 2)
        else:
            await asyncio.sleep(settle)

    await phase("steady", hold=3)
    await phase("postgres-stopped", postgres.halt, 5, postgres.start)
    await phase("postgres-frozen", postgres.freeze, 6, postgres.thaw)
    await phase("postgres-restarted", lambda: (postgres.halt(), postgres.start()), 0.5, revoke_during=False)
    await phase("redis-restarted-empty", redis.halt, 4, redis.start, revoke_on=1)
    await phase("engine-killed", engine.kill, 1.5, engine.start, revoke_during=False)
    replica = gw.replicas[1]
    await phase("replica-killed", lambda: replica.stop(signal.SIGKILL), 3, replica.start, revoke_on=0)
    await phase("steady-again", hold=3)
    stop.set()
    await asyncio.gather(*running)
    return repaired


def test_ledger_and_revocations_hold_under_every_fault(stack, request):
    gw = stack.gw
    key = gw.create_key("load")
    probe_keys = {name: gw.create_key("probe", name) for name in PHASES}
    traffic = Traffic(f"http://127.0.0.1:{stack.shared_port}", key)
    revocations = Revocations(gw, probe_keys)
    for replica in gw.replicas:  # every probe key is in both replicas' caches before the faults
        for value in probe_keys.values():
            assert replica.request("GET", "/v1/models", token=value)[0] == 200
    repaired = asyncio.run(drive(stack, traffic, revocations))

    # Let every journal (also the killed replica's) reach the ledger, and the engine's journal be complete.
    def settled():
        rows = ledger_rows(gw)
        return all(s.request_id in rows for s in traffic.served if s.outcome == "complete") and rows

    with contextlib.suppress(TimeoutError):  # the figures below say what is missing
        wait_until(settled, 60, "journals replayed into the ledger")
    time.sleep(3)  # one more replay period: rows of requests cut by the replica kill
    engine = upstream_counts(stack.journal.read_text())
    figures = audit(traffic.served, ledger_rows(gw), engine)
    figures["revocations"] = revocations.summary(repaired)
    # An operator (or the api_key module) repeats a call that failed; it then holds everywhere.
    for call in revocations.calls:
        if call["status"] != 200:
            assert gw.admin("DELETE", f"/tenants/probe/keys/{call['name']}")[0] == 200
    final = {name: [r.request("GET", "/v1/models", token=value)[0] for r in gw.replicas]
             for name, value in probe_keys.items()}  # fmt: skip
    figures["revoked_keys_served_at_the_end"] = sum(200 in statuses for statuses in final.values())
    figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    request.config.stash.setdefault(FAULT_FIGURES, []).append(figures)
    out = ROOT / "tests" / "output"
    out.mkdir(exist_ok=True)
    (out / "gateway-fault-injection.json").write_text(json.dumps(figures, indent=2))
    (out / "gateway-fault-injection.log").write_text(gw.logs())

    assert figures["completed_rows_lost"] == 0, diagnose(stack, traffic, figures)
    assert figures["engine_requests_without_row"] == 0, figures
    assert figures["completed_token_mismatches"] == 0, figures
    assert figures["unmetered_completion_tokens"] == 0, figures
    assert figures["unmetered_prompt_tokens"] == 0, figures
    assert figures["ledger_tokens_above_engine"] == 0, figures
    assert figures["refusals_not_openai_shaped"] == 0, figures
    assert figures["refusals_with_disallowed_status"] == 0, figures
    assert set(figures["transport_errors_by_phase"]) <= {"replica-killed"}, figures
    assert figures["revoked_keys_served_at_the_end"] == 0, figures
    for row in figures["revocations"]:
        assert row["shaped"], row
        assert row["status"] in (200, 503), row
        # Answered 200: refused everywhere within 1 s. Failed because Redis was down although the change was
        # saved: refused within 2 s of Redis being back (empty), without anyone repeating the call.
        if row["status"] == 200 or row["code"] == "redis_unavailable":
            limit = 1.0 if row["status"] == 200 else 2.0
            assert row["served_after_s"] is None or row["served_after_s"] <= limit, row
    assert figures["outcomes"].get("complete", 0) > 500, "steady traffic ran through the faults"


def diagnose(stack, traffic, figures) -> str:
    """What became of completed responses missing from the ledger: their trace in logs and journals."""
    rows = ledger_rows(stack.gw)
    missing = [s for s in traffic.served if s.outcome == "complete" and s.request_id not in rows]
    spool = stack.gw.dir / "spool"
    files = sorted(p.name for p in spool.iterdir()) if spool.exists() else []
    logs = stack.gw.logs()
    lines = [f"figures: {figures}", f"spool: {files}"]
    for served in missing[:5]:
        traces = [line[:300] for line in logs.splitlines() if served.request_id in line]
        journaled = [p.name for p in spool.glob("*.journal") if served.request_id in p.read_text()]
        lines.append(f"missing {served}: journals {journaled}; log {traces}")
    errors = [line[:300] for line in logs.splitlines() if not line.startswith("{")]
    return "\n".join([*lines, "gateway log (non-access):", *errors[-40:]])
