"""Admin API (/admin/v1, separate bearer credential): tenants, keys, sharing, routing view, usage."""

from __future__ import annotations

import hmac

import orjson
from aiohttp import web

from . import db, usage
from .errors import ApiError
from .keys import bearer_token


def _json(data, status=200):
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


class Admin:
    def __init__(self, gw):
        self.gw = gw

    def routes(self):
        return [
            web.get("/admin/v1/tenants", self.list_tenants),
            web.get("/admin/v1/tenants/{tenant}", self.get_tenant),
            web.put("/admin/v1/tenants/{tenant}", self.put_tenant),
            web.delete("/admin/v1/tenants/{tenant}", self.delete_tenant),
            web.get("/admin/v1/tenants/{tenant}/keys", self.list_keys),
            web.put("/admin/v1/tenants/{tenant}/keys/{name}", self.put_key),
            web.delete("/admin/v1/tenants/{tenant}/keys/{name}", self.delete_key),
            web.get("/admin/v1/models", self.models),
            web.get("/admin/v1/usage", self.usage),
        ]

    def check(self, request):
        token = bearer_token(request.headers.get("Authorization")) or ""
        if not hmac.compare_digest(token.encode(), self.gw.cfg.admin_token.encode()):
            raise ApiError(401, "Admin credential missing or wrong.", "invalid_request_error", "invalid_admin_token")
        request["log"]["admin"] = True
        return request.query.get("dry_run", "").lower() in {"1", "true", "yes"}

    async def body(self, request) -> dict:
        raw = await request.read()
        if not raw:
            return {}
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ApiError(400, "Request body is not valid JSON.", code="invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Request body must be a JSON object.", code="invalid_json")
        return data

    async def list_tenants(self, request):
        self.check(request)
        return _json({"object": "list", "data": await self.gw.store.list_tenants()})

    async def get_tenant(self, request):
        self.check(request)
        tenant = await self.gw.store.get_tenant(request.match_info["tenant"])
        if tenant is None:
            raise ApiError(404, "tenant not found", code="tenant_not_found")
        return _json(tenant)

    async def put_tenant(self, request):
        dry_run = self.check(request)
        before, after = await self.gw.store.put_tenant(request.match_info["tenant"], await self.body(request), dry_run)
        changed = before != after
        if not dry_run:
            await self.gw.settle_auth()  # limits or sharing may have shrunk, here or in an earlier call
        return _json({"changed": changed, "created": before is None, "before": before, "tenant": after})

    async def delete_tenant(self, request):
        dry_run = self.check(request)
        before = await self.gw.store.delete_tenant(request.match_info["tenant"], dry_run)
        if not dry_run:
            await self.gw.settle_auth()
        return _json({"changed": before is not None, "before": before})

    async def list_keys(self, request):
        self.check(request)
        tenant = request.match_info["tenant"]
        if await self.gw.store.get_tenant(tenant) is None:
            raise ApiError(404, "tenant not found", code="tenant_not_found")
        revoked = request.query.get("include_revoked", "").lower() in {"1", "true", "yes"}
        return _json({"object": "list", "data": await self.gw.store.list_keys(tenant, revoked)})

    async def put_key(self, request):
        dry_run = self.check(request)
        info = request.match_info
        before, after, value = await self.gw.store.put_key(
            info["tenant"], info["name"], await self.body(request), dry_run
        )
        changed = before != after
        if not dry_run:
            await self.gw.settle_auth()
        answer = {"changed": changed, "created": before is None, "before": before, "api_key": after}
        if value and not dry_run:
            answer["key"] = value  # the only time the key value is ever shown
        return _json(answer, 201 if before is None and not dry_run else 200)

    async def delete_key(self, request):
        dry_run = self.check(request)
        before = await self.gw.store.revoke_key(request.match_info["tenant"], request.match_info["name"], dry_run)
        if not dry_run:
            await self.gw.settle_auth()  # also when already revoked: a call that failed to tell the replicas
        return _json({"changed": before is not None, "before": before})

    async def models(self, request):
        self.check(request)
        return _json({"object": "list", "data": [d.describe() for d in self.gw.routing.table.deployments]})

    async def usage(self, request):
        self.check(request)
        plan = usage.parse_query(request.query, set(usage.GROUPS), set(usage.FILTERS), {})
        return _json(await db.bounded(usage.aggregate(self.gw.pool, plan), self.gw.cfg.database_timeout))
