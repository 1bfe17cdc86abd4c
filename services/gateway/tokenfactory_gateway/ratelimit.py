"""Request and token rate limits in Redis, shared by all replicas, plus the auth epoch check.

Each scope (key, tenant, key@deployment, tenant@deployment, deployment) is one Redis hash holding two
continuous token buckets: requests (capacity = requests per minute) and tokens (capacity = tokens per
minute), refilled linearly using Redis' own clock. Admission runs as one Lua script, so concurrent
requests on any number of replicas are admitted exactly up to the bucket contents. Tokens are debited
with the real usage after the response; a request is admitted while the token bucket is positive, so
a burst of in-flight requests can overdraw it, and the deficit then blocks until refilled.
"""

from __future__ import annotations

import dataclasses
import math

from .invalidation import SEED_EPOCH

ADMIT_LUA = (
    SEED_EPOCH
    + """
if epoch ~= ARGV[1] then return {-1, 0, 0, epoch} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local requests = {}
local worst, worst_at = 0, 0
for i = 2, #KEYS do
  local rpm, tpm = tonumber(ARGV[2 * i - 2]), tonumber(ARGV[2 * i - 1])
  local h = redis.call('HMGET', KEYS[i], 'r', 'rt', 't', 'tt')
  if rpm > 0 then
    local rate = rpm / 60000
    local avail = rpm
    if h[1] then avail = math.min(rpm, tonumber(h[1]) + (now - tonumber(h[2])) * rate) end
    requests[i] = avail
    if avail < 1 then
      local wait = math.ceil((1 - avail) / rate)
      if wait > worst then worst, worst_at = wait, 2 * (i - 1) - 1 end
    end
  end
  if tpm > 0 and h[3] then
    local rate = tpm / 60000
    local avail = math.min(tpm, tonumber(h[3]) + (now - tonumber(h[4])) * rate)
    if avail <= 0 then
      local wait = math.ceil(-avail / rate) + 1
      if wait > worst then worst, worst_at = wait, 2 * (i - 1) end
    end
  end
end
if worst > 0 then return {0, worst, worst_at, epoch} end
for i = 2, #KEYS do
  if requests[i] then
    local rpm = tonumber(ARGV[2 * i - 2])
    local left = requests[i] - 1
    redis.call('HSET', KEYS[i], 'r', tostring(left), 'rt', now)
    local keep = math.ceil((rpm - left) * 60000 / rpm) + 1000
    if redis.call('PTTL', KEYS[i]) < keep then redis.call('PEXPIRE', KEYS[i], keep) end
  end
end
return {1, 0, 0, epoch}
"""
)

DEBIT_LUA = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local used = tonumber(ARGV[1])
for i = 1, #KEYS do
  local tpm = tonumber(ARGV[i + 1])
  local rate = tpm / 60000
  local h = redis.call('HMGET', KEYS[i], 't', 'tt')
  local avail = tpm
  if h[1] then avail = math.min(tpm, tonumber(h[1]) + (now - tonumber(h[2])) * rate) end
  avail = avail - used
  redis.call('HSET', KEYS[i], 't', tostring(avail), 'tt', now)
  local keep = math.ceil((tpm - avail) / rate) + 1000
  if redis.call('PTTL', KEYS[i]) < keep then redis.call('PEXPIRE', KEYS[i], keep) end
end
return 1
"""


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    key: str  # Redis key
    label: str  # for 429 messages and metrics, e.g. "tenant"
    rpm: int
    tpm: int


@dataclasses.dataclass(frozen=True, slots=True)
class Admission:
    allowed: bool
    stale_epoch: bool
    epoch: int
    retry_after_s: int = 0
    scope: str = ""


def scopes_for(prefix: str, info, dep) -> list[Scope]:
    """The buckets a request of this key to this deployment draws from (only limited ones)."""
    candidates = (
        (f"{prefix}rl:k:{info.key_id}", "key", info.key_rpm, info.key_tpm),
        (f"{prefix}rl:t:{info.tenant}", "tenant", info.tenant_rpm, info.tenant_tpm),
        (f"{prefix}rl:k:{info.key_id}:d:{dep.name}", "key per deployment", *_pair(dep.per_key)),
        (f"{prefix}rl:t:{info.tenant}:d:{dep.name}", "tenant per deployment", *_pair(dep.per_tenant)),
        (f"{prefix}rl:d:{dep.name}", "deployment", *_pair(dep.per_deployment)),
    )
    return [Scope(key, label, rpm, tpm) for key, label, rpm, tpm in candidates if rpm or tpm]


def _pair(limits):
    return limits.requests_per_minute, limits.tokens_per_minute


class RateLimiter:
    def __init__(self, redis, prefix: str):
        self.redis = redis
        self.prefix = prefix
        self.epoch_key = f"{prefix}auth:epoch"
        self._admit = redis.register_script(ADMIT_LUA)
        self._debit = redis.register_script(DEBIT_LUA)

    async def admit(self, scopes: list[Scope], epoch: int | None) -> Admission:
        args = ["" if epoch is None else str(epoch)]
        for scope in scopes:
            args += [scope.rpm, scope.tpm]
        status, wait_ms, where, seen = await self._admit(keys=[self.epoch_key, *(s.key for s in scopes)], args=args)
        seen = int(seen)
        if status == -1:
            return Admission(False, True, seen)
        if status == 0:
            scope = scopes[(where - 1) // 2]
            kind = "requests" if where % 2 else "tokens"
            return Admission(False, False, seen, max(1, math.ceil(wait_ms / 1000)), f"{scope.label} {kind}")
        return Admission(True, False, seen)

    async def debit(self, scopes: list[Scope], tokens: int) -> None:
        limited = [s for s in scopes if s.tpm]
        if limited and tokens > 0:
            await self._debit(keys=[s.key for s in limited], args=[tokens, *(s.tpm for s in limited)])
