"""The Token Factory domain facts the gateway reads objects with (generated from the collection's domain schema).

domain.json is written by scripts/write-gateway-domain from plugins/module_utils/tokenfactory/domain.py; a unit
test of the collection fails when it is stale, so the gateway and the modules read and write the same shape.
"""

from __future__ import annotations

import json
import pathlib

_DATA = json.loads((pathlib.Path(__file__).parent / "domain.json").read_text())

GROUP = _DATA["group"]
VERSION = _DATA["version"]
PLURALS = _DATA["kinds"]  # kind -> plural, for Model and ModelDeployment
ROUTABLE_PHASES = frozenset(_DATA["routablePhases"])
PER_MINUTE_MAX = _DATA["perMinuteMax"]  # every limit: 0..PER_MINUTE_MAX per minute
UNLIMITED = _DATA["unlimited"]
LIMIT_FIELDS = _DATA["limitFields"]  # admin API name -> ModelDeployment spec field
DEPLOYMENT_LIMIT_SCOPES = _DATA["deploymentLimitScopes"]  # per_key -> perKey, ...
PRICING_FIELDS = _DATA["pricingFields"]
CURRENCY_DEFAULT = _DATA["currencyDefault"]
FIELDS = _DATA["fields"]
ENGINE_DEFAULT = _DATA["engineDefault"]
ENGINES = _DATA["engines"]  # engine -> the capabilities its plugin declares (engines/<name>.py)
BUDGET_PERIODS = tuple(_DATA["budgetPeriods"])  # calendar periods (UTC) a spend budget counts over
BUDGET_PERIOD_DEFAULT = _DATA["budgetPeriodDefault"]
BUDGET_TOKENS_MAX = _DATA["budgetTokensMax"]
BUDGET_FIELDS = _DATA["budgetFields"]  # admin API names of a budget's fields


def running_usage(engine: str) -> bool:
    """Whether the engine's OpenAI server takes stream_options.continuous_usage_stats (usage on every chunk).

    An engine this copy does not list (a newer collection's) gets False: include_usage alone, which every
    OpenAI-compatible server takes.
    """
    return bool(ENGINES.get(engine, {}).get("runningUsage", False))
