"""Poll the Kubernetes API server while a node is upgraded: one JSON line per request, then the window's numbers.

    python -m lab.api_poller --kubeconfig FILE --node NAME --out polls.jsonl [--interval 0.5]

Each poll is a GET of Node NAME with the kubeconfig's credentials (authentication, authorization and etcd, not only
/readyz), recorded as {"t", "ok", "ms"} plus the node's state (cordoned, Ready, kubelet version) or the error.
Runs until SIGTERM. window() reads the lines back: the stretch from the last poll before NAME was cordoned to the
first poll that saw it back (Ready, schedulable, on the target version), with its polls, failures and longest gap.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pathlib
import signal
import sys
import time

# A request slower than this counts as a failure (the API server did not answer in time).
REQUEST_TIMEOUT_S = 5.0


def node_state(node: dict) -> dict:
    conditions = node.get("status", {}).get("conditions") or []
    return {
        "cordoned": bool(node.get("spec", {}).get("unschedulable")),
        "ready": next((c["status"] == "True" for c in conditions if c["type"] == "Ready"), False),
        "kubelet": node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", ""),
    }


def poll_once(read_node) -> dict:
    """One GET through read_node() (returns the Node as a dict or raises); the record of it."""
    started = time.time()
    try:
        node = read_node()
    except Exception as err:  # any failure to answer is what we count
        record = {"ok": False, "error": f"{type(err).__name__}: {err}"[:300]}
    else:
        record = {"ok": True, **node_state(node)}
    return {"t": round(started, 3), "ms": round((time.time() - started) * 1000, 1), **record}


def kubernetes_reader(kubeconfig: str, node: str):
    # Imported here: only the polling process needs the client.
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))

    def read_node():
        response = api.read_node(node, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
        return json.loads(response.data)

    return read_node


def run(read_node, out: pathlib.Path, interval: float) -> None:
    """Poll every `interval` seconds (from one request's start to the next) until stopped; flush each line."""
    with out.open("a") as lines:
        while True:
            record = poll_once(read_node)
            lines.write(json.dumps(record) + "\n")
            lines.flush()
            time.sleep(max(0.0, record["t"] + interval - time.time()))


@dataclasses.dataclass
class Window:
    start: float
    end: float
    polls: int
    failures: list[dict]
    longest_gap_s: float
    failures_before: int

    @property
    def seconds(self) -> float:
        return self.end - self.start


def read_polls(path: pathlib.Path) -> list[dict]:
    return sorted((json.loads(line) for line in path.read_text().splitlines() if line.strip()), key=lambda p: p["t"])


def window(polls: list[dict], version: str) -> Window | None:
    """The node's upgrade as the polls saw it; None when they never saw it cordoned and then back on `version`.

    Starts at the last answered poll before the first one that saw the node cordoned (a failure after that poll
    may already fall in the drain), ends at the first answered poll that saw it Ready, schedulable and on `version`.
    """
    answered = [i for i, p in enumerate(polls) if p["ok"]]
    cordoned = next((i for i in answered if polls[i]["cordoned"]), None)
    if cordoned is None:
        return None
    first = max((i for i in answered if i < cordoned), default=0)
    back = next(
        (
            i
            for i in answered
            if i > cordoned and not polls[i]["cordoned"] and polls[i]["ready"] and polls[i]["kubelet"] == version
        ),
        None,
    )
    if back is None:
        return None
    inside = polls[first : back + 1]
    times = [p["t"] for p in inside if p["ok"]]
    return Window(
        start=polls[first]["t"],
        end=polls[back]["t"],
        polls=len(inside),
        failures=[p for p in inside if not p["ok"]],
        longest_gap_s=max((b - a for a, b in itertools.pairwise(times)), default=0.0),
        failures_before=sum(1 for p in polls[:first] if not p["ok"]),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.api_poller", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", required=True, help="the Node to GET (the one being upgraded)")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="JSON lines, appended")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between request starts (default 0.5)")
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error(f"--interval must be a positive number of seconds; got {args.interval}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(kubernetes_reader(args.kubeconfig, args.node), args.out, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
