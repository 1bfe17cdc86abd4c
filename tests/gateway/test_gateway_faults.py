"""Each fault on its own, with real processes: a Redis restart after a revocation, a frozen (SIGSTOP) PostgreSQL,
a kill -9 while usage is spooled or being replayed, an engine killed mid-stream, a kill -9 right after responses
completed. What the client was served is metered, and what was revoked stays revoked."""

import contextlib
import json
import signal
import time
import urllib.request

import openai
import pytest

from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import Gateway, deployment_objects
from lab.datastores import PostgresServer, RedisServer
from lab.wait import wait_until

pytestmark = [pytest.mark.gateway, pytest.mark.slow]
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "say four words"}]  # 6 prompt tokens


def client(url, key, **kw):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, **kw)


def ledger_ids(gw) -> set[str]:
    return set(gw.sql("SELECT request_id FROM usage_records").split())


def served_request(c, i) -> str:
    """One completed request (streamed or not); returns the gateway's X-Request-Id of it."""
    if i % 2:
        raw = c.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES, max_tokens=3)
        assert raw.parse().usage.completion_tokens == 3
    else:
        raw = c.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES, stream=True)
        assert "".join(ch.choices[0].delta.content or "" for ch in raw.parse() if ch.choices)
    return raw.headers["x-request-id"]


def get(url, timeout):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def test_kill_9_right_after_responses_completed_loses_no_row(gateway_factory, upstream):
    # A slow group commit (1 s) makes the window the old writer had (rows queued in memory) easy to hit.
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url), metering_flush_interval=1.0)
    c = client(gw.url, gw.create_key("acme"))
    served = [served_request(c, i) for i in range(12)]
    gw.replicas[0].stop(signal.SIGKILL)
    gw.replicas[0].start()
    wait_until(lambda: set(served) <= ledger_ids(gw), 20, "every served request in the ledger")
    assert gw.sql("SELECT sum(completion_tokens) FROM usage_records") == str(6 * 3 + 6 * 8)


@contextlib.contextmanager
def own_postgres(redis_server, upstream):
    """A gateway (one replica) on a PostgreSQL of its own, for tests that stop or freeze the database."""
    postgres = PostgresServer().start()
    gw = Gateway(postgres, redis_server, deployment_objects("tiny", MODEL, upstream.base_url), database_timeout=1.0)
    try:
        gw.add_replica()
        yield postgres, gw, gw.replicas[0]
    finally:
        gw.stop()
        postgres.stop()


def test_frozen_postgres_neither_hangs_the_gateway_nor_loses_usage(redis_server, upstream):
    with own_postgres(redis_server, upstream) as (postgres, gw, replica):
        c = client(gw.url, gw.create_key("acme", "k1"))
        other = client(gw.url, gw.create_key("acme", "k2"))  # created, never used: not in the key cache
        served = [served_request(c, i) for i in range(4)]
        postgres.freeze()
        try:
            served += [served_request(c, i) for i in range(4, 20)]  # a cached key keeps working
            started = time.monotonic()
            with pytest.raises(openai.APIStatusError) as refused:
                other.models.list()
            assert refused.value.status_code == 503 and refused.value.body["code"] == "database_unavailable"
            assert time.monotonic() - started < 5
            assert get(replica.internal_url + "/ready", timeout=5) == 200, (
                "readiness must answer while the database hangs"
            )
            started = time.monotonic()
            replica.proc.send_signal(signal.SIGTERM)
            assert replica.proc.wait(30) == 0, "SIGTERM must finish while PostgreSQL hangs"
            assert time.monotonic() - started < 30
        finally:
            postgres.thaw()
        replica.start()
        wait_until(lambda: set(served) <= ledger_ids(gw), 30, "rows of the freeze written after the restart")
        assert len(ledger_ids(gw)) == 20


def test_legacy_replay_file_of_a_killed_gateway_is_written_at_start(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
    c = client(gw.url, gw.create_key("acme"))
    served_request(c, 1)
    wait_until(lambda: len(ledger_ids(gw)) == 1, 10, "one row")
    template = json.loads(gw.sql("SELECT row_to_json(u) FROM usage_records u"))
    gw.replicas[0].stop()
    spool = gw.dir / "spool"
    spool.mkdir(exist_ok=True)
    # What the previous release left behind when it was killed while replaying its spool (usage.replay-<pid>).
    decimals = {name: str(template[name]) for name in ("input_per_1m", "output_per_1m", "cost")}
    rows = []
    for i in range(5):
        row = {**template, **decimals, "request_id": f"00000000-0000-4000-8000-00000000000{i}"}
        rows.append(json.dumps(row))
    (spool / "usage.replay-4242").write_text("\n".join(rows[:3]) + "\n")
    (spool / "usage.jsonl").write_text("\n".join(rows[3:]) + "\n")
    gw.replicas[0].start()
    wait_until(lambda: len(ledger_ids(gw)) == 6, 15, "legacy spool rows written")
    assert sorted(p.name for p in spool.glob("usage*")) == []


def test_kill_9_while_the_spool_is_replayed_loses_nothing(redis_server, upstream):
    with own_postgres(redis_server, upstream) as (postgres, gw, replica):
        c = client(gw.url, gw.create_key("acme"))
        served = [served_request(c, i) for i in range(2)]
        postgres.halt()
        served += [served_request(c, i) for i in range(2, 30)]  # spooled: the database is down
        postgres.start_frozen()  # the next replay connects, and hangs
        time.sleep(4)
        replica.stop(signal.SIGKILL)
        postgres.thaw()
        replica.start()
        wait_until(lambda: set(served) <= ledger_ids(gw), 30, "spooled rows after the kill")
        assert len(ledger_ids(gw)) == 30


@pytest.mark.parametrize("how", ["killed", "ended"])
def test_engine_failing_mid_stream_is_an_error_and_metered(gateway_factory, tmp_path, how):
    """killed: kill -9 of the engine process. ended: the engine ends the body cleanly without usage or [DONE]."""
    journal = tmp_path / "engine.journal"
    options = {"end_after_chunks": 4} if how == "ended" else {}
    upstream = SyntheticUpstream(model=MODEL, subprocess=True, output_tokens=50, itl_ms=100, journal=str(journal),
                                 **options)  # fmt: skip
    upstream.start()
    try:
        gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
        c = client(gw.url, gw.create_key("acme"))
        raw = c.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES, stream=True)
        received = 0
        with pytest.raises(openai.APIError) as failed:
            for chunk in raw.parse():
                received += bool(chunk.choices and chunk.choices[0].delta.content)
                if received == 3 and how == "killed":
                    upstream.kill()
        rid = raw.headers["x-request-id"]
        wait_until(lambda: rid in ledger_ids(gw), 10, "the cut stream's row")
        row = gw.sql(
            f"SELECT status, error, prompt_tokens, completion_tokens FROM usage_records WHERE request_id='{rid}'"  # noqa: S608
        )
        status, error, prompt, completion = row.split("|")
        counted = [json.loads(line) for line in journal.read_text().splitlines()]
        generated = sum(e.get("tokens", 0) for e in counted if e["rid"] == rid)
        assert int(prompt) == 6, "prompt tokens of a cut stream are known from the engine's running usage"
        assert received <= int(completion) <= generated
        assert (status, error) == ("502", "upstream_stream_truncated")
        assert "model server closed the stream" in str(failed.value.message), failed.value
    finally:
        upstream.stop()


def test_revocation_while_redis_is_down_holds_after_redis_restarts_empty(postgres_server, upstream):
    redis = RedisServer().start()
    gw = Gateway(postgres_server, redis, deployment_objects("tiny", MODEL, upstream.base_url))
    try:
        gw.add_replica()
        gw.add_replica()
        key = gw.create_key("acme")
        clients = [client(r.url, key) for r in gw.replicas]
        for c in clients:  # warm both key caches
            c.models.list()
        redis.halt()
        status, body = gw.admin("DELETE", "/tenants/acme/keys/k1")
        # The change is saved in PostgreSQL, but no replica can be told: the call must say so, OpenAI-shaped.
        assert status == 503 and body["error"]["code"] == "redis_unavailable", (status, body)
        redis.start()  # empty: no epoch, no registry

        def answer(c):
            try:
                c.models.list()
                return 200
            except openai.APIStatusError as err:
                return err.status_code

        for c in clients:
            wait_until(lambda c=c: answer(c) != 503, 15, "replica serving again")
        for _attempt in range(10):
            assert [answer(c) for c in clients] == [401, 401], "a revoked key came back after the Redis restart"
        status, body = gw.admin("DELETE", "/tenants/acme/keys/k1")
        assert status == 200 and body["changed"] is False
    finally:
        gw.stop()
        redis.stop()
