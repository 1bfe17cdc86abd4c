"""Run the production Grafana dashboard's queries against a real Prometheus scraping the real engine.

    python -m lab.dashboard_check --dashboard FILE --prometheus URL --engine URL --model NAME --deployment NAME
Waits for a first scrape, sends a few real chat completions, waits three scrape intervals, then runs every
panel query with Grafana's variables at query-time values; exits 1 naming each query that returned no number.
"""

import argparse
import concurrent.futures
import json
import math
import pathlib
import sys
import time
import urllib.parse
import urllib.request

GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "10m", "$deployment": ".*"}


def post(url, data, json_body=False, timeout=60):
    if json_body:
        body, ctype = json.dumps(data).encode(), "application/json"
    else:
        body, ctype = urllib.parse.urlencode(data).encode(), "application/x-www-form-urlencoded"
    request = urllib.request.Request(url, data=body, headers={"Content-Type": ctype})  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def query(prometheus, expr):
    return post(f"{prometheus}/api/v1/query", {"query": expr})["data"]["result"]


def numbers(result):
    values = (float(sample["value"][1]) for sample in result)
    return [v for v in values if math.isfinite(v)]


def chat(engine, model, i):
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"Lab request {i}: count to ten."}],
        "max_tokens": 32,
    }
    return post(f"{engine}/v1/chat/completions", body, json_body=True)["usage"]["completion_tokens"]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.dashboard_check")
    for opt in ("--dashboard", "--prometheus", "--engine", "--model", "--deployment"):
        parser.add_argument(opt, required=True)
    parser.add_argument("--scrape-interval", type=float, default=2.0)
    parser.add_argument("--requests", type=int, default=8)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + 60
    while not query(args.prometheus, f'up{{deployment="{args.deployment}"}} == 1'):
        if time.monotonic() > deadline:
            raise SystemExit(f"Prometheus never scraped the engine of {args.deployment}")
        time.sleep(0.5)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        tokens = sum(pool.map(lambda i: chat(args.engine, args.model, i), range(args.requests)))
    time.sleep(3 * args.scrape_interval)
    dashboard = json.loads(pathlib.Path(args.dashboard).read_text())
    checked, empty = 0, []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            checked += 1
            if not numbers(query(args.prometheus, expr)):
                empty.append(f"{panel['title']}: {target['expr']}")
    print(
        json.dumps({"queries": checked, "without_data": empty, "requests": args.requests, "completion_tokens": tokens})
    )
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
