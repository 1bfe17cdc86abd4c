"""The gateway in front of the real CPU vLLM engine serving the tiny local model (marker engine)."""

import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.gateway import deployment_objects
from lab.wait import wait_until

pytestmark = [pytest.mark.gateway, pytest.mark.engine]
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "Tell me about the sea."}]


def engine_tokens(engine) -> tuple[int, int]:
    """vLLM's own prompt and generation token counters."""
    with urllib.request.urlopen(engine.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    totals = {"vllm:prompt_tokens_total": 0.0, "vllm:generation_tokens_total": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in totals:
                totals[sample.name] += sample.value
    return int(totals["vllm:prompt_tokens_total"]), int(totals["vllm:generation_tokens_total"])


def test_gateway_meters_exactly_what_vllm_generated(gateway_factory, vllm_engine):
    gw = gateway_factory(deployment_objects("tiny", MODEL, vllm_engine.base_url, tenants=["acme"]))
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
    before = engine_tokens(vllm_engine)
    reply = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12)
    assert reply.usage.completion_tokens == 12
    chunks = list(client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10, stream=True))
    assert all(c.usage is None for c in chunks), "usage chunk stripped for a client that did not ask"
    asked = list(client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8, stream=True,
                                                stream_options={"include_usage": True}))  # fmt: skip
    assert asked[-1].usage.completion_tokens == 8
    text = client.completions.create(model=MODEL, prompt="The sea is", max_tokens=6)
    assert text.usage.completion_tokens == 6
    abandoned = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=64, stream=True)
    next(iter(abandoned))
    abandoned.close()
    wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "5", 60, "5 ledger rows")
    after = engine_tokens(vllm_engine)
    ledger = gw.sql("SELECT sum(prompt_tokens), sum(completion_tokens) FROM usage_records")
    assert ledger == f"{after[0] - before[0]}|{after[1] - before[1]}"
    assert gw.sql("SELECT count(*) FROM usage_records WHERE usage_estimated OR status <> 200") == "0"
