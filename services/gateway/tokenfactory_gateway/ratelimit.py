"""Request and token rate limits in Redis, shared by all replicas.

Each scope (key, tenant, key@deployment, tenant@deployment, deployment) is one Redis hash holding two
continuous token buckets: requests (capacity = requests per minute) and tokens (capacity = tokens per
minute), refilled linearly using Redis' own clock. Tokens are debited with the real usage after the response;
a request is admitted while the token bucket is positive, so a burst of in-flight requests can overdraw it,
and the deficit then blocks until refilled. This module owns the Lua functions and their arguments; a request
runs them in two Redis calls in all (admission.py): its admission (with the auth epoch check and its budget
reservation, one atomic script, so concurrent requests on any number of replicas are admitted exactly up to
the bucket contents) and its settlement (the token debit, with its budget settle).
"""

from __future__ import annotations

import dataclasses
import math

# Lua functions over `keys` (the scopes' hashes) and `args` (their requests and tokens per minute, in pairs).
LUA = """
local function limits_now()
  local clock = redis.call('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

-- The longest wait (ms) a bucket asks for and where (2j - 1: scope j's requests, 2j: its tokens; 0: none),
-- and the requests each request bucket holds now.
local function limits_check(keys, args, now)
  local requests, worst, worst_at = {}, 0, 0
  for j = 1, #keys do
    local rpm, tpm = tonumber(args[2 * j - 1]), tonumber(args[2 * j])
    local h = redis.call('HMGET', keys[j], 'r', 'rt', 't', 'tt')
    if rpm > 0 then
      local rate = rpm / 60000
      local avail = rpm
      if h[1] then avail = math.min(rpm, tonumber(h[1]) + (now - tonumber(h[2])) * rate) end
      requests[j] = avail
      if avail < 1 then
        local wait = math.ceil((1 - avail) / rate)
        if wait > worst then worst, worst_at = wait, 2 * j - 1 end
      end
    end
    if tpm > 0 and h[3] then
      local rate = tpm / 60000
      local avail = math.min(tpm, tonumber(h[3]) + (now - tonumber(h[4])) * rate)
      if avail <= 0 then
        local wait = math.ceil(-avail / rate) + 1
        if wait > worst then worst, worst_at = wait, 2 * j end
      end
    end
  end
  return worst, worst_at, requests
end

-- One request out of each request bucket (`requests`: from limits_check).
local function limits_take(keys, args, now, requests)
  for j = 1, #keys do
    if requests[j] then
      local rpm = tonumber(args[2 * j - 1])
      local left = requests[j] - 1
      redis.call('HSET', keys[j], 'r', tostring(left), 'rt', now)
      local keep = math.ceil((rpm - left) * 60000 / rpm) + 1000
      if redis.call('PTTL', keys[j]) < keep then redis.call('PEXPIRE', keys[j], keep) end
    end
  end
end

-- The tokens used out of each token bucket (`args`: the tokens used, then each scope's tokens per minute).
local function limits_debit(keys, args, now)
  local used = tonumber(args[1])
  for j = 1, #keys do
    local tpm = tonumber(args[j + 1])
    local rate = tpm / 60000
    local h = redis.call('HMGET', keys[j], 't', 'tt')
    local avail = tpm
    if h[1] then avail = math.min(tpm, tonumber(h[1]) + (now - tonumber(h[2])) * rate) end
    avail = avail - used
    redis.call('HSET', keys[j], 't', tostring(avail), 'tt', now)
    local keep = math.ceil((tpm - avail) / rate) + 1000
    if redis.call('PTTL', keys[j]) < keep then redis.call('PEXPIRE', keys[j], keep) end
  end
end
"""


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    key: str  # Redis key
    label: str  # for 429 messages and metrics, e.g. "tenant"
    rpm: int
    tpm: int


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


def admit_args(scopes: list[Scope]) -> tuple[list, list]:
    """KEYS and ARGV of limits_check / limits_take."""
    return [s.key for s in scopes], [n for s in scopes for n in (s.rpm, s.tpm)]


def refusal(scopes: list[Scope], wait_ms: int, where: int) -> tuple[str, int]:
    """What refused (e.g. "tenant requests") and the Retry-After seconds, from limits_check's answer."""
    kind = "requests" if where % 2 else "tokens"
    return f"{scopes[(where - 1) // 2].label} {kind}", max(1, math.ceil(wait_ms / 1000))


def debit_args(scopes: list[Scope], tokens: int) -> tuple[list, list]:
    """KEYS and ARGV of limits_debit: the token-limited scopes (no keys when nothing was used)."""
    limited = [s for s in scopes if s.tpm] if tokens > 0 else []
    return [s.key for s in limited], [tokens, *(s.tpm for s in limited)]
