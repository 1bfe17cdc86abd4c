"""A request's two Redis calls: one script admits it, one settles it.

The admission script checks the auth epoch, the rate limits (ratelimit.py) and the spend budgets (budget.py)
and writes only when all of them admit: a stale epoch writes nothing, a rate limit refuses before any budget is
looked at, a budget refuses without taking from any bucket, and a budget whose spend Redis does not hold asks
to be seeded (from the ledger) with nothing written. The settle script debits the token limits and replaces
the budget reservation by the real usage.
"""

from __future__ import annotations

import dataclasses

from . import budget, ratelimit
from .invalidation import SEED_EPOCH

SLICE_LUA = """
local function slice(t, first, last)
  local out = {}
  for i = first, last do out[#out + 1] = t[i] end
  return out
end
"""

# KEYS: the epoch, the n rate-limit buckets, the budget hashes. ARGV: the epoch held, n, the limits' and the
# budgets' arguments. Answer: {status, detail, detail, epoch} (statuses below).
ADMIT_LUA = (
    SEED_EPOCH
    + SLICE_LUA
    + ratelimit.LUA
    + budget.LUA
    + """
if epoch ~= ARGV[1] then return {-1, 0, 0, epoch} end
local n = tonumber(ARGV[2])
local limit_keys, limit_args = slice(KEYS, 2, n + 1), slice(ARGV, 3, 2 * n + 2)
local budget_keys, budget_args = slice(KEYS, n + 2, #KEYS), slice(ARGV, 2 * n + 3, #ARGV)
local now = limits_now()
local wait, where, requests = limits_check(limit_keys, limit_args, now)
if wait > 0 then return {0, wait, where, epoch} end
local unseeded = budgets_unseeded(budget_keys)
if unseeded > 0 then return {2, unseeded, 0, epoch} end
local over, what = budgets_over(budget_keys, budget_args)
if over > 0 then return {3, over, what, epoch} end
limits_take(limit_keys, limit_args, now, requests)
budgets_reserve(budget_keys, budget_args)
return {1, 0, 0, epoch}
"""
)
STALE, RATE_LIMITED, ADMITTED, UNSEEDED, OVER_BUDGET = -1, 0, 1, 2, 3

# KEYS: the n token-limited buckets, the budget hashes. ARGV: n, the debit's and the settle's arguments.
# Answer: the budgets' spend after it.
SETTLE_LUA = (
    SLICE_LUA
    + ratelimit.LUA
    + budget.LUA
    + """
local n = tonumber(ARGV[1])
if n > 0 then limits_debit(slice(KEYS, 1, n), slice(ARGV, 2, n + 2), limits_now()) end
return budgets_settle(slice(KEYS, n + 1, #KEYS), slice(ARGV, n + 3, #ARGV))
"""
)


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    epoch: int  # the epoch Redis holds
    status: int
    limited: str = ""  # RATE_LIMITED: what refused, e.g. "tenant requests"
    retry_after_s: int = 0
    budget: budget.Scope | None = None  # UNSEEDED: the one to seed; OVER_BUDGET: the one that refused
    what: str = ""  # OVER_BUDGET: "tokens" or "amount"


class Admission:
    def __init__(self, redis, prefix: str):
        self.epoch_key = f"{prefix}auth:epoch"
        self._admit = redis.register_script(ADMIT_LUA)
        self._settle = redis.register_script(SETTLE_LUA)

    async def admit(self, epoch: int | None, limits: list, reservation: budget.Reservation | None) -> Verdict:
        """One script: the epoch check, then every rate limit, then every budget (no limits, no reservation:
        only the epoch check)."""
        limit_keys, limit_args = ratelimit.admit_args(limits)
        budget_keys, budget_args = reservation.admit_args() if reservation else ([], [])
        keys = [self.epoch_key, *limit_keys, *budget_keys]
        args = ["" if epoch is None else str(epoch), len(limits), *limit_args, *budget_args]
        status, detail, where, seen = await self._admit(keys=keys, args=args)
        seen = int(seen)
        if status == RATE_LIMITED:
            limited, retry_after_s = ratelimit.refusal(limits, detail, where)
            return Verdict(seen, status, limited, retry_after_s)
        if status in (UNSEEDED, OVER_BUDGET):
            what = where.decode() if isinstance(where, bytes) else str(where)
            return Verdict(seen, status, budget=reservation.scopes[detail - 1], what=what)
        return Verdict(seen, status)

    async def settle(self, limits: list, reservation: budget.Reservation | None, tokens: int, cost) -> list:
        """One script: `tokens` debited from the token limits, the reservation (if any) replaced by the usage;
        returns the budgets' spend after it."""
        limit_keys, limit_args = ratelimit.debit_args(limits, tokens)
        budget_keys, budget_args = reservation.settle_args(tokens, cost) if reservation else ([], [])
        args = [len(limit_keys), *limit_args, *budget_args]
        return await self._settle(keys=[*limit_keys, *budget_keys], args=args)
