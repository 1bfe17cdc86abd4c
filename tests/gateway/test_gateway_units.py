"""Pure logic of the gateway (no processes): SSE filtering, prices, routing objects, settings."""

import asyncio
import datetime
import hashlib
import hmac
import json
import uuid
from decimal import Decimal

import pytest

from tokenfactory_gateway import config
from tokenfactory_gateway.keys import bearer_token, generate_key, hash_key
from tokenfactory_gateway.metering import MeterWriter, UsageRecord
from tokenfactory_gateway.metrics import Metrics
from tokenfactory_gateway.routing import Price, RoutingTable, deployments_from_objects
from tokenfactory_gateway.sse import SseFilter

from .chaos import Served, acceptable_refusal, audit
from .gateway import deployment_objects


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


ROLE = event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
TOKEN = event({"choices": [{"index": 0, "delta": {"content": " a"}}]})
USAGE = event({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})
DONE = b"data: [DONE]\n\n"


def running(completion, content=" a"):
    """A content chunk with vLLM's running usage (continuous_usage_stats)."""
    usage = {"prompt_tokens": 5, "total_tokens": 5 + completion, "completion_tokens": completion}
    return event({"choices": [{"index": 0, "delta": {"content": content}}], "usage": usage})


def relay(stream: bytes, keep: str) -> tuple[bytes, SseFilter]:
    # fed in awkward 7-byte pieces: events split across reads must come out whole
    sse = SseFilter(keep)
    out = b"".join(sse.feed(stream[i : i + 7]) for i in range(0, len(stream), 7)) + sse.finish()
    return out, sse


@pytest.mark.parametrize(
    ("keep", "expected"), [("none", ROLE + TOKEN + TOKEN), ("final", ROLE + TOKEN + TOKEN + USAGE)]
)
def test_sse_filter_finds_usage_strips_it_unless_asked_and_holds_back_done(keep, expected):
    out, sse = relay(ROLE + TOKEN + TOKEN + USAGE + DONE, keep)
    assert out == expected, "[DONE] is the relay's to send, once the row is journaled"
    assert sse.done and sse.usage == (5, 2) and not sse.usage_invalid
    assert sse.content_events == 2, "the role preamble is not a token"


def test_running_usage_is_read_from_every_chunk_and_removed_unless_asked():
    stream = running(1) + running(2, " b") + USAGE + DONE
    out, sse = relay(stream, "final")

    def compact(content):  # a chunk whose usage was removed is re-encoded
        return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]},
                                      separators=(",", ":")).encode() + b"\n\n"  # fmt: skip

    assert out == compact(" a") + compact(" b") + USAGE
    assert sse.usage == (5, 2)
    cut, sse = relay(running(1) + running(2), "none")  # the engine died here: no usage chunk, no [DONE]
    assert sse.usage == (5, 2) and not sse.done, "a cut stream still knows what it served"
    assert b"usage" not in cut
    assert relay(stream, "all")[0] == running(1) + running(2, " b") + USAGE


def test_sse_filter_removes_usage_from_a_chunk_that_also_has_choices():
    both = event({"choices": [{"index": 0, "delta": {"content": "x"}}], "usage": {"prompt_tokens": 1,
                  "completion_tokens": 1}})  # fmt: skip
    sse = SseFilter("none")
    out = sse.feed(both)
    assert json.loads(out[len("data: ") :]) == {"choices": [{"index": 0, "delta": {"content": "x"}}]}
    assert sse.usage == (1, 1)


@pytest.mark.parametrize(
    "usage",
    [{"prompt_tokens": -1, "completion_tokens": 2}, {"prompt_tokens": 1, "completion_tokens": 10**9},
     {"prompt_tokens": True, "completion_tokens": 2}, {"prompt_tokens": 1.0, "completion_tokens": 2},
     {"prompt_tokens": "1", "completion_tokens": 2}, {"completion_tokens": 2}],
)  # fmt: skip
def test_usage_that_is_not_a_plausible_count_is_flagged_not_taken(usage):
    sse = SseFilter("final")
    sse.feed(TOKEN + event({"choices": [], "usage": usage}) + DONE)
    assert sse.usage is None and sse.usage_invalid


def test_sse_filter_records_an_error_event_and_keeps_it():
    err = event({"error": {"message": "boom", "type": "InternalServerError", "code": 500}})
    sse = SseFilter("none")
    assert sse.feed(TOKEN + err + DONE) == TOKEN + err
    assert sse.error == "boom" and sse.done


@pytest.mark.parametrize(
    ("payload", "interesting"),
    [
        (b'data: {"usage":{"prompt_tokens":1,"completion_tokens":0}}', True),
        (b'data: {"usage": {"prompt_tokens":1,"completion_tokens":0}}', True),
        (b'data: {"error":{"message":"x"}}', True),
        (b'data: {"error" : "x"}', True),
        (b'data: {"choices":[],"usage":null}', False),
        (b'data: {"choices":[{"delta":{"content":"say \\"usage\\": {"}}]}', False),
    ],
)
def test_sse_filter_parses_only_events_with_usage_or_error(payload, interesting):
    sse = SseFilter("none")
    sse.feed(TOKEN)  # past the preamble: the fast path is on
    out = sse.feed(payload + b"\n\n")
    assert (sse.usage is not None or sse.error is not None) is interesting
    if not interesting:
        assert out == payload + b"\n\n"


def test_price_is_exact_decimal_per_million():
    price = Price.from_spec({"currency": "EUR", "inputPer1M": "0.15", "outputPer1M": "0.60"}, "x")
    assert price.cost(1_000_001, 3) == Decimal("0.15000015") + Decimal("0.0000018")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"pricing": {"inputPer1M": "cheap"}}, "spec.pricing.inputPer1M must be a decimal"),
        ({"pricing": {"outputPer1M": "-1"}}, "spec.pricing.outputPer1M must be a non-negative"),
        ({"rateLimits": {"perKey": {"requestsPerMinute": "10"}}}, "spec.rateLimits.perKey.requestsPerMinute"),
    ],
)
def test_bad_deployment_fields_are_named(spec, message):
    objects = deployment_objects("d", "m", "http://u:8000")
    objects[1]["spec"].update(spec)
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        deployments_from_objects(objects)


def test_routing_uses_status_model_name_endpoint_filter_and_skips_unready():
    objects = deployment_objects("a", "model-a", "http://a:8000/v1/", tenants=["t1"])
    objects += deployment_objects("b", "model-b", "http://b:8000")
    objects[3]["spec"]["endpoint"] = "other"
    failed = deployment_objects("c", "model-c", "http://c:8000")
    failed[1]["status"]["phase"] = "Failed"
    deps = deployments_from_objects(objects + failed, endpoint="main")
    assert [(d.name, d.model, d.upstream) for d in deps] == [("tf/a", "model-a", "http://a:8000")]
    table = RoutingTable(deps)
    assert table.resolve("model-a", "t1", frozenset()) is deps[0]
    assert table.resolve("model-a", "t2", frozenset()) is None
    assert table.resolve("model-a", "t2", frozenset({"model-a"})) is deps[0], "an admin grant shares it too"
    assert table.models_for("t2", frozenset()) == []


def test_keys_are_long_random_and_hashed_with_the_pepper():
    key, prefix = generate_key()
    assert key.startswith("tfk-") and len(key) > 40 and key.startswith(prefix)
    assert generate_key()[0] != key
    assert hash_key(b"p1", key) != hash_key(b"p2", key)
    # stored hashes are HMAC-SHA256(pepper, key): a faster implementation must give the same bytes
    assert hash_key(b"p1", key) == hmac.new(b"p1", key.encode(), hashlib.sha256).digest()
    assert bearer_token(f"Bearer {key}") == key and bearer_token("Basic x") is None and bearer_token(None) is None


def test_settings_name_the_bad_field(tmp_path):
    env = {"TF_GATEWAY_ADMIN_TOKEN": "a" * 20, "TF_GATEWAY_KEY_PEPPER": "p" * 20, "TF_GATEWAY_DATABASE_URL": "pg://"}
    file = tmp_path / "gw.yaml"
    file.write_text("routing_source: static\nrouting_file: /r.yaml\nlisten: '127.0.0.1:9000'\n")
    cfg = config.load(str(file), env)
    assert (cfg.host, cfg.port, cfg.admin_token) == ("127.0.0.1", 9000, "a" * 20)
    file.write_text("routing_source: etcd\n")
    with pytest.raises(ValueError, match="routing_source must be one of"):
        config.load(str(file), env)
    file.write_text("routing_file: /r.yaml\nport: eighty\n")
    with pytest.raises(ValueError, match="'port'"):
        config.load(str(file), env)
    file.write_text("routing_file: /r.yaml\nbogus: 1\n")
    with pytest.raises(ValueError, match="unknown gateway setting"):
        config.load(str(file), env)
    secret = tmp_path / "pepper"
    secret.write_text("q" * 32 + "\n")
    file.write_text("routing_file: /r.yaml\n")
    cfg = config.load(str(file), {**env, "TF_GATEWAY_KEY_PEPPER": "", "TF_GATEWAY_KEY_PEPPER_FILE": str(secret)})
    assert cfg.key_pepper == "q" * 32


class FlakyPool:
    """Stands in for asyncpg's pool in a unit test of the writer: fails the first `failures` inserts."""

    def __init__(self, failures, error):
        self.failures, self.error, self.rows = failures, error, []

    async def executemany(self, _sql, rows, timeout=None):
        if self.failures:
            self.failures -= 1
            raise self.error
        self.rows += rows


@pytest.mark.parametrize("error", [TimeoutError(), RuntimeError("a bug"), OSError("refused")])
def test_a_failed_insert_of_any_kind_leaves_its_rows_journaled_and_they_are_replayed(tmp_path, error):
    def row(i):
        now = datetime.datetime.now(datetime.UTC)
        return UsageRecord(uuid.uuid4(), now, now, "t", uuid.uuid4(), "m", "d", "/v1/completions", False, 200, None,
                           False, False, i, i, 1.0, None, "USD", Decimal(0), Decimal(0), Decimal(0))  # fmt: skip

    async def scenario():
        pool = FlakyPool(1, error)
        writer = MeterWriter(pool, str(tmp_path), 100, 0.0, Metrics(), timeout=1.0, fsync_seconds=0)
        writer.journal.start()
        for i in range(3):
            writer.record(row(i))
        await writer._flush()  # fails: nothing in PostgreSQL, the segment stays on disk
        assert pool.rows == [] and len(list(tmp_path.glob("*.journal"))) == 2
        await writer.recover()  # replayed from disk
        assert sorted(r[13] for r in pool.rows) == [0, 1, 2]
        writer.journal.close(clean=True)
        assert list(tmp_path.iterdir()) == [], "a clean close leaves nothing to replay"

    asyncio.run(scenario())


# Chunks exactly as vLLM 0.32 (CPU) sends them with stream_options {include_usage, continuous_usage_stats}.
VLLM_ID = (
    b'{"id":"chatcmpl-b20e754afc3187d0","object":"chat.completion.chunk","created":1796419546,"model":"tiny-qwen2",'
)
VLLM_ROLE = VLLM_ID + (
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
    b'"usage":{"prompt_tokens":19,"total_tokens":19,"completion_tokens":0,"completion_tokens_details":null},'
    b'"prompt_token_ids":null,"prompt_text":null}'
)
VLLM_TOKEN = VLLM_ID + (
    b'"choices":[{"index":0,"delta":{"content":"\\n"},"logprobs":null,"finish_reason":null,"token_ids":null}],'
    b'"usage":{"prompt_tokens":19,"total_tokens":%d,"completion_tokens":%d,"completion_tokens_details":null}}'
)
VLLM_FINAL = VLLM_ID + (
    b'"choices":[],"usage":{"prompt_tokens":19,"total_tokens":22,"completion_tokens":3},'
    b'"system_fingerprint":"vllm-0.32.0-a92570ad"}'
)


def vllm_event(data: bytes) -> bytes:
    return b"data: " + data + b"\n\n"


def test_vllm_running_usage_is_cut_out_of_the_bytes():
    tokens = [VLLM_TOKEN % (19 + i, i) for i in (1, 2, 3)]
    stream = b"".join(vllm_event(d) for d in (VLLM_ROLE, *tokens, VLLM_FINAL)) + DONE
    out, sse = relay(stream, "none")
    cut = [vllm_event(d[: d.index(b',"usage":{')] + b"}") for d in tokens]  # every other byte as vLLM sent it
    role = json.loads(VLLM_ROLE)
    del role["usage"]
    assert out == b"data: " + json.dumps(role, separators=(",", ":")).encode() + b"\n\n" + b"".join(cut)
    assert sse.usage == (19, 3) and sse.content_events == 3 and sse.done
    out, sse = relay(stream, "final")
    assert out.endswith(vllm_event(VLLM_FINAL)), "the usage chunk the client asked for stays as sent"
    assert relay(stream, "all")[0] == stream[: -len(DONE)]
    cut_short, sse = relay(b"".join(vllm_event(d) for d in (VLLM_ROLE, *tokens[:2])), "none")
    assert sse.usage == (19, 2) and not sse.done and b"usage" not in cut_short


def test_fault_audit_fails_a_500_however_well_shaped():
    shaped_500 = {"error": {"message": "Internal gateway error.", "type": "api_error", "param": None,
                            "code": "internal_error"}}  # fmt: skip
    shaped_503 = {"error": {**shaped_500["error"], "code": "database_unavailable"}}
    assert not acceptable_refusal(500, shaped_500)
    assert not acceptable_refusal(503, shaped_500)  # the gateway's internal_error under any status
    assert not acceptable_refusal(503, {"detail": "x"})
    assert acceptable_refusal(503, shaped_503) and acceptable_refusal(429, shaped_503)
    served = [Served("p", False, "refused", "a", 500, "internal_error"), Served("p", False, "refused", "b", 503,
              "database_unavailable"), Served("p", True, "stream_error", "c", 200, "internal_error")]  # fmt: skip
    figures = audit(served, {}, {})
    assert figures["refusals_with_disallowed_status"] == 2
    assert figures["refusals_not_openai_shaped"] == 0
