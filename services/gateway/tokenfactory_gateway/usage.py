"""Usage and cost aggregation over the ledger, for the admin API and for a key's own view."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

from .errors import ApiError
from .store import parse_time

GROUPS = {
    "tenant": ("u.tenant",),
    "key": ("k.name", "u.key_id"),
    "model": ("u.model",),
    "deployment": ("u.deployment",),
}
OUTPUT_NAMES = {
    "u.tenant": "tenant",
    "u.key_id": "key_id",
    "k.name": "key_name",
    "u.model": "model",
    "u.deployment": "deployment",
}
BUCKETS = ("none", "minute", "hour", "day", "month")
FILTERS = {
    "tenant": "u.tenant",
    "key_id": "u.key_id",
    "key_name": "k.name",
    "model": "u.model",
    "deployment": "u.deployment",
}
DEFAULT_RANGE = datetime.timedelta(days=30)


def parse_query(query, allowed_groups, allowed_filters, forced: dict) -> dict:
    """Validate group_by/bucket/start/end/filters from a query string into a plan for `aggregate`."""
    groups = [g for g in query.get("group_by", "model").split(",") if g]
    bad = [g for g in groups if g not in allowed_groups]
    if bad:
        raise ApiError(400, f"group_by {bad} not allowed; choose from {sorted(allowed_groups)}", param="group_by")
    bucket = query.get("bucket", "none")
    if bucket not in BUCKETS:
        raise ApiError(400, f"bucket must be one of {list(BUCKETS)}, got {bucket!r}", param="bucket")
    end = parse_time(query.get("end"), "end") or datetime.datetime.now(datetime.UTC)
    start = parse_time(query.get("start"), "start") or end - DEFAULT_RANGE
    if start >= end:
        raise ApiError(400, "start must be before end", param="start")
    filters = {}
    for name, column in FILTERS.items():
        if name in forced:
            filters[column] = forced[name]
        elif query.get(name) and name in allowed_filters:
            filters[column] = query[name]
    if "u.key_id" in filters:
        try:
            filters["u.key_id"] = uuid.UUID(str(filters["u.key_id"]))
        except ValueError:
            raise ApiError(400, "key_id must be a UUID", param="key_id") from None
    return {"groups": groups, "bucket": bucket, "start": start, "end": end, "filters": filters}


async def aggregate(pool, plan) -> dict:
    columns = [c for g in plan["groups"] for c in GROUPS[g]]
    if plan["bucket"] != "none":
        columns.insert(0, f"date_trunc('{plan['bucket']}', u.started_at)")
    args = [plan["start"], plan["end"]]
    where = ["u.started_at >= $1", "u.started_at < $2"]
    for column, value in plan["filters"].items():
        args.append(value)
        where.append(f"{column} = ${len(args)}")
    select = [f"{c} AS c{i}" for i, c in enumerate(columns)]
    group = [*columns, "u.currency"]
    # Only whitelisted column names are interpolated; every value is a bind parameter.
    sql = f"""SELECT {", ".join([*select, "u.currency"])}, count(*) AS requests,
        count(*) FILTER (WHERE u.status >= 400) AS errors,
        sum(u.prompt_tokens) AS prompt_tokens, sum(u.completion_tokens) AS completion_tokens, sum(u.cost) AS cost
        FROM usage_records u LEFT JOIN api_keys k ON k.id = u.key_id
        WHERE {" AND ".join(where)} GROUP BY {", ".join(group)} ORDER BY {", ".join(group)}"""  # noqa: S608
    rows = await pool.fetch(sql, *args)
    data, totals = [], {}
    for row in rows:
        item = {}
        for i, column in enumerate(columns):
            value = row[f"c{i}"]
            name = "period" if column.startswith("date_trunc") else OUTPUT_NAMES[column]
            item[name] = value.isoformat() if name == "period" else (str(value) if name == "key_id" else value)
        counts = _counts(row)
        item.update(currency=row["currency"], **counts)
        data.append(item)
        total = totals.setdefault(
            row["currency"],
            {"requests": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": Decimal(0)},
        )
        for name in ("requests", "errors", "prompt_tokens", "completion_tokens"):
            total[name] += counts[name]
        total["cost"] += Decimal(counts["cost"])
    return {
        "object": "usage",
        "start": plan["start"].isoformat(),
        "end": plan["end"].isoformat(),
        "group_by": plan["groups"],
        "bucket": plan["bucket"],
        "data": data,
        "totals": [
            {"currency": c, **{k: (str(v) if k == "cost" else v) for k, v in t.items()}}
            for c, t in sorted(totals.items())
        ],
    }


def _counts(row) -> dict:
    return {
        "requests": row["requests"],
        "errors": row["errors"],
        "prompt_tokens": int(row["prompt_tokens"] or 0),
        "completion_tokens": int(row["completion_tokens"] or 0),
        "cost": str(row["cost"] or Decimal(0)),
    }
