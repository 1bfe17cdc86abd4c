"""Spend budgets across two gateway replicas (real Redis and PostgreSQL): exact under a concurrent burst, a
stream that crosses the budget is finished and metered, the spend survives Redis losing it (ledger)."""

import asyncio
import urllib.request

import openai
import pytest
import redis

from lab.wait import wait_until
from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import deployment_objects
from tests.gateway.test_gateway_limits import burst  # the same burst, over both replicas

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "say four words"}]  # 6 prompt tokens; reserved as 14 bytes / 4 = 4
RESERVED = 4 + 8  # prompt estimate + max_tokens=8
SPENT = 6 + 8  # what the synthetic upstream reports for one request
EXPENSIVE = {"currency": "USD", "inputPer1M": "1000", "outputPer1M": "1000"}  # 0.001 per token


def put_budget(gw, path, budget):
    status, answer = gw.admin("PUT", path, {"budget": budget})
    assert status == 200, answer
    return answer


def test_a_burst_against_a_nearly_spent_key_budget_admits_exactly_what_fits(gateway_factory):
    # Every request is still running when the last one is decided: the reservations alone decide.
    with SyntheticUpstream(model=MODEL, output_tokens=8, ttft_ms=3000) as slow:
        gw = gateway_factory(deployment_objects("tiny", MODEL, slow.base_url), replicas=2)
        key = gw.create_key("acme")
        put_budget(gw, "/tenants/acme/keys/k1", {"period": "day", "tokens": 5 * RESERVED + RESERVED - 1})
        served, refused = asyncio.run(burst(gw, [key], 24, max_tokens=8))
        assert served == 5
        assert len(refused) == 19 and slow.generation_requests == 5, "a refused request is never forwarded"
        err = refused[0]
        assert err.status_code == 429
        assert err.body["code"] == "budget_exceeded" and err.body["type"] == "insufficient_quota"
        assert "key's spend budget per day (71 tokens)" in err.body["message"]
        # spent 5 * 14 = 70 of 71: nothing more fits, on either replica
        assert asyncio.run(burst(gw, [key], 2, max_tokens=8))[0] == 0
        wait_until(lambda: gw.sql("SELECT count(*), sum(prompt_tokens + completion_tokens) FROM usage_records")
                   == f"5|{5 * SPENT}", 10, "ledger")  # fmt: skip
        text = _metrics_text(gw)
        assert 'tf_gateway_budget_exceeded_total{model="tiny-qwen2",scope="key",tenant="acme"}' in text


def _metrics_text(gw) -> str:
    parts = []
    for replica in gw.replicas:
        with urllib.request.urlopen(replica.internal_url + "/metrics", timeout=10) as resp:
            parts.append(resp.read().decode())
    return "\n".join(parts)


def test_a_stream_crossing_the_tenant_budget_is_finished_and_metered(gateway_factory, upstream):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, pricing=EXPENSIVE), replicas=2)
    keys = [gw.create_key("acme", "k1"), gw.create_key("acme", "k2")]
    # 0.013 covers the first request's reservation (12 tokens) but not what it really spends (14)
    tenant = put_budget(gw, "/tenants/acme", {"period": "month", "amount": "0.013"})
    assert tenant["tenant"]["budget"] == {"period": "month", "amount": "0.013", "tokens": 0}
    first = openai.OpenAI(base_url=gw.replicas[0].url + "/v1", api_key=keys[0], max_retries=0)
    stream = first.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8, stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).count(" ") == 8
    wait_until(lambda: gw.sql("SELECT status, prompt_tokens, completion_tokens, cost FROM usage_records")
               == "200|6|8|0.014", 10, "the crossing stream's ledger row")  # fmt: skip
    second = openai.OpenAI(base_url=gw.replicas[1].url + "/v1", api_key=keys[1], max_retries=0)
    with pytest.raises(openai.RateLimitError) as caught:  # the tenant's other key, on the other replica
        second.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    assert caught.value.body["code"] == "budget_exceeded"
    assert "tenant's spend budget per month (0.013)" in caught.value.body["message"]
    # raising the budget lets the tenant go on at once (the admin change reaches both replicas)
    put_budget(gw, "/tenants/acme", {"period": "month", "amount": "1"})
    assert second.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8).usage.total_tokens == SPENT


def test_spend_is_rebuilt_from_the_ledger_when_redis_loses_it(gateway_factory, upstream, redis_server):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url), replicas=2)
    key = gw.create_key("acme")
    put_budget(gw, "/tenants/acme", {"period": "day", "tokens": 2 * SPENT + RESERVED - 1})
    client = openai.OpenAI(base_url=gw.replicas[0].url + "/v1", api_key=key, max_retries=0)
    for _request in range(2):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "2", 10, "ledger")
    store = redis.Redis.from_url(redis_server.url)
    spent = list(store.scan_iter(f"tf:{gw.database}:bg:*"))
    assert spent, "the budget's spend lives in Redis"
    store.delete(*spent)
    with pytest.raises(openai.RateLimitError) as caught:  # 28 spent (read back from PostgreSQL) + 12 > 39
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    assert caught.value.body["code"] == "budget_exceeded"
    assert client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1).usage.total_tokens == 7


@pytest.mark.parametrize(
    ("budget", "param"),
    [
        ({"period": "week"}, "budget.period"),
        ({"amount": "-1"}, "budget.amount"),
        ({"amount": "lots"}, "budget.amount"),
        ({"tokens": -5}, "budget.tokens"),
        ({"tokens": True}, "budget.tokens"),
        ({"currency": "EUR"}, "budget"),
    ],
)
def test_a_bad_budget_is_refused_naming_the_field(gateway_factory, upstream, budget, param):
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))
    gw.create_key("acme")
    for path in ("/tenants/acme", "/tenants/acme/keys/k1"):
        status, answer = gw.admin("PUT", path, {"budget": budget})
        assert status == 400 and answer["error"]["param"] == param, answer
    assert gw.admin("GET", "/tenants/acme")[1]["budget"] == {"period": "month", "amount": "0", "tokens": 0}
