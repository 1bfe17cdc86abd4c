"""Gateway behaviour through the official openai SDK: routing, streaming, keys, isolation, errors.

Upstream: the deterministic synthetic engine (tests/engine/synthetic.py); PostgreSQL and Redis are
real processes (lab/datastores.py).
"""

import http.server
import json
import socket
import threading
import time
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.engine.synthetic import SyntheticUpstream, completion_text
from tests.gateway.gateway import deployment_objects
from tests.gateway.gateway import Gateway
from lab.datastores import RedisServer
from lab.wait import wait_until

pytestmark = pytest.mark.gateway
MODEL, OTHER = "tiny-qwen2", "secret-model"
MESSAGES = [{"role": "user", "content": "say four words"}]  # 3 words + 3 template tokens = 6 prompt tokens


@pytest.fixture
def gw(gateway_factory, upstream):
    objects = deployment_objects("tiny", MODEL, upstream.base_url, tenants=["acme"]) + deployment_objects(
        "hidden", OTHER, upstream.base_url, tenants=["globex"]
    )
    return gateway_factory(objects, max_body_bytes=65536)


def client(gw, key, replica=0, **kw):
    return openai.OpenAI(base_url=gw.replicas[replica].url + "/v1", api_key=key, max_retries=0, **kw)


def wait_ledger(gw, count):
    wait_until(lambda: int(gw.sql("SELECT count(*) FROM usage_records")) >= count, 10, f"{count} ledger rows")


def raw_post(url, body: bytes, key, content_type="application/json"):
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("Authorization", f"Bearer {key}")
    req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_non_streamed_chat_and_completion_are_metered_with_price(gw, upstream):
    key = gw.create_key("acme")
    c = client(gw, key)
    chat = c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
    assert chat.choices[0].message.content == completion_text(4)
    assert (chat.usage.prompt_tokens, chat.usage.completion_tokens) == (6, 4)
    text = c.completions.create(model=MODEL, prompt="one two three", max_tokens=5)
    assert text.choices[0].text == completion_text(5)
    assert (text.usage.prompt_tokens, text.usage.completion_tokens) == (3, 5)
    wait_ledger(gw, 2)
    rows = gw.sql(
        "SELECT route, prompt_tokens, completion_tokens, cost, currency, input_per_1m, output_per_1m, status, tenant,"
        " deployment FROM usage_records ORDER BY started_at"
    ).splitlines()
    # cost = 6 * 0.15 / 1e6 + 4 * 0.60 / 1e6 and 3 * 0.15 / 1e6 + 5 * 0.60 / 1e6, exact decimals
    assert rows == [
        "/v1/chat/completions|6|4|0.0000033|USD|0.15|0.60|200|acme|tf/tiny",
        "/v1/completions|3|5|0.00000345|USD|0.15|0.60|200|acme|tf/tiny",
    ]


def test_stream_usage_is_forced_upstream_and_stripped_unless_asked(gw, upstream):
    key = gw.create_key("acme")
    c = client(gw, key)
    chunks = list(c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5, stream=True))
    assert all(ch.usage is None for ch in chunks)
    assert all(ch.choices for ch in chunks), "the usage-only chunk must not reach a client that did not ask"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == completion_text(5)
    sent = json.loads(upstream.received[-1][3])
    # usage always comes back, on every chunk from a vLLM engine: a stream cut short is still metered
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    asked = list(
        c.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=5, stream=True, stream_options={"include_usage": True}
        )
    )
    assert asked[-1].choices == [] and asked[-1].usage.completion_tokens == 5
    wait_ledger(gw, 2)
    assert gw.sql("SELECT sum(completion_tokens), bool_and(stream), count(ttft_ms) FROM usage_records") == "10|t|2"


def test_running_usage_is_asked_only_of_engines_that_declare_it(gateway_factory, upstream):
    """The capability comes from the engine plugin (engines/nim.py: RUNNING_USAGE = False) through domain.json."""
    with SyntheticUpstream(model=OTHER, output_tokens=8) as nim_upstream:
        objects = deployment_objects("tiny", MODEL, upstream.base_url, engine="vllm") + deployment_objects(
            "nim", OTHER, nim_upstream.base_url, engine="nim"
        )
        gw = gateway_factory(objects)
        c = client(gw, gw.create_key("acme"))
        sent = {}
        for model, engine in ((MODEL, upstream), (OTHER, nim_upstream)):
            chunks = list(c.chat.completions.create(model=model, messages=MESSAGES, max_tokens=3, stream=True))
            assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == completion_text(3)
            sent[model] = json.loads(engine.received[-1][3])["stream_options"]
    assert sent == {
        MODEL: {"include_usage": True, "continuous_usage_stats": True},
        OTHER: {"include_usage": True},  # the final usage chunk alone still meters the stream
    }
    wait_ledger(gw, 2)
    assert gw.sql("SELECT deployment, completion_tokens FROM usage_records ORDER BY deployment").splitlines() == [
        "tf/nim|3",
        "tf/tiny|3",
    ]


def test_models_are_filtered_and_unshared_is_indistinguishable_from_missing(gw):
    acme = client(gw, gw.create_key("acme"))
    assert [m.id for m in acme.models.list()] == [MODEL]
    answers = {}
    for name in (OTHER, "no-such-model"):
        with pytest.raises(openai.NotFoundError) as caught:
            acme.chat.completions.create(model=name, messages=MESSAGES)
        body = caught.value.body
        answers[name] = (caught.value.status_code, json.dumps(body).replace(name, "X"))
        with pytest.raises(openai.NotFoundError):
            acme.models.retrieve(name)
    assert answers[OTHER] == answers["no-such-model"]
    globex = client(gw, gw.create_key("globex"))
    assert [m.id for m in globex.models.list()] == [OTHER]
    with pytest.raises(openai.NotFoundError):
        globex.chat.completions.create(model=MODEL, messages=MESSAGES)


def test_admin_sharing_grants_a_model_to_another_tenant(gw):
    globex = client(gw, gw.create_key("globex"))
    with pytest.raises(openai.NotFoundError):
        globex.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    assert gw.admin("PUT", "/tenants/globex", {"models": [OTHER, MODEL]})[0] == 200
    assert globex.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1).usage.completion_tokens == 1
    assert gw.admin("PUT", "/tenants/globex", {"models": []})[0] == 200
    with pytest.raises(openai.NotFoundError):
        globex.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)


def test_keys_are_shown_once_stored_hashed_and_revoked_at_once_on_every_replica(gw):
    gw.add_replica()
    key = gw.create_key("acme", name="ci")
    for replica in (0, 1):  # warm both replicas' key caches
        client(gw, key, replica).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    status, listing = gw.admin("GET", "/tenants/acme/keys")
    assert status == 200 and key not in json.dumps(listing)
    assert listing["data"][0]["prefix"] == key[:10]
    again = gw.admin("PUT", "/tenants/acme/keys/ci", {})
    assert again[0] == 200 and "key" not in again[1] and again[1]["changed"] is False
    assert key not in gw.sql("SELECT string_agg(encode(hash, 'escape') || prefix || name, ',') FROM api_keys")
    assert gw.admin("DELETE", "/tenants/acme/keys/ci", replica=0)[0] == 200
    with pytest.raises(openai.AuthenticationError):
        client(gw, key, 1).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    with pytest.raises(openai.AuthenticationError):
        client(gw, key, 0).models.list()


def test_bad_input_gets_openai_style_errors_and_the_process_survives(gw):
    key = gw.create_key("acme")
    url = gw.url + "/v1/chat/completions"
    assert raw_post(url, b"{not json", key)[0] == 400
    status, body = raw_post(url, b"[1, 2]", key)
    assert status == 400 and body["error"]["code"] == "invalid_json"
    status, body = raw_post(url, json.dumps({"messages": MESSAGES}).encode(), key)
    assert status == 400 and body["error"]["param"] == "model"
    status, body = raw_post(url, json.dumps({"model": MODEL, "messages": MESSAGES, "x": "y" * 70000}).encode(), key)
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert raw_post(url, b"{}", "tfk-wrong")[0] == 401
    assert raw_post(url, b"{}", gw.admin_token)[0] == 401, "the admin credential is not a user key"
    assert gw.admin("GET", "/tenants", token=key)[0] == 401, "a user key is not the admin credential"
    status, body = raw_post(gw.url + "/v1/nothing", b"{}", key)
    assert status == 404 and "error" in body
    assert client(gw, key).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1).choices


def test_upstream_down_and_timeout_answer_502_and_504(gateway_factory):
    with socket.socket() as closed, SyntheticUpstream(model="slow", ttft_ms=3000) as slow:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused, the port stays ours
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
        objects = deployment_objects("dead", "dead", dead) + deployment_objects("slow", "slow", slow.base_url)
        gw = gateway_factory(objects, upstream_read_timeout=0.5)
        c = client(gw, gw.create_key("acme"))
        with pytest.raises(openai.APIStatusError) as down:
            c.chat.completions.create(model="dead", messages=MESSAGES)
        assert down.value.status_code == 502 and down.value.body["code"] == "upstream_unavailable"
        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as late:
            c.chat.completions.create(model="slow", messages=MESSAGES)
        assert late.value.status_code == 504 and time.monotonic() - started < 2.5
        wait_ledger(gw, 2)
        assert gw.sql("SELECT string_agg(status::text, ',' ORDER BY status) FROM usage_records") == "502,504"
        assert gw.replicas[0].request("GET", "/health")[0] == 200


def test_error_inside_a_200_stream_is_passed_through_and_recorded(gateway_factory):
    with SyntheticUpstream(model=MODEL, error_after_chunks=2) as bad:
        gw = gateway_factory(deployment_objects("tiny", MODEL, bad.base_url))
        c = client(gw, gw.create_key("acme"))
        with pytest.raises(openai.APIError):
            list(c.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True))
        wait_ledger(gw, 1)
        assert gw.sql("SELECT error FROM usage_records") == "Internal server error"


class CookieSettingUpstream(http.server.ThreadingHTTPServer):
    """An upstream that sets a cookie on every answer and records the Cookie header of each request."""

    def __init__(self):
        self.cookies_seen: list[str | None] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                outer.cookies_seen.append(self.headers.get("Cookie"))
                self.rfile.read(int(self.headers["Content-Length"]))
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                body = json.dumps({"id": "x", "object": "chat.completion", "choices": [], "usage": usage}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Set-Cookie", f"session=tenant-secret-{len(outer.cookies_seen)}; Path=/")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_upstream_cookies_are_never_replayed_to_other_requests(gateway_factory):
    upstream = CookieSettingUpstream()
    try:
        url = f"http://localhost:{upstream.server_address[1]}"  # a host name: cookie jars ignore IP addresses
        gw = gateway_factory(deployment_objects("tiny", MODEL, url, tenants=["acme", "globex"]))
        for tenant in ("acme", "globex", "acme"):
            client(gw, gw.create_key(tenant, name=f"k-{len(upstream.cookies_seen)}")).chat.completions.create(
                model=MODEL, messages=MESSAGES
            )
        assert upstream.cookies_seen == [None, None, None], "an upstream cookie was sent on a later request"
    finally:
        upstream.shutdown()
        upstream.server_close()


def test_usage_api_per_key_view_and_admin_view_are_isolated(gw):
    acme = gw.create_key("acme", name="a1")
    acme2 = gw.create_key("acme", name="a2")
    globex = gw.create_key("globex", name="g1")
    client(gw, acme).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    client(gw, acme2).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
    wait_ledger(gw, 2)
    own = gw.replicas[0].request("GET", "/v1/usage?group_by=model", token=acme)[1]
    assert own["data"] == [
        {"model": MODEL, "currency": "USD", "requests": 1, "errors": 0, "prompt_tokens": 6, "completion_tokens": 3,
         "cost": "0.0000027"}
    ]  # fmt: skip
    assert gw.replicas[0].request("GET", "/v1/usage?tenant=acme", token=globex)[1]["data"] == []
    assert gw.replicas[0].request("GET", "/v1/usage?group_by=tenant", token=globex)[0] == 400
    status, per_key = gw.admin("GET", "/usage?tenant=acme&group_by=tenant,key&bucket=day")
    assert status == 200
    rows = [(r["key_name"], r["completion_tokens"]) for r in per_key["data"]]
    assert rows == [("a1", 3), ("a2", 2)], per_key
    assert per_key["totals"] == [
        {"currency": "USD", "requests": 2, "errors": 0, "prompt_tokens": 12, "completion_tokens": 5,
         "cost": "0.0000048"}
    ]  # fmt: skip
    assert gw.admin("GET", "/usage?start=2020-01-01T00:00:00Z&end=2020-01-02T00:00:00Z")[1]["data"] == []


def metric_value(metrics: str, name: str, **labels):
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == name and sample.labels == {"model": MODEL, "tenant": "acme", **labels}:
                return sample.value
    return None


def test_metrics_and_access_logs_carry_no_secrets(gw):
    key = gw.create_key("acme")
    c = client(gw, key)
    c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
    list(c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3, stream=True))
    with urllib.request.urlopen(gw.admin_url + "/metrics") as resp:
        metrics = resp.read().decode()

    assert metric_value(metrics, "tf_gateway_requests_total", status="200") == 2
    assert metric_value(metrics, "tf_gateway_tokens_total", kind="completion") == 5
    assert metric_value(metrics, "tf_gateway_cost_total", currency="USD") > 0
    assert metric_value(metrics, "tf_gateway_time_to_first_token_seconds_count") == 1
    itl = metric_value(metrics, "tf_gateway_inter_token_latency_seconds_count")
    assert itl == 2, metrics
    logs = gw.logs()
    access = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert any(e.get("path") == "/v1/chat/completions" and e.get("completion_tokens") == 3 for e in access)
    for secret in (key, key[len("tfk-") :], gw.admin_token, gw.pepper):
        assert secret not in logs and secret not in metrics


def test_routing_changes_apply_without_restart(gw, upstream):
    c = client(gw, gw.create_key("acme"))
    assert [m.id for m in c.models.list()] == [MODEL]
    eur = {"currency": "EUR", "inputPer1M": "1", "outputPer1M": "2"}
    objects = deployment_objects("tiny", MODEL, upstream.base_url, tenants=["acme"], pricing=eur)
    gw.set_routing(objects + deployment_objects("new", "new-model", upstream.base_url, tenants=["acme"]))
    wait_until(lambda: "new-model" in [m.id for m in c.models.list()], 10, "routing refresh")
    c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
    wait_ledger(gw, 1)
    assert gw.sql("SELECT currency, cost FROM usage_records") == "EUR|0.000014"


def test_redis_outage_fails_closed_and_recovers(postgres_server, upstream):
    redis = RedisServer().start()
    gw = Gateway(postgres_server, redis, deployment_objects("tiny", MODEL, upstream.base_url, tenants=["acme"]))
    try:
        gw.add_replica()
        c = client(gw, gw.create_key("acme"))
        assert c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1).choices
        redis.halt()  # no way to learn about revocations now: refuse rather than trust the cache

        def refused():
            try:
                c.models.list()
            except openai.APIStatusError as err:
                return err.status_code == 503 and err.body["code"] == "redis_unavailable"
            return False

        wait_until(refused, 10, "503 while Redis is down")
        redis.start()
        wait_until(
            lambda: c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1).choices, 15, "recovery"
        )
    finally:
        gw.stop()
        redis.stop()
