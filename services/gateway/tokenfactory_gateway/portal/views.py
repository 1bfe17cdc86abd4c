"""Portal request handlers on the public listener (/portal/): sign-in with a key, usage, limits, models, keys.

Off the proxy's path: these routes only read PostgreSQL and the routing table; the OpenAI routes do not change.
The tenant always comes from the session, never from the URL or a form field, so no URL reaches another tenant.
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

from aiohttp import web

from .. import db, usage
from ..errors import ApiError
from . import chart, page, session

RANGES = {"24h": ("last 24 hours, per hour", "hour", datetime.timedelta(hours=24)),
          "7d": ("last 7 days, per day", "day", datetime.timedelta(days=7)),
          "30d": ("last 30 days, per day", "day", datetime.timedelta(days=30))}  # fmt: skip
DEFAULT_RANGE = "24h"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
LAST_USED_SQL = "SELECT key_id, max(started_at) AS last FROM usage_records WHERE tenant = $1 GROUP BY key_id"


class Portal:
    def __init__(self, gw):
        self.gw = gw
        self.signer = session.Signer(gw.cfg.key_pepper.encode())

    def routes(self):
        return [
            web.get("/portal", self.to_index),
            web.get("/portal/", self.index),
            web.post("/portal/sign-in", self.sign_in),
            web.post("/portal/sign-out", self.sign_out),
            web.post("/portal/keys", self.create_key),
            web.post("/portal/keys/{name}/revoke", self.revoke_key),
        ]

    # -- plumbing ------------------------------------------------------------------------------
    @staticmethod
    def html(body: str, status=200) -> web.Response:
        return web.Response(status=status, text=body, content_type="text/html", headers=SECURITY_HEADERS)

    def _set_cookie(self, response: web.Response, value: str, max_age: int) -> None:
        response.set_cookie(session.COOKIE, value, max_age=max_age, path=session.COOKIE_PATH, secure=True,
                            httponly=True, samesite="Strict")  # fmt: skip

    async def current(self, request) -> session.Session | None:
        cookie = request.cookies.get(session.COOKIE)
        key_id = self.signer.verify(cookie)
        if key_id is None:
            return None
        found = await db.bounded(session.load(self.gw.pool, cookie, key_id), self.gw.cfg.database_timeout)
        if found:
            request["log"].update(tenant=found.tenant, key_id=str(found.key_id), portal=True)
        return found

    @staticmethod
    def same_origin(request) -> None:
        """Refuse cross-site form posts (with SameSite=Strict cookies and the CSRF token: defence in depth)."""
        origin = request.headers.get("Origin")
        if request.headers.get("Sec-Fetch-Site") == "cross-site" or (
            origin not in (None, "null") and origin != f"{request.scheme}://{request.host}"
        ):
            raise ApiError(403, "Cross-site request refused.", code="csrf_refused")

    async def writer(self, request) -> tuple[session.Session, dict]:
        """The session of a state-changing request, its CSRF token checked; (session, form)."""
        self.same_origin(request)
        form = await request.post()
        current = await self.current(request)
        if current is None:
            raise web.HTTPSeeOther("/portal/")
        if not self.signer.csrf_ok(current.cookie, form.get("csrf")):
            raise ApiError(403, "Missing or wrong CSRF token; reload the page.", code="csrf_refused")
        return current, form

    # -- routes --------------------------------------------------------------------------------
    async def to_index(self, request):
        raise web.HTTPPermanentRedirect("/portal/")

    async def index(self, request):
        current = await self.current(request)
        if current is None:
            return self.html(page.sign_in())
        return self.html(page.dashboard(await self.view(request, current)))

    async def sign_in(self, request):
        self.same_origin(request)
        form = await request.post()
        key = str(form.get("key") or "").strip()
        info = await self.gw.keys.lookup(key) if key else None
        if info is None:
            return self.html(page.sign_in("That key is not valid (wrong, revoked or expired)."), 401)
        response = web.HTTPSeeOther("/portal/", headers=SECURITY_HEADERS)
        self._set_cookie(response, self.signer.issue(info.key_id), session.SESSION_SECONDS)
        request["log"].update(tenant=info.tenant, key_id=str(info.key_id), portal=True)
        raise response

    async def sign_out(self, request):
        await self.writer(request)
        response = web.HTTPSeeOther("/portal/", headers=SECURITY_HEADERS)
        self._set_cookie(response, "", 0)
        raise response

    async def create_key(self, request):
        current, form = await self.writer(request)
        self.admin_only(current)
        name = str(form.get("name") or "")
        value = None
        if not await self._active(current.tenant, name):  # put_key would update an active key of that name
            _before, after, value = await self.gw.store.put_key(current.tenant, name, {}, False)
        if value is None:
            view = await self.view(request, current, message=f"A key named {name!r} exists already; revoke it first.")
            return self.html(page.dashboard(view), 409)
        return self.html(page.dashboard(await self.view(request, current, created_key=(after["name"], value))), 201)

    async def revoke_key(self, request):
        current, _form = await self.writer(request)
        self.admin_only(current)
        name = request.match_info["name"]
        revoked = await self.gw.store.revoke_key(current.tenant, name, False)  # only ever the session's tenant
        await self.gw.settle_auth()  # the admin API's path: every replica flushed before this answers
        if revoked is None:
            return self.html(page.dashboard(await self.view(request, current, message=f"No key {name!r}.")), 404)
        if revoked["id"] == str(current.key_id):
            raise web.HTTPSeeOther("/portal/", headers=SECURITY_HEADERS)  # revoked its own key: signed out
        return self.html(page.dashboard(await self.view(request, current, message=f"Key {name!r} revoked.")))

    @staticmethod
    def admin_only(current) -> None:
        if not current.tenant_admin:
            raise ApiError(403, "Managing keys needs a tenant-admin key.", code="tenant_admin_required")

    async def _active(self, tenant, name) -> bool:
        return any(k["name"] == name for k in await self.gw.store.list_keys(tenant))

    # -- the page's data -----------------------------------------------------------------------
    async def view(self, request, current: session.Session, **extra) -> dict:
        gw = self.gw
        chosen = request.query.get("range", DEFAULT_RANGE)
        label, bucket, span = RANGES.get(chosen, RANGES[DEFAULT_RANGE])
        chosen = chosen if chosen in RANGES else DEFAULT_RANGE
        end = datetime.datetime.now(datetime.UTC)
        start = _truncate(end - span, bucket) + (datetime.timedelta(hours=1) if bucket == "hour" else
                                                 datetime.timedelta(days=1))  # fmt: skip
        filters = {"u.tenant": current.tenant}
        if not current.tenant_admin:
            filters["u.key_id"] = current.key_id

        def plan(groups, bucket_name="none"):
            return {"groups": groups, "bucket": bucket_name, "start": start, "end": end, "filters": filters}

        timeout = gw.cfg.database_timeout
        series = await db.bounded(usage.aggregate(gw.pool, plan(["model"], bucket)), timeout)
        by_model = await db.bounded(usage.aggregate(gw.pool, plan(["model"])), timeout)
        by_key = await db.bounded(usage.aggregate(gw.pool, plan(["key"])), timeout)
        keys = []
        if current.tenant_admin:
            used = await db.bounded(gw.pool.fetch(LAST_USED_SQL, current.tenant), timeout)
            last = {r["key_id"]: r["last"] for r in used}
            keys = [{**k, "last_used_at": _iso(last.get(uuid.UUID(k["id"])))}
                    for k in await gw.store.list_keys(current.tenant)]  # fmt: skip
        budgets = []
        for scope, key_id, budget in (("tenant", None, current.tenant_budget),
                                      (f"key {current.key_name}", current.key_id, current.key_budget)):  # fmt: skip
            if budget:
                budgets.append({"scope": scope, **await gw.budgets.standing(current.tenant, key_id, budget, end)})
        table = gw.routing.table
        models = []
        for name in table.models_for(current.tenant, current.granted_models):
            dep = table.resolve(name, current.tenant, current.granted_models)
            if dep is not None:
                described = dep.describe()
                models.append({"model": name, "pricing": described["pricing"], "rate_limits": described["rate_limits"]})
        return {
            "session": current,
            "csrf": self.signer.csrf_token(current.cookie),
            "range": chosen,
            "range_label": label,
            "ranges": [(r, RANGES[r][0].split(",")[0]) for r in RANGES],
            "charts": charts(series["data"], _buckets(start, end, bucket), bucket),
            "by_model": by_model["data"],
            "by_key": by_key["data"],
            "keys": keys,
            "models": models,
            "budgets": budgets,
            "base_url": f"{request.scheme}://{request.host}/v1",
            **extra,
        }


def charts(rows: list[dict], buckets: list[datetime.datetime], bucket: str) -> str:
    """Requests, tokens and cost per bucket, stacked by model (cost: by model and currency)."""
    fmt = "%H:00" if bucket == "hour" else "%m-%d"
    index = {b.isoformat(): i for i, b in enumerate(buckets)}
    labels = [b.strftime(fmt) for b in buckets]
    requests, tokens, cost = {}, {}, {}
    for row in rows:
        i = index.get(row["period"])
        if i is None:
            continue
        for target, name, value in (
            (requests, row["model"], row["requests"]),
            (tokens, f"{row['model']} prompt", row["prompt_tokens"]),
            (tokens, f"{row['model']} completion", row["completion_tokens"]),
            (cost, f"{row['model']} ({row['currency']})", float(Decimal(row["cost"]))),
        ):
            target.setdefault(name, [0] * len(buckets))[i] += value
    currencies = sorted({row["currency"] for row in rows}) or ["-"]
    return "".join((
        chart.stacked_bars("Requests", labels, requests, "requests"),
        chart.stacked_bars("Tokens", labels, tokens, "tokens"),
        chart.stacked_bars(f"Cost ({', '.join(currencies)})", labels, cost, "/".join(currencies)),
    ))  # fmt: skip


def _truncate(moment: datetime.datetime, bucket: str) -> datetime.datetime:
    moment = moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket == "day" else moment


def _buckets(start, end, bucket) -> list[datetime.datetime]:
    step = datetime.timedelta(hours=1) if bucket == "hour" else datetime.timedelta(days=1)
    first, out = _truncate(start, bucket), []
    while first < end:
        out.append(first)
        first += step
    return out


def _iso(value):
    return value.isoformat() if value else None
