"""Every route during a datastore outage: PostgreSQL stopped or frozen (SIGSTOP), Redis
stopped. Each answer is a success or an OpenAI-shaped error with a status a client can act on (4xx, 502, 503,
504); never a 500 `internal_error`, never a hang."""

import contextlib
import json
import time
import urllib.error
import urllib.request

import pytest

from tests.gateway.chaos import acceptable_refusal
from tests.gateway.gateway import Gateway, deployment_objects
from lab.datastores import PostgresServer, RedisServer
from lab.wait import wait_until

pytestmark = [pytest.mark.gateway, pytest.mark.slow]
MODEL = "tiny-qwen2"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "say four words"}], "max_tokens": 3}
DATABASE_TIMEOUT = 1.0
REDIS_TIMEOUT = 1.0


def call(base, method, path, token, body=None, timeout=20.0):
    """(status, decoded body or the raw text) of one HTTP call."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Authorization": f"Bearer {token}"})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def requests(gw, cached_key, new_key):
    """(label, base URL, method, path, token, body) for every route; `cached_key` was used before the outage
    (in the replica's key cache), `new_key` never (its look-up needs PostgreSQL)."""
    public, internal, admin = gw.url, gw.admin_url, gw.admin_token
    return [
        ("GET /v1/models (cached key)", public, "GET", "/v1/models", cached_key, None),
        ("GET /v1/models (new key)", public, "GET", "/v1/models", new_key, None),
        ("GET /v1/models/{model}", public, "GET", f"/v1/models/{MODEL}", cached_key, None),
        ("GET /v1/usage", public, "GET", "/v1/usage", cached_key, None),
        ("POST /v1/chat/completions (cached key)", public, "POST", "/v1/chat/completions", cached_key, CHAT),
        ("POST /v1/chat/completions (new key)", public, "POST", "/v1/chat/completions", new_key, CHAT),
        ("POST /v1/completions", public, "POST", "/v1/completions", cached_key,
         {"model": MODEL, "prompt": "the sea is", "max_tokens": 3}),
        ("GET /admin/v1/tenants", internal, "GET", "/admin/v1/tenants", admin, None),
        ("GET /admin/v1/tenants/acme", internal, "GET", "/admin/v1/tenants/acme", admin, None),
        ("GET /admin/v1/tenants/acme/keys", internal, "GET", "/admin/v1/tenants/acme/keys", admin, None),
        ("GET /admin/v1/usage", internal, "GET", "/admin/v1/usage?group_by=tenant", admin, None),
        ("GET /admin/v1/models", internal, "GET", "/admin/v1/models", admin, None),
        ("PUT /admin/v1/tenants/globex", internal, "PUT", "/admin/v1/tenants/globex", admin, {"models": [MODEL]}),
        ("PUT /admin/v1/tenants/acme (shrink)", internal, "PUT", "/admin/v1/tenants/acme", admin,
         {"models": [], "limits": {"requests_per_minute": 5}}),
        ("PUT /admin/v1/tenants/acme/keys/k9", internal, "PUT", "/admin/v1/tenants/acme/keys/k9", admin, {}),
        ("DELETE /admin/v1/tenants/acme/keys/k2", internal, "DELETE", "/admin/v1/tenants/acme/keys/k2", admin, None),
        ("DELETE /admin/v1/tenants/globex", internal, "DELETE", "/admin/v1/tenants/globex", admin, None),
        ("POST /admin/v1/tenants/acme (no such method)", internal, "POST", "/admin/v1/tenants/acme", admin, {}),
    ]  # fmt: skip


def answers(gw, cached_key, new_key) -> dict[str, tuple[int, object, float]]:
    out = {}
    for label, base, method, path, token, body in requests(gw, cached_key, new_key):
        started = time.monotonic()
        status, answer = call(base, method, path, token, body)
        out[label] = (status, answer, round(time.monotonic() - started, 2))
    return out


def wrong(out: dict) -> dict:
    """The answers that are neither a success nor an acceptable OpenAI-shaped refusal."""
    return {label: a for label, a in out.items() if a[0] >= 400 and not acceptable_refusal(a[0], a[1])}


def codes(out: dict, *labels) -> set:
    return {(out[label][0], (out[label][1].get("error") or {}).get("code")) for label in labels}


@contextlib.contextmanager
def stack(upstream, own_postgres=False, own_redis=False, postgres_server=None, redis_server=None):
    """One replica with a tenant `acme` (keys k1 used, k2 not yet) on datastores a test may stop."""
    postgres = PostgresServer().start() if own_postgres else postgres_server
    redis = RedisServer().start() if own_redis else redis_server
    objects = deployment_objects("tiny", MODEL, upstream.base_url)
    gw = Gateway(postgres, redis, objects, database_timeout=DATABASE_TIMEOUT, redis_timeout=REDIS_TIMEOUT)
    try:
        gw.add_replica()
        cached, new = gw.create_key("acme", "k1", models=[MODEL]), gw.create_key("acme", "k2")
        assert call(gw.url, "GET", "/v1/models", cached)[0] == 200  # k1 in the key cache
        yield postgres, redis, gw, cached, new
    finally:
        gw.stop()
        if own_postgres:
            postgres.stop()
        if own_redis:
            redis.stop()


DATABASE_ROUTES = ("GET /v1/models (new key)", "POST /v1/chat/completions (new key)", "GET /v1/usage",
                   "GET /admin/v1/tenants", "GET /admin/v1/tenants/acme", "GET /admin/v1/tenants/acme/keys",
                   "GET /admin/v1/usage", "PUT /admin/v1/tenants/globex", "PUT /admin/v1/tenants/acme (shrink)",
                   "PUT /admin/v1/tenants/acme/keys/k9", "DELETE /admin/v1/tenants/acme/keys/k2",
                   "DELETE /admin/v1/tenants/globex")  # fmt: skip
SERVED_FROM_CACHE = ("GET /v1/models (cached key)", "GET /v1/models/{model}", "POST /v1/chat/completions (cached key)",
                     "POST /v1/completions", "GET /admin/v1/models")  # fmt: skip


@pytest.mark.parametrize("fault", ["stopped", "frozen"])
def test_every_route_answers_openai_shaped_while_postgres_is_down(redis_server, upstream, fault):
    with stack(upstream, own_postgres=True, redis_server=redis_server) as (postgres, _redis, gw, cached, new):
        (postgres.halt if fault == "stopped" else postgres.freeze)()
        try:
            out = answers(gw, cached, new)
        finally:
            postgres.thaw()
        assert not wrong(out), wrong(out)
        assert codes(out, *DATABASE_ROUTES) == {(503, "database_unavailable")}, out
        # Keys already checked keep working, and their usage is journaled (replayed later: test_gateway_ledger).
        assert {out[label][0] for label in SERVED_FROM_CACHE} == {200}, out
        assert out["POST /admin/v1/tenants/acme (no such method)"][0] == 405, out
        slowest = max(a[2] for a in out.values())
        assert slowest < 4 * DATABASE_TIMEOUT, f"a call waited {slowest} s on the database"


@pytest.mark.parametrize("fault", ["stopped", "frozen"])
def test_every_route_answers_openai_shaped_while_redis_is_down(postgres_server, upstream, fault):
    with stack(upstream, own_redis=True, postgres_server=postgres_server) as (_postgres, redis, gw, cached, new):
        if fault == "stopped":
            redis.halt()
        else:
            redis.freeze()  # a hung Redis: connections stay open, nothing answers
        try:
            # A replica trusts its key cache until 3 s after its last acknowledged heartbeat (invalidation.py:
            # no admin change can succeed meanwhile); then it must fail closed.
            started = time.monotonic()
            wait_until(lambda: call(gw.url, "GET", "/v1/models", cached)[0] == 503, 10, "public routes refused")
            noticed = time.monotonic() - started
            out = answers(gw, cached, new)
        finally:
            if fault == "frozen":
                redis.thaw()
        assert not wrong(out), wrong(out)
        # Public routes fail closed (no way to learn of revocations); the admin API reads and writes PostgreSQL,
        # and a change that takes rights away says it could not be announced.
        public = [label for label in out if label.startswith(("GET /v1", "POST /v1"))]
        assert codes(out, *public) == {(503, "redis_unavailable")}, out
        assert codes(out, "PUT /admin/v1/tenants/acme (shrink)", "DELETE /admin/v1/tenants/acme/keys/k2",
                     "DELETE /admin/v1/tenants/globex") == {(503, "redis_unavailable")}, out  # fmt: skip
        reads = ("GET /admin/v1/tenants", "GET /admin/v1/tenants/acme", "GET /admin/v1/tenants/acme/keys",
                 "GET /admin/v1/usage", "GET /admin/v1/models")  # fmt: skip
        assert {out[label][0] for label in reads} == {200}, out
        assert out["POST /admin/v1/tenants/acme (no such method)"][0] == 405, out
        slowest = max(a[2] for a in out.values())
        assert slowest < 4 * REDIS_TIMEOUT, f"a call waited {slowest} s on Redis"
        assert noticed < 3.0 + 2 * REDIS_TIMEOUT, f"cached keys served {noticed:.1f} s into the outage"
