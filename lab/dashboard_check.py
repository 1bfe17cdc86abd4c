"""Run every query of the production Grafana dashboards against a real Prometheus scraping real components.

    python -m lab.dashboard_check --prometheus URL --dashboard FILE... --gateway URL --api-key-file F
        --limited-key-file F --target DEPLOYMENT=MODEL... [--scrape-interval S] [--ca-file CA]
Sends real traffic through the gateway first, twice, three scrape intervals apart: streamed chat completions per
model, one request the engine refuses (an error), and a burst on a key limited to a few requests per minute
(HTTP 429s). Then runs each panel query with Grafana's variables at query-time values (panels using
$deployment once per deployment, so every engine's metric names are proven) and each template variable's
label_values. Exits 1 naming every query that returned no number, except panels named with --not-on-this-hardware
(for example the framebuffer panel on a GB10-only cluster: GB10 has no framebuffer), which are listed as such.
--ca-file: the CA bundle an HTTPS gateway's certificate is checked against (the lab's Endpoint).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import pathlib
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "10m", "$tenant": ".*", "$node": ".*"}
LIMITED_BURST = 6


def post(url, data, headers=None, timeout=60):
    body = urllib.parse.urlencode(data).encode()
    request = urllib.request.Request(url, data=body, headers=headers or {})  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def query(prometheus, expr):
    try:
        return post(f"{prometheus}/api/v1/query", {"query": expr})["data"]["result"]
    except urllib.error.HTTPError as exc:
        raise QueryError(f"{exc.code}: {exc.read().decode(errors='replace')[:300]}") from exc


class QueryError(Exception):
    """Prometheus refused the query (a parse or execution error)."""


def label_values(prometheus, label, match):
    url = f"{prometheus}/api/v1/label/{label}/values?" + urllib.parse.urlencode({"match[]": match})
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - loopback
        return json.loads(response.read())["data"]


def numbers(result):
    values = (float(sample["value"][1]) for sample in result)
    return [v for v in values if math.isfinite(v)]


def chat(gateway, key, model, i, stream=True, max_tokens=32, context=None):
    """One chat completion through the gateway; returns the HTTP status (the stream is read to its end)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"Dashboard check request {i}: count to ten."}],
        "max_tokens": max_tokens,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{gateway}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120, context=context) as response:  # noqa: S310
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code


def send_traffic(gateway, key, limited_key, models, requests, context=None):
    statuses = {}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(chat, gateway, key, model, i, context=context) for model in models for i in range(requests)]
        for job in jobs:
            statuses[job.result()] = statuses.get(job.result(), 0) + 1
    # An error the engine answers (more tokens than its context holds): counted as an error by code.
    refused = chat(gateway, key, models[0], "too-long", stream=False, max_tokens=10**7, context=context)
    statuses[refused] = statuses.get(refused, 0) + 1
    for i in range(LIMITED_BURST):
        status = chat(gateway, limited_key, models[0], f"burst-{i}", stream=False, max_tokens=4, context=context)
        statuses[status] = statuses.get(status, 0) + 1
    return statuses


def panel_queries(dashboard, deployments):
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            if "$deployment" in expr:
                for deployment in deployments:
                    # A regex inside a PromQL string: regex-escaped, then its backslashes escaped for the string.
                    regex = re.escape(deployment).replace("\\", "\\\\")
                    yield f"{panel['title']} [{deployment}]", expr.replace("$deployment", regex)
            else:
                yield panel["title"], expr


def variable_queries(dashboard):
    for variable in dashboard["templating"]["list"]:
        match = re.fullmatch(r"label_values\((.+), *([a-z_]+)\)", variable.get("definition", ""))
        if match:
            yield variable["name"], match.group(2), match.group(1)


def check(prometheus, dashboards, deployments, not_here=()):
    """(number of queries, [each query without data], [panels skipped: not on this hardware])."""
    checked, empty, skipped = 0, [], []
    for dashboard in dashboards:
        for title, expr in panel_queries(dashboard, deployments):
            if any(title.startswith(prefix) for prefix in not_here):
                skipped.append(f"{dashboard['uid']} / {title}")
                continue
            checked += 1
            try:
                answered = numbers(query(prometheus, expr))
            except QueryError as exc:
                empty.append(f"{dashboard['uid']} / {title}: refused ({exc}): {expr}")
                continue
            if not answered:
                empty.append(f"{dashboard['uid']} / {title}: {expr}")
        for name, label, match in variable_queries(dashboard):
            checked += 1
            values = label_values(prometheus, label, match)
            wanted = deployments if name == "deployment" else values[:1]
            if not values or not set(wanted) <= set(values):
                empty.append(f"{dashboard['uid']} / variable {name}: label_values({match}, {label}) = {values}")
    return checked, empty, skipped


def wait_scraped(prometheus, deployments, timeout=90):
    deadline = time.monotonic() + timeout
    for expr in [f'up{{deployment="{d}"}} == 1' for d in deployments] + ['up{job=~"tokenfactory-gateway.*"} == 1']:
        while not query(prometheus, expr):
            if time.monotonic() > deadline:
                raise SystemExit(f"Prometheus never scraped: {expr}")
            time.sleep(0.5)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.dashboard_check")
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--dashboard", action="append", required=True, help="dashboard JSON file (repeatable)")
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--api-key-file", required=True)
    parser.add_argument("--limited-key-file", required=True, help="a key limited to a few requests per minute")
    parser.add_argument("--target", action="append", required=True, help="DEPLOYMENT=MODEL (repeatable)")
    parser.add_argument("--scrape-interval", type=float, default=2.0)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--ca-file", help="CA bundle for an HTTPS gateway (default: the system's trust store)")
    parser.add_argument(
        "--not-on-this-hardware",
        action="append",
        default=[],
        help="title prefix of a panel this hardware has no data for",
    )
    args = parser.parse_args(argv)
    targets = dict(t.split("=", 1) for t in args.target)
    wait_scraped(args.prometheus, list(targets))
    key = pathlib.Path(args.api_key_file).read_text().strip()
    limited = pathlib.Path(args.limited_key_file).read_text().strip()
    context = ssl.create_default_context(cafile=args.ca_file) if args.ca_file else None
    # Two rounds: label sets a first request creates are only in Prometheus from their first scrape on, so
    # rates need increments after that (a fresh gateway or engine has no series before its first request).
    statuses = {}
    for _round in range(2):
        sent = send_traffic(args.gateway, key, limited, list(targets.values()), args.requests, context)
        for status, count in sent.items():
            statuses[status] = statuses.get(status, 0) + count
        time.sleep(3 * args.scrape_interval)
    dashboards = [json.loads(pathlib.Path(path).read_text()) for path in args.dashboard]
    checked, empty, skipped = check(args.prometheus, dashboards, list(targets), args.not_on_this_hardware)
    print(
        json.dumps({"queries": checked, "without_data": empty, "not_on_this_hardware": skipped, "statuses": statuses})
    )
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
