"""The usage ledger equals what the upstream generated: soak with aborted streams, restarts, a database outage."""

import asyncio
import signal
import urllib.request

import openai
import pytest

from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import Gateway, deployment_objects
from lab.datastores import PostgresServer
from lab.wait import wait_until

pytestmark = [pytest.mark.gateway, pytest.mark.slow]
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "tell me a story"}]


@pytest.fixture
def upstream():
    with SyntheticUpstream(model=MODEL, output_tokens=16, itl_ms=2) as up:
        yield up


async def mixed_load(urls, key, count, concurrency=16):
    """Non-streamed, streamed (with and without usage), completions, and streams the client abandons."""
    clients = [openai.AsyncOpenAI(base_url=u + "/v1", api_key=key, max_retries=0) for u in urls]
    gate = asyncio.Semaphore(concurrency)

    async def one(i):
        c = clients[i % len(clients)]
        kind = i % 5
        async with gate:
            if kind == 0:
                await c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4 + i % 9)
            elif kind in (1, 2):
                options = {"include_usage": True} if kind == 2 else None
                stream = await c.chat.completions.create(
                    model=MODEL, messages=MESSAGES, stream=True, stream_options=options
                )
                async for _chunk in stream:
                    pass
            elif kind == 3:
                await c.completions.create(model=MODEL, prompt="one two three four", max_tokens=3 + i % 5)
            else:
                stream = await c.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
                seen = 0
                async for _chunk in stream:
                    seen += 1
                    if seen == 3:
                        break
                await stream.close()  # the client walks away mid-stream

    await asyncio.gather(*(one(i) for i in range(count)))
    for c in clients:
        await c.close()


def ledger_totals(gw):
    return gw.sql(
        "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM usage_records"
    )


def spooled(gw) -> float:
    """Rows whose insert failed and that wait in the journal on disk (tf_gateway_metering_spooled_records)."""
    with urllib.request.urlopen(gw.admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("tf_gateway_metering_spooled_records_total"))  # fmt: skip


def upstream_totals(upstream):
    return f"{int(upstream.metrics.prompt_tokens)}|{int(upstream.metrics.generation_tokens)}"


def test_soak_ledger_equals_upstream_usage_including_aborted_streams(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url), replicas=2)
    key = gw.create_key("acme")
    asyncio.run(mixed_load([r.url for r in gw.replicas], key, 400))
    wait_until(lambda: ledger_totals(gw).startswith("400|"), 30, "400 ledger rows")
    assert ledger_totals(gw) == "400|" + upstream_totals(upstream)
    # A walk-away is only noticed if a write fails: short streams may already sit in socket buffers.
    disconnected = int(gw.sql("SELECT count(*) FROM usage_records WHERE client_disconnected"))
    assert 0 < disconnected <= 80
    assert gw.sql("SELECT count(*) FROM usage_records WHERE usage_estimated OR status <> 200") == "0"
    assert gw.sql("SELECT sum(cost) = sum(prompt_tokens * 0.15 + completion_tokens * 0.60) / 1000000"
                  " FROM usage_records") == "t"  # fmt: skip


def test_restart_during_load_loses_no_usage(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url), replicas=1)
    key = gw.create_key("acme")
    replica = gw.replicas[0]

    async def load_then_sigterm():
        load = asyncio.create_task(mixed_load([replica.url], key, 60, concurrency=12))
        await asyncio.sleep(0.3)
        replica.proc.send_signal(signal.SIGTERM)  # graceful: in-flight requests finish, the queue is flushed
        await asyncio.gather(load, return_exceptions=True)

    asyncio.run(load_then_sigterm())
    assert replica.proc.wait(60) == 0
    rows_after_stop = ledger_totals(gw)
    metered = rows_after_stop.split("|", 1)[1]
    assert metered == upstream_totals(upstream), (
        "not everything the upstream generated is metered:\n" + gw.logs()[-3000:]
    )
    replica.start()
    asyncio.run(mixed_load([replica.url], key, 20))
    wait_until(lambda: ledger_totals(gw).split("|", 1)[1] == upstream_totals(upstream), 30, "ledger after restart")


def test_database_outage_spools_usage_to_disk_and_replays_it(redis_server, upstream):
    postgres = PostgresServer().start()
    gw = Gateway(postgres, redis_server, deployment_objects("tiny", MODEL, upstream.base_url))
    try:
        gw.add_replica()
        key = gw.create_key("acme")
        asyncio.run(mixed_load([gw.url], key, 10))  # warms the key cache while the database is up
        wait_until(lambda: ledger_totals(gw).startswith("10|"), 30, "10 rows")
        postgres.halt()
        asyncio.run(mixed_load([gw.url], key, 25))
        wait_until(lambda: spooled(gw) >= 25, 15, "25 rows left in the journal")
        postgres.start()
        wait_until(lambda: ledger_totals(gw).startswith("35|"), 30, "replayed rows")
        assert ledger_totals(gw) == "35|" + upstream_totals(upstream)
    finally:
        gw.stop()
        postgres.stop()
