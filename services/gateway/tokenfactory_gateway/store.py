"""Tenants, keys and sharing in PostgreSQL: the admin API's data layer (dry-run aware)."""

from __future__ import annotations

import datetime
import re
import uuid

from . import domain
from .budget import Budget
from .db import guarded
from .errors import ApiError
from .keys import generate_key, hash_key

# Matched whole (fullmatch): `$` would also accept a trailing newline.
TENANT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
LIMIT_FIELDS = tuple(domain.LIMIT_FIELDS)
# "inference": the OpenAI routes; "tenant_admin": also the portal's key management and the whole tenant's usage.
KEY_SCOPES = ("inference", "tenant_admin")


class DryRun(Exception):
    """Raised inside a transaction to roll it back after computing the answer."""


def check_name(value, pattern, what):
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ApiError(400, f"{what} {value!r} is invalid: must match {pattern.pattern}", param="name")


def check_limits(limits) -> dict:
    limits = limits or {}
    if not isinstance(limits, dict) or set(limits) - set(LIMIT_FIELDS):
        raise ApiError(400, f"limits accepts only {list(LIMIT_FIELDS)}", param="limits")
    for field in LIMIT_FIELDS:
        value = limits.get(field, domain.UNLIMITED)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= domain.PER_MINUTE_MAX:
            raise ApiError(
                400,
                f"limits.{field} must be an integer in 0..{domain.PER_MINUTE_MAX} (0 = unlimited), got {value!r}",
                param="limits",
            )
    return {f: limits.get(f, domain.UNLIMITED) for f in LIMIT_FIELDS}


def parse_time(value, field):
    if value in (None, ""):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, f"{field} must be an ISO 8601 time, got {value!r}", param=field) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _iso(value):
    return value.isoformat() if value else None


def tenant_view(row, models) -> dict:
    return {
        "name": row["name"],
        "description": row["description"],
        "limits": {f: row[f] for f in LIMIT_FIELDS},
        "models": sorted(models),
        "budget": Budget.from_row(row).view(),
        "created_at": _iso(row["created_at"]),
    }


def key_view(row) -> dict:
    return {
        "id": str(row["id"]),
        "tenant": row["tenant"],
        "name": row["name"],
        "prefix": row["prefix"],
        "scope": row["scope"],
        "limits": {f: row[f] for f in LIMIT_FIELDS},
        "budget": Budget.from_row(row).view(),
        "created_at": _iso(row["created_at"]),
        "expires_at": _iso(row["expires_at"]),
        "revoked_at": _iso(row["revoked_at"]),
    }


class Store:
    """Every public method is bounded by the database timeout; an unavailable database answers 503."""

    def __init__(self, pool, pepper: bytes, timeout: float = 5.0):
        self.pool, self.pepper, self.timeout = pool, pepper, timeout

    async def _tenant(self, conn, name, lock=False):
        sql = "SELECT * FROM tenants WHERE name = $1 AND deleted_at IS NULL"
        row = await conn.fetchrow(sql + " FOR UPDATE" if lock else sql, name)
        if row is None:
            return None
        models = await conn.fetchval(
            "SELECT coalesce(array_agg(model), '{}') FROM tenant_models WHERE tenant = $1", name
        )
        return tenant_view(row, models)

    @guarded()
    async def list_tenants(self) -> list[dict]:
        async with self.pool.acquire() as conn:
            names = await conn.fetch("SELECT name FROM tenants WHERE deleted_at IS NULL ORDER BY name")
            return [await self._tenant(conn, r["name"]) for r in names]

    @guarded()
    async def get_tenant(self, name) -> dict | None:
        async with self.pool.acquire() as conn:
            return await self._tenant(conn, name)

    async def put_tenant(self, name, body, dry_run) -> tuple[dict | None, dict]:
        """Create or update; fields absent from body keep their value (defaults on creation)."""
        check_name(name, TENANT_NAME, "tenant name")
        unknown = set(body) - {"description", "limits", "models", "budget"}
        if unknown:
            raise ApiError(
                400, f"unknown tenant field(s) {sorted(unknown)}; allowed: budget, description, limits, models"
            )
        models = body.get("models")
        if models is not None and (not isinstance(models, list) or not all(isinstance(m, str) and m for m in models)):
            raise ApiError(400, "models must be a list of model names", param="models")
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            raise ApiError(400, "description must be a string", param="description")
        limits = check_limits(body["limits"]) if "limits" in body else None
        budget = Budget.checked(body["budget"]) if "budget" in body else None
        return await self._in_tx(dry_run, self._put_tenant, name, description, limits, models, budget)

    async def _put_tenant(self, conn, name, description, limits, models, budget):
        before = await self._tenant(conn, name, lock=True)
        base = before or {"description": "", "limits": dict.fromkeys(LIMIT_FIELDS, 0), "models": []}
        description = base["description"] if description is None else description
        limits = base["limits"] if limits is None else limits
        models = base["models"] if models is None else sorted(set(models))
        budget = (Budget.checked(before["budget"]) if before else Budget()) if budget is None else budget
        await conn.execute(
            """INSERT INTO tenants (name, description, requests_per_minute, tokens_per_minute, budget_period,
               budget_amount, budget_tokens) VALUES ($1, $2, $3, $4, $5, $6, $7)
               ON CONFLICT (name) DO UPDATE SET description = $2, requests_per_minute = $3, tokens_per_minute = $4,
               budget_period = $5, budget_amount = $6, budget_tokens = $7,
               deleted_at = NULL, created_at = CASE WHEN tenants.deleted_at IS NULL THEN tenants.created_at
               ELSE now() END""",
            name,
            description,
            limits["requests_per_minute"],
            limits["tokens_per_minute"],
            *_budget_columns(budget),
        )
        await conn.execute("DELETE FROM tenant_models WHERE tenant = $1 AND NOT (model = ANY($2))", name, models)
        await conn.executemany(
            "INSERT INTO tenant_models VALUES ($1, $2) ON CONFLICT DO NOTHING", [(name, m) for m in models]
        )
        after = await self._tenant(conn, name)
        if before is not None and before != after:
            await _rights_changed(conn)  # limits or sharing may have shrunk
        return before, after

    async def delete_tenant(self, name, dry_run) -> dict | None:
        return await self._in_tx(dry_run, self._delete_tenant, name)

    async def _delete_tenant(self, conn, name):
        before = await self._tenant(conn, name, lock=True)
        if before:
            await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE tenant = $1 AND revoked_at IS NULL", name)
            await conn.execute("DELETE FROM tenant_models WHERE tenant = $1", name)
            await conn.execute("UPDATE tenants SET deleted_at = now() WHERE name = $1", name)
            await _rights_changed(conn)
        return before

    @guarded()
    async def list_keys(self, tenant, include_revoked=False) -> list[dict]:
        rows = await self.pool.fetch(
            "SELECT * FROM api_keys WHERE tenant = $1 AND (revoked_at IS NULL OR $2) ORDER BY name, created_at",
            tenant,
            include_revoked,
        )
        return [key_view(r) for r in rows]

    async def put_key(self, tenant, name, body, dry_run) -> tuple[dict | None, dict, str | None]:
        """Create the tenant's active key `name` (returning its value once) or update its limits/expiry."""
        check_name(name, KEY_NAME, "key name")
        unknown = set(body) - {"limits", "expires_at", "budget", "scope"}
        if unknown:
            raise ApiError(400, f"unknown key field(s) {sorted(unknown)}; allowed: budget, expires_at, limits, scope")
        limits = check_limits(body["limits"]) if "limits" in body else None
        budget = Budget.checked(body["budget"]) if "budget" in body else None
        expires = parse_time(body.get("expires_at"), "expires_at") if "expires_at" in body else ...
        scope = body.get("scope")
        if scope is not None and scope not in KEY_SCOPES:
            raise ApiError(400, f"scope must be one of {list(KEY_SCOPES)}, got {scope!r}", param="scope")
        return await self._in_tx(dry_run, self._put_key, tenant, name, limits, expires, budget, scope)

    async def _put_key(self, conn, tenant, name, limits, expires, budget, scope=None):
        if await self._tenant(conn, tenant, lock=True) is None:
            raise ApiError(404, f"tenant {tenant!r} not found", code="tenant_not_found")
        row = await conn.fetchrow(
            "SELECT * FROM api_keys WHERE tenant = $1 AND name = $2 AND revoked_at IS NULL FOR UPDATE", tenant, name
        )
        if row is None:
            value, prefix = generate_key()
            limits = limits or dict.fromkeys(LIMIT_FIELDS, 0)
            row = await conn.fetchrow(
                """INSERT INTO api_keys (id, tenant, name, prefix, hash, requests_per_minute, tokens_per_minute,
                   expires_at, budget_period, budget_amount, budget_tokens, scope)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *""",
                uuid.uuid4(),
                tenant,
                name,
                prefix,
                hash_key(self.pepper, value),
                limits["requests_per_minute"],
                limits["tokens_per_minute"],
                None if expires is ... else expires,
                *_budget_columns(budget or Budget()),
                scope or KEY_SCOPES[0],
            )
            return None, key_view(row), value
        before = key_view(row)
        limits = before["limits"] if limits is None else limits
        budget = Budget.from_row(row) if budget is None else budget
        row = await conn.fetchrow(
            """UPDATE api_keys SET requests_per_minute = $2, tokens_per_minute = $3, expires_at = $4,
               budget_period = $5, budget_amount = $6, budget_tokens = $7, scope = $8 WHERE id = $1 RETURNING *""",
            row["id"],
            limits["requests_per_minute"],
            limits["tokens_per_minute"],
            row["expires_at"] if expires is ... else expires,
            *_budget_columns(budget),
            scope or row["scope"],
        )
        after = key_view(row)
        if before != after:
            await _rights_changed(conn)
        return before, after, None

    async def revoke_key(self, tenant, name, dry_run) -> dict | None:
        return await self._in_tx(dry_run, self._revoke_key, tenant, name)

    async def _revoke_key(self, conn, tenant, name):
        row = await conn.fetchrow(
            "UPDATE api_keys SET revoked_at = now() WHERE tenant = $1 AND name = $2 AND revoked_at IS NULL RETURNING *",
            tenant,
            name,
        )
        if row is None:
            return None
        await _rights_changed(conn)
        return key_view(row)

    @guarded()
    async def pending_auth_change(self) -> int | None:
        """The newest rights-removing change not yet announced to every replica, if any."""
        row = await self.pool.fetchrow("SELECT changed, published FROM auth_changes")
        return row["changed"] if row["changed"] > row["published"] else None

    @guarded()
    async def auth_change_published(self, changed: int) -> None:
        await self.pool.execute("UPDATE auth_changes SET published = greatest(published, $1)", changed)

    @guarded()
    async def _in_tx(self, dry_run, func, *args):
        result = None
        async with self.pool.acquire() as conn:
            try:
                async with conn.transaction():
                    result = await func(conn, *args)
                    if dry_run:
                        raise DryRun
            except DryRun:
                pass
        return result


def _budget_columns(budget: Budget) -> tuple:
    return budget.period, budget.amount, budget.tokens


async def _rights_changed(conn) -> None:
    await conn.execute("UPDATE auth_changes SET changed = changed + 1")
