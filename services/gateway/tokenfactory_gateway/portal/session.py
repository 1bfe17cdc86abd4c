"""Portal sessions: a signed cookie naming the signed-in key (never its value), re-checked on every request.

The cookie is `<key id>.<expiry>.<signature>`, signed with a secret derived from the key pepper, so every replica
accepts every other replica's sessions without shared state. Each portal request reads the key again from
PostgreSQL: a revoked key, a deleted tenant or an expired key ends its sessions at once, on every replica.
CSRF: every form carries a token bound to the session (HMAC of the cookie value); writes without it are refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import time
import uuid

from ..budget import Budget

COOKIE = "tf_portal"
COOKIE_PATH = "/portal/"
SESSION_SECONDS = 8 * 3600

SESSION_SQL = """
SELECT k.id, k.tenant, k.name, k.prefix, k.scope, k.requests_per_minute, k.tokens_per_minute,
       t.requests_per_minute AS tenant_rpm, t.tokens_per_minute AS tenant_tpm,
       k.budget_period, k.budget_amount, k.budget_tokens, t.budget_period AS t_budget_period,
       t.budget_amount AS t_budget_amount, t.budget_tokens AS t_budget_tokens,
       coalesce(array(SELECT model FROM tenant_models m WHERE m.tenant = t.name), '{}') AS models
FROM api_keys k JOIN tenants t ON t.name = k.tenant
WHERE k.id = $1 AND k.revoked_at IS NULL AND t.deleted_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
"""


@dataclasses.dataclass(frozen=True, slots=True)
class Session:
    cookie: str
    key_id: uuid.UUID
    tenant: str
    key_name: str
    key_prefix: str
    scope: str
    key_limits: dict
    tenant_limits: dict
    granted_models: frozenset
    key_budget: Budget
    tenant_budget: Budget

    @property
    def tenant_admin(self) -> bool:
        return self.scope == "tenant_admin"


class Signer:
    def __init__(self, pepper: bytes):
        self._secret = hmac.digest(pepper, b"tokenfactory portal session v1", "sha256")

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self._secret, f"{purpose}|{value}".encode(), hashlib.sha256).hexdigest()

    def issue(self, key_id: uuid.UUID, now: float | None = None) -> str:
        body = f"{key_id}.{int((now or time.time()) + SESSION_SECONDS)}"
        return f"{body}.{self._mac('session', body)}"

    def verify(self, cookie: str | None, now: float | None = None) -> uuid.UUID | None:
        """The key id of a well-signed, unexpired cookie, else None."""
        parts = (cookie or "").split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        body = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(parts[2], self._mac("session", body)) or int(parts[1]) <= (now or time.time()):
            return None
        try:
            return uuid.UUID(parts[0])
        except ValueError:
            return None

    def csrf_token(self, cookie: str) -> str:
        return self._mac("csrf", cookie)

    def csrf_ok(self, cookie: str, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token, self.csrf_token(cookie))


async def load(conn_or_pool, cookie: str, key_id: uuid.UUID) -> Session | None:
    row = await conn_or_pool.fetchrow(SESSION_SQL, key_id)
    if row is None:
        return None
    return Session(
        cookie=cookie,
        key_id=row["id"],
        tenant=row["tenant"],
        key_name=row["name"],
        key_prefix=row["prefix"],
        scope=row["scope"],
        key_limits={"requests_per_minute": row["requests_per_minute"], "tokens_per_minute": row["tokens_per_minute"]},
        tenant_limits={"requests_per_minute": row["tenant_rpm"], "tokens_per_minute": row["tenant_tpm"]},
        granted_models=frozenset(row["models"]),
        key_budget=Budget.from_row(row),
        tenant_budget=Budget.from_row(row, "t_"),
    )
