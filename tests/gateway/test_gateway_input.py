"""What clients and upstreams send is checked before it can change metering: request fields, upstream usage,
names, oversized request lines. Every refusal is an OpenAI-shaped error. The synthetic upstream (fixture
`upstream`) coerces `stream` the way a lenient engine does (vLLM's request models stream on "yes", 1, "true")."""

import json
import socket

import pytest

from tests.gateway.gateway import deployment_objects
from tests.gateway.scripted_upstream import ScriptedUpstream
from lab.wait import wait_until

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"
MESSAGES = [{"role": "user", "content": "say four words"}]  # 6 prompt tokens


@pytest.fixture
def gw(gateway_factory, upstream):
    return gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url))


def post(gw, body, key, path="/v1/chat/completions"):
    """(status, content type, raw body) of a POST with a JSON (or raw bytes) body."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http_exchange(gw.replicas[0].port, "POST", path, data, {"Authorization": f"Bearer {key}"})


def http_exchange(port, method, target, body=b"", headers=None):
    """One HTTP/1.1 exchange on a raw socket: (status, content type, body). Any request line is possible."""
    head = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", f"Content-Length: {len(body)}",
            "Content-Type: application/json", *(f"{k}: {v}" for k, v in (headers or {}).items())]  # fmt: skip
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    header, _sep, payload = raw.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    fields = {k.lower(): v for k, v in fields.items()}
    if fields.get("transfer-encoding") == "chunked":
        payload = dechunk(payload)
    return int(lines[0].split()[1]), fields.get("content-type", ""), payload


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _sep, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if not size:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


def openai_error(status, content_type, body, expect_status, param=None, code=None):
    assert status == expect_status, (status, body[:300])
    assert content_type.startswith("application/json"), (content_type, body[:300])
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    if param is not None:
        assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error
    return error


@pytest.mark.parametrize("value", ["yes", 1, "true", "false", 0, {}])
def test_stream_must_be_a_boolean_or_the_request_is_refused_before_the_upstream(gw, upstream, value):
    key = gw.create_key("acme")
    before = upstream.generation_requests
    status, ctype, body = post(gw, {"model": MODEL, "messages": MESSAGES, "stream": value}, key)
    error = openai_error(status, ctype, body, 400, param="stream", code="invalid_type")
    assert "boolean" in error["message"]
    assert upstream.generation_requests == before, "a refused request must not reach the engine"
    assert gw.sql("SELECT count(*) FROM usage_records") == "0"


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage", "invalid_type"),
        ({"stream": True, "stream_options": {"include_usage": True, "x": 1}}, "stream_options.x", "unknown_parameter"),
        ({"stream": True, "stream_options": ["include_usage"]}, "stream_options", "invalid_type"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "invalid_value"),
        ({"max_tokens": "5"}, "max_tokens", "invalid_type"),
        ({"max_tokens": 5.0}, "max_tokens", "invalid_type"),
        ({"max_tokens": True}, "max_tokens", "invalid_type"),
        ({"max_tokens": 0}, "max_tokens", "integer_below_min_value"),
        ({"max_tokens": 2**31}, "max_tokens", "integer_above_max_value"),
        ({"max_completion_tokens": -1}, "max_completion_tokens", "integer_below_min_value"),
        ({"n": "2"}, "n", "invalid_type"),
        ({"n": 0}, "n", "integer_below_min_value"),
        ({"n": 129}, "n", "integer_above_max_value"),
    ],
)
def test_metering_fields_are_validated_as_openai_defines_them(gw, upstream, fields, param, code):
    key = gw.create_key("acme")
    before = upstream.generation_requests
    openai_error(*post(gw, {"model": MODEL, "messages": MESSAGES, **fields}, key), 400, param=param, code=code)
    assert upstream.generation_requests == before


def test_null_fields_mean_their_defaults_and_what_was_checked_is_what_is_sent(gw, upstream):
    key = gw.create_key("acme")
    body = {"model": MODEL, "messages": MESSAGES, "stream": None, "stream_options": None, "max_tokens": None, "n": None}
    status, _ctype, answer = post(gw, body, key)
    assert status == 200 and json.loads(answer)["usage"]["completion_tokens"] == 8
    sent = json.loads(upstream.received[-1][3])
    assert "stream" not in sent and "stream_options" not in sent and "n" not in sent and "max_tokens" not in sent
    # Duplicate keys: the gateway forwards the object it validated, not the raw bytes another parser may read
    # differently (first key wins in some, last in others).
    raw = b'{"model": "%s", "messages": %s, "stream": false, "stream": true, "max_tokens": 3}' % (
        MODEL.encode(),
        json.dumps(MESSAGES).encode(),
    )
    status, ctype, answer = post(gw, raw, key)
    assert status == 200 and ctype.startswith("text/event-stream")
    sent = json.loads(upstream.received[-1][3])
    assert sent["stream"] is True and sent["stream_options"]["include_usage"] is True
    wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "2", 10, "2 ledger rows")
    assert gw.sql("SELECT sum(completion_tokens) FROM usage_records") == "11"


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -5, "completion_tokens": -7, "total_tokens": -12},
        {"prompt_tokens": 6, "completion_tokens": 2**40, "total_tokens": 2**40 + 6},
        {"prompt_tokens": "6", "completion_tokens": 1.5, "total_tokens": 7},
    ],
)
def test_upstream_usage_is_checked_not_trusted(gateway_factory, usage):
    liar = ScriptedUpstream(usage=usage)
    honest = ScriptedUpstream()
    try:
        objects = deployment_objects("liar", "liar", liar.url()) + deployment_objects("ok", MODEL, honest.url())
        gw = gateway_factory(objects)
        key = gw.create_key("acme")
        # Not streamed: the gateway cannot meter the answer, so it does not hand it out.
        openai_error(*post(gw, {"model": "liar", "messages": MESSAGES}, key), 502, code="upstream_usage_invalid")
        # Streamed: the tokens are already out when the usage arrives; the row is estimated and flagged.
        status, _ctype, answer = post(gw, {"model": "liar", "messages": MESSAGES, "stream": True}, key)
        assert status == 200 and b'"code":"upstream_usage_invalid"' in answer.replace(b" ", b"")
        assert b"[DONE]" not in answer, "a stream whose metering failed must not look complete"
        status, _ctype, _answer = post(gw, {"model": MODEL, "messages": MESSAGES}, key)
        assert status == 200, "the process survives and other rows are unaffected"
        wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "3", 10, "3 ledger rows")
        rows = gw.sql(
            "SELECT deployment, status, prompt_tokens, completion_tokens, usage_estimated, cost >= 0, error"
            " FROM usage_records ORDER BY started_at"
        ).splitlines()
        assert rows[0] == "tf/liar|502|0|0|t|t|upstream_usage_invalid"
        assert rows[1] == "tf/liar|502|0|1|t|t|upstream_usage_invalid"
        assert rows[2] == "tf/ok|200|1|1|f|t|"
    finally:
        liar.close()
        honest.close()


def test_request_line_too_long_is_an_openai_error_without_the_path(gw):
    target = "/v1/models?secret-looking-" + "x" * 9000
    status, ctype, body = http_exchange(gw.replicas[0].port, "GET", target)
    openai_error(status, ctype, body, 414, code="request_line_too_long")
    assert b"secret-looking" not in body
    huge_header = {"X-Filler": "y" * 9000}
    status, ctype, body = http_exchange(gw.replicas[0].port, "GET", "/v1/models", headers=huge_header)
    openai_error(status, ctype, body, 431, code="request_header_too_large")
    assert b"yyyy" not in body
    openai_error(*http_exchange(gw.replicas[0].port, "PATCH", "/v1/models"), 405)
    openai_error(*http_exchange(gw.replicas[0].port, "BREW", "/v1/models"), 400, code="invalid_http_request")


@pytest.mark.parametrize("suffix", ["%0A", "%0D%0A", "%00"])
def test_names_are_matched_whole(gw, suffix):
    status, body = gw.admin("PUT", f"/tenants/acme{suffix}", {})
    assert status == 400 and body["error"]["param"] == "name", body
    assert gw.admin("PUT", "/tenants/acme", {})[0] == 200
    status, body = gw.admin("PUT", f"/tenants/acme/keys/k1{suffix}", {})
    assert status == 400 and body["error"]["param"] == "name", body
    assert gw.sql("SELECT count(*) FROM tenants") == "1" and gw.sql("SELECT count(*) FROM api_keys") == "0"
