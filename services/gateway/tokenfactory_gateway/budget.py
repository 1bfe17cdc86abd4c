"""Spend budgets of tenants and keys, per calendar period (UTC), held exactly across replicas in Redis.

A budget caps what a tenant (all its keys) or one key spends per day or month: an amount (cost = tokens x the
deployment's price per 1M, in the deployment's currency) and/or a number of tokens; 0 = no cap. Each budgeted
scope has, per period, a Redis hash of what was spent (seeded from the ledger when Redis does not hold it: a
new period, a flushed Redis) and a hash of what admitted requests reserved. A request is admitted only when
spent + reserved + its own reservation fits every budget, and its reservation is then added, atomically (in the
request's one admission script, with its rate limits: admission.py), so a concurrent burst on any number of
replicas admits exactly what fits. The reservation is the request's bound: its prompt estimate (one token per 4
bytes of text, or the token ids sent) plus its completion bound (`max_completion_tokens`/`max_tokens` x `n`,
DEFAULT_COMPLETION_RESERVE when absent). When the request ends its reservation is replaced by the real usage of
its ledger row (in its one settle script, with its token-limit debit). A stream never stops mid-way for a
budget: it is finished and metered, and what it spent beyond its reservation is charged all the same. Budgets
add no Redis call of their own to a request, only seeding does.

Reservations of a replica killed mid-request stay counted until the reservation hash goes idle for
RESERVATION_IDLE_SECONDS (it expires; every admission renews it).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from decimal import Decimal, InvalidOperation

from . import domain
from .db import bounded
from .errors import ApiError

NANO = 10**9  # costs are counted in Redis as integer billionths of the currency unit (rounded up)
DEFAULT_COMPLETION_RESERVE = 1024  # tokens reserved for the completion of a request without max_tokens
BYTES_PER_TOKEN = 4
RESERVATION_IDLE_SECONDS = 3600
UTC = datetime.UTC

# Lua functions over `keys` (each scope's spent and reserved hash, in pairs) and `args` (below).
LUA = """
-- The first scope whose spend Redis does not hold (0: none).
local function budgets_unseeded(keys)
  for i = 1, #keys / 2 do
    if redis.call('EXISTS', keys[2 * i - 1]) == 0 then return i end
  end
  return 0
end

-- The first scope the request does not fit and what ('tokens' or 'amount'; 0: it fits every one). args: the
-- request's tokens and nano cost, each scope's caps (tokens, nano amount), the reservation hash's idle seconds.
local function budgets_over(keys, args)
  local want_t, want_c = tonumber(args[1]), tonumber(args[2])
  for i = 1, #keys / 2 do
    local max_t, max_c = tonumber(args[2 * i + 1]), tonumber(args[2 * i + 2])
    local s = redis.call('HMGET', keys[2 * i - 1], 't', 'c')
    local r = redis.call('HMGET', keys[2 * i], 't', 'c')
    if max_t > 0 and tonumber(s[1]) + tonumber(r[1] or 0) + want_t > max_t then return i, 'tokens' end
    if max_c > 0 and tonumber(s[2]) + tonumber(r[2] or 0) + want_c > max_c then return i, 'amount' end
  end
  return 0, ''
end

-- Increments go to HINCRBY as the integers Python sent (a Lua number can become "-0" or "1e+18", not integers).
local function budgets_reserve(keys, args)
  for i = 1, #keys / 2 do
    redis.call('HINCRBY', keys[2 * i], 't', args[1])
    redis.call('HINCRBY', keys[2 * i], 'c', args[2])
    redis.call('EXPIRE', keys[2 * i], tonumber(args[#args]))
  end
end

-- The reservation taken back (args 1, 2: its negated tokens and nano cost) and the usage added (args 3, 4);
-- each scope's spend after it (-1, -1: not held).
local function budgets_settle(keys, args)
  local spent = {}
  for i = 1, #keys / 2 do
    if redis.call('EXISTS', keys[2 * i]) == 1 then
      if redis.call('HINCRBY', keys[2 * i], 't', args[1]) < 0 then redis.call('HSET', keys[2 * i], 't', 0) end
      if redis.call('HINCRBY', keys[2 * i], 'c', args[2]) < 0 then redis.call('HSET', keys[2 * i], 'c', 0) end
    end
    if redis.call('EXISTS', keys[2 * i - 1]) == 1 then
      spent[2 * i - 1] = redis.call('HINCRBY', keys[2 * i - 1], 't', args[3])
      spent[2 * i] = redis.call('HINCRBY', keys[2 * i - 1], 'c', args[4])
    else
      spent[2 * i - 1], spent[2 * i] = -1, -1
    end
  end
  return spent
end
"""

SEED_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 't', ARGV[1], 'c', ARGV[2])
  redis.call('EXPIREAT', KEYS[1], tonumber(ARGV[3]))
end
return 1
"""

SPENT_SQL = """SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) AS tokens, coalesce(sum(cost), 0) AS cost
FROM usage_records WHERE tenant = $1 AND ($2::uuid IS NULL OR key_id = $2) AND started_at >= $3 AND started_at < $4"""


@dataclasses.dataclass(frozen=True, slots=True)
class Budget:
    period: str = domain.BUDGET_PERIOD_DEFAULT
    amount: Decimal = Decimal(0)
    tokens: int = domain.UNLIMITED

    def __bool__(self) -> bool:
        return bool(self.amount or self.tokens)

    def view(self) -> dict:
        return {"period": self.period, "amount": format(self.amount.normalize(), "f"), "tokens": self.tokens}

    @classmethod
    def from_row(cls, row, prefix: str = "") -> Budget:
        return cls(row[f"{prefix}budget_period"], row[f"{prefix}budget_amount"], row[f"{prefix}budget_tokens"])

    @classmethod
    def checked(cls, value) -> Budget:
        """A budget from the admin API (`budget` object); a 400 naming the field when it is not valid."""
        value = value or {}
        allowed = list(domain.BUDGET_FIELDS)
        if not isinstance(value, dict) or set(value) - set(allowed):
            raise ApiError(400, f"budget accepts only {allowed}", param="budget")
        period = value.get("period", domain.BUDGET_PERIOD_DEFAULT)
        if period not in domain.BUDGET_PERIODS:
            raise ApiError(400, f"budget.period must be one of {list(domain.BUDGET_PERIODS)}, got {period!r}",
                           param="budget.period")  # fmt: skip
        tokens = value.get("tokens", domain.UNLIMITED)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or not 0 <= tokens <= domain.BUDGET_TOKENS_MAX:
            raise ApiError(400, f"budget.tokens must be an integer in 0..{domain.BUDGET_TOKENS_MAX} (0 = no token "
                           f"budget), got {tokens!r}", param="budget.tokens")  # fmt: skip
        raw = value.get("amount", "0")
        try:
            amount = Decimal(str(raw)) if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None
        except InvalidOperation:
            amount = None
        if amount is None or not amount.is_finite() or amount < 0 or amount * NANO >= 2**62:
            raise ApiError(400, f"budget.amount must be a non-negative decimal string like '25.00' (0 = no amount "
                           f"budget), got {raw!r}", param="budget.amount")  # fmt: skip
        return cls(period, amount, tokens)


def nano(cost: Decimal) -> int:
    return math.ceil(cost * NANO)


def period_bounds(period: str, now: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
    """[start, end) of the calendar period (UTC) that `now` falls in."""
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return start, start + datetime.timedelta(days=1)
    start = start.replace(day=1)
    return start, (start + datetime.timedelta(days=32)).replace(day=1)


def reservation_tokens(payload: dict, route: str) -> tuple[int, int]:
    """(prompt estimate, completion bound) of a request, in tokens."""
    prompt = _text_tokens(payload.get("input") if route in ("/v1/embeddings", "/v1/responses") else None)
    prompt += _text_tokens(payload.get("messages")) + _text_tokens(payload.get("prompt"))
    if route == "/v1/embeddings":
        return prompt, 0
    limit = payload.get("max_completion_tokens") or payload.get("max_tokens") or payload.get("max_output_tokens")
    completion = limit if isinstance(limit, int) and limit > 0 else DEFAULT_COMPLETION_RESERVE
    n = payload.get("n", 1)
    return prompt, completion * (n if isinstance(n, int) and n > 0 else 1)


def _text_tokens(value) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return -(-len(value.encode()) // BYTES_PER_TOKEN)
    if isinstance(value, int) and not isinstance(value, bool):
        return 1  # a token id
    if isinstance(value, list):
        return sum(_text_tokens(v) for v in value)
    if isinstance(value, dict):
        return sum(_text_tokens(value.get(name)) for name in ("content", "text"))
    return 0


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    spent_key: str
    reserved_key: str
    label: str  # "tenant" or "key", for the 429 message and metrics
    budget: Budget
    start: datetime.datetime
    end: datetime.datetime


@dataclasses.dataclass(slots=True)
class Reservation:
    scopes: list[Scope]
    tokens: int
    cost: int  # nano
    settled: bool = False

    def keys(self) -> list[str]:
        return [k for s in self.scopes for k in (s.spent_key, s.reserved_key)]

    def admit_args(self) -> tuple[list, list]:
        """KEYS and ARGV of budgets_unseeded / budgets_over / budgets_reserve."""
        args = [self.tokens, self.cost]
        for s in self.scopes:
            args += [s.budget.tokens, nano(s.budget.amount)]
        return self.keys(), [*args, RESERVATION_IDLE_SECONDS]

    def settle_args(self, tokens: int, cost: Decimal) -> tuple[list, list]:
        """KEYS and ARGV of budgets_settle: this reservation replaced by the real usage."""
        return self.keys(), [-self.tokens, -self.cost, tokens, nano(cost)]


class Budgets:
    def __init__(self, redis, pool, prefix: str, timeout: float, metrics):
        self.pool, self.prefix, self.timeout, self.metrics = pool, prefix, timeout, metrics
        self._seed = redis.register_script(SEED_LUA)

    def scopes_for(self, info, now: datetime.datetime) -> list[Scope]:
        """The budgets a request of this key draws from (only capped ones)."""
        scopes = []
        for label, owner, budget in (("tenant", f"t:{info.tenant}", info.tenant_budget),
                                     ("key", f"k:{info.key_id}", info.key_budget)):  # fmt: skip
            if budget:
                start, end = period_bounds(budget.period, now)
                base = f"{self.prefix}bg:{owner}:{budget.period}:{start:%Y%m%d}"
                scopes.append(Scope(base, base + ":r", label, budget, start, end))
        return scopes

    def reservation(self, info, dep, payload: dict, route: str, now: datetime.datetime) -> Reservation | None:
        """What this request reserves on each budget it draws from (None: no budget, nothing to ask Redis)."""
        scopes = self.scopes_for(info, now)
        if not scopes:
            return None
        prompt, completion = reservation_tokens(payload, route)
        return Reservation(scopes, prompt + completion, nano(dep.price.cost(prompt, completion)))

    def settled(self, reservation: Reservation, tenant: str, spent: list) -> None:
        """The tenant's budget gauges after a settle (`spent`: budgets_settle's answer)."""
        for i, scope in enumerate(reservation.scopes):
            if scope.label == "tenant" and spent[2 * i] >= 0:
                self.show(tenant, scope.budget, int(spent[2 * i]), int(spent[2 * i + 1]))

    async def standing(self, tenant: str, key_id, budget: Budget, now: datetime.datetime) -> dict:
        """What a budget allows, what the ledger holds as spent in its current period, what is left and when it
        renews (the portal's view; key_id None: the tenant's budget)."""
        start, end = period_bounds(budget.period, now)
        tokens, cost = await self._ledger_spent(tenant, key_id, start, end)
        return {
            **budget.view(),
            "spent_tokens": tokens,
            "spent_amount": format(cost.normalize(), "f"),
            "left_tokens": max(budget.tokens - tokens, 0) if budget.tokens else None,
            "left_amount": format(max(budget.amount - cost, Decimal(0)).normalize(), "f") if budget.amount else None,
            "renews_at": end.isoformat(),
        }

    def show(self, tenant: str, budget: Budget, tokens: int, cost_nano: int) -> None:
        """tf_gateway_budget_spent / _limit of a tenant (its keys' budgets are not exported: no key labels)."""
        period = budget.period
        for unit, spent, cap in (("tokens", tokens, budget.tokens), ("amount", cost_nano / NANO, budget.amount)):
            if cap:
                self.metrics.budget_spent.labels(tenant, period, unit).set(spent)
                self.metrics.budget_limit.labels(tenant, period, unit).set(float(cap))

    async def seed_from_ledger(self, info, scope: Scope) -> None:
        """Redis' spend of a scope read back from the ledger (unless another replica did it first)."""
        key_id = info.key_id if scope.label == "key" else None
        tokens, cost = await self._ledger_spent(info.tenant, key_id, scope.start, scope.end)
        expire_at = int((scope.end + datetime.timedelta(days=1)).timestamp())
        await self._seed(keys=[scope.spent_key], args=[tokens, nano(cost), expire_at])

    async def _ledger_spent(self, tenant, key_id, start, end) -> tuple[int, Decimal]:
        """(tokens, cost) the ledger holds for the tenant (or one of its keys) in [start, end)."""
        query = self.pool.fetchrow(SPENT_SQL, tenant, key_id, start, end, timeout=self.timeout)
        row = await bounded(query, self.timeout)
        return int(row["tokens"]), Decimal(row["cost"])


class BudgetExceeded(ApiError):
    """429 `budget_exceeded` (type insufficient_quota, as OpenAI answers a spent quota); `scope`: tenant or key."""

    def __init__(self, scope: Scope, what: str):
        budget = scope.budget
        cap = f"{budget.tokens} tokens" if what == "tokens" else format(budget.amount.normalize(), "f")
        super().__init__(
            429,
            f"The {scope.label}'s spend budget per {budget.period} ({cap}) does not cover this request (its prompt "
            f"and max_tokens); it renews at {scope.end.isoformat()}.",
            "insufficient_quota",
            "budget_exceeded",
        )
        self.scope = scope.label
