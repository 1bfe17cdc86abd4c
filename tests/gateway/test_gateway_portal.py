"""Tenant portal (/portal/) over HTTP against real gateway processes, PostgreSQL and Redis: sign-in, usage chart,
key creation shown once, revocation on both replicas, tenant isolation, cookie flags and CSRF."""

import asyncio
import decimal
import http.cookiejar
import json
import os
import pathlib
import re
import shutil
import urllib.parse
import urllib.request

import openai
import pytest

from tests.gateway.cdp import Chromium
from tests.gateway.gateway import deployment_objects
from tests.gateway.test_gateway_api import MESSAGES, client, wait_ledger

pytestmark = pytest.mark.gateway
MODEL, OTHER = "tiny-qwen2", "secret-model"


class Browser:
    """A cookie-keeping HTTP client. The test gateways listen on plain HTTP, where a cookie jar keeps the portal's
    Secure cookie but does not send it back: this client sends it (a browser on the HTTPS Endpoint does)."""

    def __init__(self, base):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def go(self, method, path, form=None, headers=None):
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        headers = dict(headers or {})
        if any(c.name == "tf_portal" and c.value for c in self.jar):
            headers["Cookie"] = "; ".join(f"{c.name}={c.value}" for c in self.jar)
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.read().decode(), resp.headers
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(), err.headers

    def csrf(self, html):
        return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


@pytest.fixture
def gw(gateway_factory, upstream):
    objects = deployment_objects("tiny", MODEL, upstream.base_url, tenants=["acme"]) + deployment_objects(
        "hidden", OTHER, upstream.base_url, tenants=["globex"]
    )
    gateway = gateway_factory(objects, replicas=2)
    gateway.create_key("acme", "app")
    status, answer = gateway.admin("PUT", "/tenants/acme/keys/boss", {"scope": "tenant_admin"})
    assert status == 201, answer
    gateway.admin_key = answer["key"]
    return gateway


def signed_in(gw, key, replica=0):
    browser = Browser(gw.replicas[replica].url)
    status, html, _headers = browser.go("POST", "/portal/sign-in", {"key": key})
    assert status == 200, html[:500]
    status, html, _headers = browser.go("GET", "/portal/")
    assert status == 200 and 'id="who"' in html, html[:500]
    return browser, html


def test_portal_sign_in_chart_create_call_revoke_on_both_replicas(gw):
    c = client(gw, gw.admin_key)
    for _call in range(3):
        c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
    wait_ledger(gw, 3)
    browser, html = signed_in(gw, gw.admin_key)
    assert "<rect" in html and MODEL in html and "USD" in html  # the chart has bars, the price its currency
    assert gw.admin_key not in html
    cookie = next(c for c in browser.jar if c.name == "tf_portal")
    assert cookie.secure and cookie.has_nonstandard_attr("HttpOnly") and cookie.get_nonstandard_attr("SameSite")
    assert gw.admin_key not in cookie.value

    status, created, _headers = browser.go("POST", "/portal/keys", {"name": "fresh", "csrf": browser.csrf(html)})
    assert status == 201, created[:300]
    new_key = re.search(r'id="new-key">(tfk-[^<]+)<', created).group(1)
    status, again, _headers = browser.go("GET", "/portal/")
    assert status == 200 and new_key not in again and "fresh" in again  # listed, never shown again
    for replica in (0, 1):
        assert client(gw, new_key, replica).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)

    status, _html, _headers = browser.go("POST", "/portal/keys/fresh/revoke", {"csrf": browser.csrf(again)})
    assert status == 200
    for replica in (0, 1):
        with pytest.raises(openai.AuthenticationError):
            client(gw, new_key, replica).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
    assert new_key not in gw.logs() and gw.admin_key not in gw.logs()
    metrics = urllib.request.urlopen(gw.replicas[0].internal_url + "/metrics", timeout=10).read().decode()
    assert new_key not in metrics and gw.admin_key not in metrics


def test_portal_refuses_writes_without_csrf_and_cross_site(gw):
    browser, html = signed_in(gw, gw.admin_key)
    assert browser.go("POST", "/portal/keys", {"name": "x"})[0] == 403
    assert browser.go("POST", "/portal/keys", {"name": "x", "csrf": "0" * 64})[0] == 403
    status = browser.go("POST", "/portal/keys", {"name": "x", "csrf": browser.csrf(html)},
                        headers={"Origin": "https://evil.example"})[0]  # fmt: skip
    assert status == 403
    assert "x" not in [k["name"] for k in gw.admin("GET", "/tenants/acme/keys")[1]["data"]]


def test_portal_tenant_isolation_and_plain_keys(gw):
    other_key = gw.create_key("globex", "theirs", models=[MODEL])  # granted: its usage is also of MODEL
    client(gw, other_key).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2)
    wait_ledger(gw, 1)
    browser, html = signed_in(gw, gw.admin_key)
    for path in ("/portal/?tenant=globex", "/portal/?range=30d&tenant=globex&key_id=x"):
        status, page, _headers = browser.go("GET", path)
        assert status == 200 and OTHER not in page and "globex" not in page and "theirs" not in page
        assert "<rect" not in page  # acme has no traffic: globex's request is in no chart
    status, page, _headers = browser.go("POST", "/portal/keys/theirs/revoke", {"csrf": browser.csrf(html)})
    assert status == 404
    assert [k["name"] for k in gw.admin("GET", "/tenants/globex/keys")[1]["data"]] == ["theirs"]
    plain, plain_html = signed_in(gw, gw.create_key("acme", "app2"))
    assert 'id="keys"' not in plain_html
    assert plain.go("POST", "/portal/keys", {"name": "y", "csrf": plain.csrf(plain_html)})[0] == 403
    assert Browser(gw.url).go("POST", "/portal/sign-in", {"key": "tfk-wrong"})[0] == 401


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed (scripts/bootstrap installs it)")
def test_portal_in_headless_chromium(gw, tmp_path):
    """The real browser: sign in, see the chart after traffic, create a key (shown once), call with it, revoke it;
    the next call gets 401 on both replicas. Screenshots go to TF_PORTAL_SCREENSHOTS (default: the test's tmp)."""
    shots = pathlib.Path(os.environ.get("TF_PORTAL_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    c = client(gw, gw.admin_key)
    for tokens in (3, 5, 8):
        c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=tokens)
    wait_ledger(gw, 3)

    async def run():
        browser = await Chromium().open()
        try:
            await browser.navigate(gw.url + "/portal/")
            await browser.submit(f"document.getElementById('key').value = {json.dumps(gw.admin_key)};"
                                 "document.getElementById('sign-in').click()")  # fmt: skip
            assert "acme" in await browser.evaluate("document.getElementById('who').textContent")
            assert await browser.evaluate("document.querySelectorAll('svg.chart rect').length") >= 3
            await browser.screenshot(shots / "portal-dashboard.png")
            cookie = next(k for k in await browser.cookies() if k["name"] == "tf_portal")
            assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            await browser.submit("document.getElementById('new-key-name').value = 'browser';"
                                 "document.getElementById('create-key').click()")  # fmt: skip
            value = await browser.evaluate("document.getElementById('new-key').textContent")
            await browser.screenshot(shots / "portal-key-created.png")
            await browser.navigate(gw.url + "/portal/")
            assert value not in await browser.evaluate("document.documentElement.outerHTML")
            return browser, value
        except BaseException:
            await browser.close()
            raise

    loop = asyncio.new_event_loop()
    try:
        browser, value = loop.run_until_complete(run())
        try:
            for replica in (0, 1):
                client(gw, value, replica).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
            loop.run_until_complete(browser.submit("document.querySelector('button.revoke[data-key=browser]').click()"))
            loop.run_until_complete(browser.screenshot(shots / "portal-key-revoked.png"))
            for replica in (0, 1):
                with pytest.raises(openai.AuthenticationError):
                    client(gw, value, replica).chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
        finally:
            loop.run_until_complete(browser.close())
    finally:
        loop.close()


def test_portal_shows_each_budget_with_what_is_spent_and_left(gw):
    """Budgets of the tenant (tokens, per day) and of a key (amount, per month): the portal's spent is the ledger's
    sum for the period, left is the cap minus it; a key without a budget sees only the tenant's."""
    status, answer = gw.admin(
        "PUT", "/tenants/acme", {"models": [MODEL], "budget": {"period": "day", "tokens": 100000}}
    )
    assert status == 200, answer
    status, answer = gw.admin("PUT", "/tenants/acme/keys/spender", {"budget": {"period": "month", "amount": "2.50"}})
    assert status == 201, answer
    spender = answer["key"]
    c = client(gw, spender)
    for _call in range(2):
        c.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
    wait_ledger(gw, 2)
    tokens = int(gw.sql("SELECT sum(prompt_tokens + completion_tokens) FROM usage_records"))
    cost = gw.sql("SELECT trim_scale(sum(cost)) FROM usage_records")
    assert tokens > 0 and cost not in ("", "0")

    _browser, html = signed_in(gw, spender)
    rows = re.findall(r'<tr class="budget">(.*?)</tr>', html)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert [c[:3] for c in cells] == [["tenant", "day", "tokens"], ["key spender", "month", "amount USD"]], cells
    assert cells[0][3:6] == ["100000", str(tokens), str(100000 - tokens)], cells
    left = format(decimal.Decimal("2.50") - decimal.Decimal(cost), "f").rstrip("0").rstrip(".")
    assert cells[1][3:6] == ["2.5", cost, left], cells

    _browser, html = signed_in(gw, gw.create_key("acme", "plain", models=[MODEL]))
    rows = re.findall(r'<tr class="budget">(.*?)</tr>', html)
    assert len(rows) == 1 and "<td>tenant</td>" in rows[0], rows
