"""Rate limits across two gateway replicas sharing one Redis: exact under concurrent bursts."""

import asyncio
import time

import openai
import pytest

from tests.gateway.gateway import deployment_objects
from lab.wait import wait_until

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "say four words"}]  # 6 prompt tokens


async def burst(gw, keys, count, max_tokens=1):
    """Fire `count` requests at once, spread over keys and replicas; returns (ok, 429 errors)."""
    clients = [openai.AsyncOpenAI(base_url=r.url + "/v1", api_key=k, max_retries=0) for k in keys for r in gw.replicas]

    async def one(i):
        try:
            await clients[i % len(clients)].chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=max_tokens
            )
            return None
        except openai.RateLimitError as err:
            return err

    results = await asyncio.gather(*(one(i) for i in range(count)))
    for c in clients:
        await c.close()
    return sum(r is None for r in results), [r for r in results if r is not None]


def test_requests_per_minute_per_key_hold_exactly_over_two_replicas(gateway_factory, upstream):
    limits = {"perKey": {"requestsPerMinute": 12}}
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, rate_limits=limits), replicas=2)
    key, other = gw.create_key("acme", "k1"), gw.create_key("acme", "k2")
    started = time.monotonic()
    ok, limited = asyncio.run(burst(gw, [key], 48))
    # the bucket refills 12/60 per second: allow what refilled while the burst ran
    assert 12 <= ok <= 12 + int((time.monotonic() - started) * 12 / 60)
    assert len(limited) == 48 - ok
    err = limited[0]
    assert err.status_code == 429 and err.body["code"] == "rate_limit_exceeded"
    assert 1 <= int(err.response.headers["Retry-After"]) <= 6
    assert asyncio.run(burst(gw, [other], 1))[0] == 1, "another key has its own bucket"
    wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == str(ok + 1), 10, "ledger")
    assert gw.sql("SELECT count(*) FROM usage_records WHERE status <> 200") == "0", "a 429 is not metered"


def test_tenant_limit_spans_its_keys_and_replicas(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url), replicas=2)
    keys = [gw.create_key("acme", f"k{i}", limits={"requests_per_minute": 9}) for i in range(3)]
    started = time.monotonic()
    ok, limited = asyncio.run(burst(gw, keys, 36))
    assert 9 <= ok <= 9 + int((time.monotonic() - started) * 9 / 60)
    assert all("tenant requests" in e.body["message"] for e in limited)


def test_tokens_per_minute_count_real_usage(gateway_factory, upstream):
    limits = {"perKey": {"tokensPerMinute": 100}}
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, rate_limits=limits), replicas=2)
    key = gw.create_key("acme")
    clients = [openai.OpenAI(base_url=r.url + "/v1", api_key=key, max_retries=0) for r in gw.replicas]
    served = 0
    with pytest.raises(openai.RateLimitError) as caught:
        for i in range(20):  # each request uses 6 prompt + 8 completion = 14 tokens
            clients[i % 2].chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
            served += 1
    # admitted while the bucket is positive: 7 * 14 = 98 < 100, the 8th overdraws it, the 9th waits
    assert served == 8
    assert "key per deployment tokens" in caught.value.body["message"]
    assert int(caught.value.response.headers["Retry-After"]) >= 1
