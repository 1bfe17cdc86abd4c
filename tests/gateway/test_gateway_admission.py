"""A request's Redis round trips (real Redis and PostgreSQL): one admission script and one settle script carry the
auth epoch, the rate limits and the spend budgets together, and a refusal anywhere writes nothing."""

import asyncio
import contextlib
import datetime
import hashlib
import urllib.request
import uuid
from decimal import Decimal

import openai
import pytest
import redis
import redis.asyncio as aioredis

from tests.gateway.gateway import deployment_objects
from tokenfactory_gateway import admission, budget, ratelimit
from tokenfactory_gateway.invalidation import EPOCH_LUA

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "say four words"}]  # 6 prompt tokens; reserved as 14 bytes / 4 = 4
RESERVED = 4 + 8  # prompt estimate + max_tokens=8
SPENT = 6 + 8  # what the synthetic upstream reports for one request
PRODUCT_LIMITS = {  # roles/settings/defaults/main.yml tf_rate_limits
    "perKey": {"requestsPerMinute": 120, "tokensPerMinute": 100000},
    "perTenant": {"requestsPerMinute": 600, "tokensPerMinute": 1000000},
}
SCRIPTS = {hashlib.sha1(lua.encode(), usedforsecurity=False).hexdigest(): name for name, lua in (
    ("admit", admission.ADMIT_LUA), ("settle", admission.SETTLE_LUA), ("heartbeat", EPOCH_LUA))}  # fmt: skip


@contextlib.contextmanager
def scripts_run(redis_url: str, prefix: str):
    """The names of the scripts called on keys under `prefix` while the block runs (Redis MONITOR), the
    replicas' epoch heartbeats left out."""
    called = []
    marker = f"monitor-end-{uuid.uuid4()}"
    client = redis.Redis.from_url(redis_url)
    with client.monitor() as monitor:
        yield called
        client.echo(marker)
        while marker not in (command := monitor.next_command())["command"]:
            words = command["command"].split(" ")
            if command["client_type"] != "lua" and prefix in command["command"] and words[0] in ("EVAL", "EVALSHA"):
                called.append(SCRIPTS.get(words[1], words[1]))
    called[:] = [name for name in called if name != "heartbeat"]


def hashes(redis_url: str, pattern: str) -> dict:
    client = redis.Redis.from_url(redis_url)
    return {key: client.hgetall(key) for key in sorted(client.scan_iter(pattern))}


def test_a_budgeted_rate_limited_request_makes_one_admission_and_one_settle_call(
    gateway_factory, upstream, redis_server
):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, rate_limits=PRODUCT_LIMITS))
    key = gw.create_key("acme")
    for path in ("/tenants/acme", "/tenants/acme/keys/k1"):
        assert gw.admin("PUT", path, {"budget": {"period": "day", "tokens": 10**6}})[0] == 200
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)  # seeds both budgets' spend
    prefix = f"tf:{gw.database}:"
    with scripts_run(redis_server.url, prefix) as called:
        assert client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8).usage.total_tokens == 14
    assert called == ["admit", "settle"]
    with scripts_run(redis_server.url, prefix) as called:
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).count(" ") == 8
    assert called == ["admit", "settle"]
    spent = hashes(redis_server.url, prefix + "bg:*")
    assert [v[b"t"] for k, v in spent.items() if not k.endswith(b":r")] == [b"%d" % (3 * SPENT)] * 2
    assert [v[b"t"] for k, v in spent.items() if k.endswith(b":r")] == [b"0"] * 2, "every reservation settled"
    with urllib.request.urlopen(gw.admin_url + "/metrics", timeout=10) as resp:  # the settle's spend, as a gauge
        assert 'tf_gateway_budget_spent{period="day",tenant="acme",unit="tokens"} 42.0' in resp.read().decode()


def test_a_rate_limit_refusal_reserves_nothing(gateway_factory, upstream, redis_server):
    limits = {"perKey": {"requestsPerMinute": 2}}
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, rate_limits=limits))
    key = gw.create_key("acme")
    assert gw.admin("PUT", "/tenants/acme", {"budget": {"period": "day", "tokens": 10**6}})[0] == 200
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)
    for _request in range(2):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    pattern = f"tf:{gw.database}:bg:*"
    before = hashes(redis_server.url, pattern)
    assert len(before) == 2  # the tenant budget's spent and reserved hashes
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    assert caught.value.body["code"] == "rate_limit_exceeded"
    assert hashes(redis_server.url, pattern) == before


def test_a_budget_refusal_takes_nothing_from_the_rate_limits(gateway_factory, upstream, redis_server):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, rate_limits=PRODUCT_LIMITS))
    key = gw.create_key("acme")
    budget_of = {"budget": {"period": "day", "tokens": SPENT + RESERVED - 1}}  # the first request fits, not two
    assert gw.admin("PUT", "/tenants/acme/keys/k1", budget_of)[0] == 200
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    pattern = f"tf:{gw.database}:rl:*"
    before = hashes(redis_server.url, pattern)
    assert len(before) == 2 and all(b"r" in v and b"t" in v for v in before.values())  # per key and per tenant
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    assert caught.value.body["code"] == "budget_exceeded"
    assert hashes(redis_server.url, pattern) == before


def test_an_admission_that_needs_a_seed_or_has_a_stale_epoch_writes_nothing(redis_server):
    prefix = f"tf:admission-{uuid.uuid4().hex}:"
    limits = [ratelimit.Scope(prefix + "rl:k", "key", 120, 100000), ratelimit.Scope(prefix + "rl:t", "tenant", 600, 0)]
    now = datetime.datetime.now(datetime.UTC)
    start, end = budget.period_bounds("day", now)
    scope = budget.Scope(
        prefix + "bg:t", prefix + "bg:t:r", "tenant", budget.Budget("day", Decimal(0), 100), start, end
    )
    reservation = budget.Reservation([scope], RESERVED, 0)

    async def run():
        client = aioredis.Redis.from_url(redis_server.url)
        try:
            gate = admission.Admission(client, prefix)
            epoch = (await gate.admit(None, [], None)).epoch  # seeds the epoch; nothing else is written
            written = [k async for k in client.scan_iter(prefix + "*")]
            assert written == [gate.epoch_key.encode()]
            stale = await gate.admit(epoch - 1, limits, reservation)
            assert (stale.status, stale.epoch) == (admission.STALE, epoch)
            unseeded = await gate.admit(epoch, limits, reservation)
            assert unseeded.status == admission.UNSEEDED and unseeded.budget is scope
            assert [k async for k in client.scan_iter(prefix + "*")] == written, "nothing written"
            await client.hset(scope.spent_key, mapping={"t": 90, "c": 0})  # what seeding writes
            over = await gate.admit(epoch, limits, reservation)
            assert (over.status, over.budget, over.what) == (admission.OVER_BUDGET, scope, "tokens")
            assert sorted([k async for k in client.scan_iter(prefix + "*")]) == sorted(
                [*written, b"%sbg:t" % prefix.encode()]
            )
            await client.hset(scope.spent_key, mapping={"t": 0})
            assert (await gate.admit(epoch, limits, reservation)).status == admission.ADMITTED
            assert await client.hgetall(scope.reserved_key) == {b"t": b"%d" % RESERVED, b"c": b"0"}
            # a reservation of no cost settles too (HINCRBY takes no Lua -0)
            assert await gate.settle(limits, reservation, SPENT, Decimal(0)) == [SPENT, 0]
            assert await client.hgetall(scope.reserved_key) == {b"t": b"0", b"c": b"0"}
            assert float((await client.hget(limits[0].key, "t")).decode()) <= 100000 - SPENT + 1
            assert await client.hget(limits[1].key, "t") is None, "a scope without a token limit is not debited"
        finally:
            await client.aclose()

    asyncio.run(run())


def test_a_free_deployment_still_counts_tokens_against_a_budget(gateway_factory, upstream):
    free = {"currency": "USD", "inputPer1M": "0", "outputPer1M": "0"}  # reservations of cost 0
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, pricing=free))
    key = gw.create_key("acme")
    assert gw.admin("PUT", "/tenants/acme", {"budget": {"period": "day", "tokens": SPENT + RESERVED - 1}})[0] == 200
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    with pytest.raises(openai.RateLimitError) as caught:  # 14 spent + 12 reserved > 25
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    assert caught.value.body["code"] == "budget_exceeded"
