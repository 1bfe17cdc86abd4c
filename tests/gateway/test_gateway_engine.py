"""The gateway in front of the real CPU vLLM engine serving the tiny local model (marker engine)."""

import json
import os
import signal
import urllib.error
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lab.engine.vllm import VllmServer
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


def test_a_non_boolean_stream_never_reaches_vllm(gateway_factory, vllm_engine):
    """vLLM's request model coerces "yes" / 1 / "true" to a stream; before the gateway checked the field, such a
    request streamed tokens that the ledger recorded as 0 (usage was not forced upstream)."""
    gw = gateway_factory(deployment_objects("tiny", MODEL, vllm_engine.base_url, tenants=["acme"]))
    key = gw.create_key("acme")
    before = engine_tokens(vllm_engine)
    for value in ("yes", 1, "true"):
        body = json.dumps({"model": MODEL, "messages": MESSAGES, "max_tokens": 8, "stream": value}).encode()
        request = urllib.request.Request(gw.url + "/v1/chat/completions", data=body, method="POST",
                                         headers={"Authorization": f"Bearer {key}",
                                                  "Content-Type": "application/json"})  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        error = json.loads(refused.value.read())["error"]
        assert refused.value.code == 400 and (error["param"], error["code"]) == ("stream", "invalid_type")
    assert engine_tokens(vllm_engine) == before, "vLLM generated nothing for the refused requests"
    # The same request with a real boolean streams, with vLLM's running usage forced and stripped for this client.
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8, stream=True))
    assert all(c.usage is None for c in chunks)
    wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "1", 60, "1 ledger row")
    after = engine_tokens(vllm_engine)
    assert gw.sql("SELECT prompt_tokens, completion_tokens FROM usage_records") == (
        f"{after[0] - before[0]}|{after[1] - before[1]}"
    )


STREAM_TOKENS = 1900


def test_vllm_killed_mid_stream_is_an_error_and_metered_with_its_prompt(gateway_factory, tiny_model_dir):
    """Its own engine (this test kills it): vLLM's running usage says what the cut stream served."""
    # The tiny model's whole context (2048 positions, the lab default is 512): a stream long enough to be still
    # running when the engine is killed after the first token, on a loaded 2-core machine too.
    with VllmServer(model_dir=tiny_model_dir, extra_args=["--max-model-len", "2048"]) as engine:
        gw = gateway_factory(deployment_objects("tiny", MODEL, engine.base_url, tenants=["acme"]))
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
        prompt = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1).usage.prompt_tokens
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=MESSAGES, max_tokens=STREAM_TOKENS, stream=True, extra_body={"ignore_eos": True}
        )  # vLLM's ignore_eos: the stream is still running when the engine is killed
        received = 0
        with pytest.raises(openai.APIError) as failed:
            for chunk in raw.parse():
                received += bool(chunk.choices and chunk.choices[0].delta.content)
                if received == 1:
                    os.killpg(engine.pgid, signal.SIGKILL)  # the engine crashes mid-stream
        query = "SELECT status, error, prompt_tokens, completion_tokens FROM usage_records WHERE request_id = '{}'"
        rid = raw.headers["x-request-id"]
        row = wait_until(lambda: gw.sql(query.format(rid)), 30, "the cut stream's row")
        status, error, prompt_tokens, completion = row.split("|")
        assert (status, error, int(prompt_tokens)) == ("502", "upstream_stream_truncated", prompt)
        assert received <= int(completion) < STREAM_TOKENS
        assert "model server closed the stream" in failed.value.message
