"""API keys: random, shown once, stored as HMAC-SHA256(pepper, key), checked in constant time.

Validated keys are cached per replica. Admin changes that take rights away (revoke, delete, unshare,
limit change) bump an auth epoch; a replica that sees a new epoch drops its whole cache. It sees it by
push (invalidation.py, acknowledged before the admin call returns) or, with rate limits or while the
push channel is down, in the same Redis call as the rate-limit and budget check (admission.py).
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import time
import uuid

from .budget import Budget
from .db import guarded

KEY_PREFIX = "tfk-"
NEGATIVE_CACHE_SECONDS = 2.0
CACHE_MAX_ENTRIES = 100_000


def generate_key() -> tuple[str, str]:
    """Return (key, display prefix). 256 random bits; the prefix identifies the key in listings."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, key[: len(KEY_PREFIX) + 6]


def hash_key(pepper: bytes, key: str) -> bytes:
    return hmac.digest(pepper, key.encode(), "sha256")


def bearer_token(header: str | None) -> str | None:
    if not header or header[:7].lower() != "bearer ":
        return None
    return header[7:].strip() or None


@dataclasses.dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: uuid.UUID
    tenant: str
    key_name: str
    key_rpm: int
    key_tpm: int
    tenant_rpm: int
    tenant_tpm: int
    granted_models: frozenset
    expires_at: float | None  # epoch seconds
    key_budget: Budget
    tenant_budget: Budget

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


LOOKUP_SQL = """
SELECT k.id, k.hash, k.tenant, k.name, k.requests_per_minute AS key_rpm, k.tokens_per_minute AS key_tpm,
       k.expires_at, t.requests_per_minute AS tenant_rpm, t.tokens_per_minute AS tenant_tpm,
       k.budget_period, k.budget_amount, k.budget_tokens, t.budget_period AS t_budget_period,
       t.budget_amount AS t_budget_amount, t.budget_tokens AS t_budget_tokens,
       coalesce(array(SELECT model FROM tenant_models m WHERE m.tenant = t.name), '{}') AS models
FROM api_keys k JOIN tenants t ON t.name = k.tenant
WHERE k.hash = $1 AND k.revoked_at IS NULL AND t.deleted_at IS NULL
"""


class KeyCache:
    """hash -> KeyInfo (or None for unknown keys, briefly), flushed whenever the auth epoch moves."""

    def __init__(self, pool, pepper: bytes, ttl: float, timeout: float = 5.0):
        self.pool, self.pepper, self.ttl, self.timeout = pool, pepper, ttl, timeout
        self.epoch: int | None = None
        self._entries: dict[bytes, tuple[KeyInfo | None, float]] = {}

    def observe_epoch(self, epoch: int) -> bool:
        """Record the epoch seen in Redis; True when it moved (cache flushed)."""
        if epoch == self.epoch:
            return False
        self._entries.clear()
        self.epoch = epoch
        return True

    async def lookup(self, key: str) -> KeyInfo | None:
        digest = hash_key(self.pepper, key)
        now = time.monotonic()
        hit = self._entries.get(digest)
        if hit is not None and hit[1] > now:
            info = hit[0]
        else:
            epoch = self.epoch
            info = await self._load(digest)
            if epoch == self.epoch:  # a flush during the read may mean the row is already outdated
                if len(self._entries) >= CACHE_MAX_ENTRIES:
                    self._entries.clear()
                self._entries[digest] = (info, now + (self.ttl if info else NEGATIVE_CACHE_SECONDS))
        if info is None or info.expired(time.time()):
            return None
        return info

    def forget(self, key: str) -> None:
        self._entries.pop(hash_key(self.pepper, key), None)

    @guarded()
    async def _load(self, digest: bytes) -> KeyInfo | None:
        row = await self.pool.fetchrow(LOOKUP_SQL, digest)
        if row is None or not hmac.compare_digest(bytes(row["hash"]), digest):
            return None
        return KeyInfo(
            key_id=row["id"],
            tenant=row["tenant"],
            key_name=row["name"],
            key_rpm=row["key_rpm"],
            key_tpm=row["key_tpm"],
            tenant_rpm=row["tenant_rpm"],
            tenant_tpm=row["tenant_tpm"],
            granted_models=frozenset(row["models"]),
            expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
            key_budget=Budget.from_row(row),
            tenant_budget=Budget.from_row(row, "t_"),
        )
