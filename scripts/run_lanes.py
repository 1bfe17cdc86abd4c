"""Run test tiers (make targets) in lanes side by side: the tiers of one lane one after another, the lanes at once.

Each tier's output goes to its own log (LOG_DIR/<tier>.log); one line is printed when a tier ends. A failing tier
stops nothing: every tier of every lane runs (unless --fail-fast), then a summary lists each tier with PASS/FAIL and
its seconds, the tail of each failed tier's log, and the pytest totals of all tiers. Exit status 1 if any tier failed.

  python scripts/run_lanes.py --log-dir reports/tiers --lane clusters "molecule-default test-e2e" --lane services "unit"
"""

import argparse
import contextlib
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

# pytest's closing line, e.g. "==== 12 passed, 1 skipped, 2 deselected in 30.21s ====".
PYTEST_CLOSING = re.compile(r"^=+ (?P<counts>(?:\d+ \w+(?:, )?)+) in [\d.]+s(?: \([\d:]+\))? =+$")
PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
COUNTED = ("passed", "failed", "skipped", "error")


def pytest_counts(log: pathlib.Path) -> dict:
    """Sum of every pytest closing line in a tier's log (a tier may run pytest more than once)."""
    totals = dict.fromkeys(COUNTED, 0)
    with log.open(errors="replace") as lines:
        for line in lines:
            match = PYTEST_CLOSING.match(line.strip())
            if not match:
                continue
            for number, word in PYTEST_COUNT.findall(match["counts"]):
                word = "error" if word.startswith("error") else word
                if word in totals:
                    totals[word] += int(number)
    return totals


def describe(counts: dict) -> str:
    return ", ".join(f"{counts[w]} {w}" for w in COUNTED if counts[w]) or "no pytest summary"


class Lane(threading.Thread):
    def __init__(self, name, tiers, runner):
        super().__init__(name=name, daemon=True)
        self.tiers, self.runner, self.results = tiers, runner, []

    def run(self):
        for tier in self.tiers:
            if self.runner.stopping.is_set():
                self.results.append((tier, "NOT RUN", 0.0, dict.fromkeys(COUNTED, 0)))
                continue
            self.results.append(self.runner.run_tier(self.name, tier))


class Runner:
    def __init__(self, log_dir: pathlib.Path, make: list, fail_fast: bool, tail: int):
        self.log_dir, self.make, self.fail_fast, self.tail = log_dir, make, fail_fast, tail
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.children = set()
        self.start = time.monotonic()

    def say(self, text):
        with self.lock:
            print(f"[{time.monotonic() - self.start:7.0f} s] {text}", flush=True)

    def run_tier(self, lane, tier):
        log = self.log_dir / f"{tier}.log"
        self.say(f"{lane}: {tier} started (log {log})")
        began = time.monotonic()
        with log.open("w") as out:
            # Own process group, so an interrupt ends the tier's whole tree (podman, kubelets' helpers, pytest).
            child = subprocess.Popen(  # noqa: S603 - make and the Makefile's own tier names
                [*self.make, tier], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            with self.lock:
                self.children.add(child)
            rc = child.wait()
            with self.lock:
                self.children.discard(child)
        seconds = time.monotonic() - began
        counts = pytest_counts(log)
        verdict = "PASS" if rc == 0 else "FAIL"
        self.say(f"{lane}: {tier} {verdict} in {seconds:.0f} s ({describe(counts)}; exit {rc})")
        if rc != 0 and self.fail_fast:
            self.stopping.set()
        return tier, verdict, seconds, counts

    def stop_children(self, *_):
        self.stopping.set()
        with self.lock:
            for child in self.children:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
        raise SystemExit(130)


def summary(runner, lanes) -> int:
    rows = [(lane.name, *result) for lane in lanes for result in lane.results]
    totals = dict.fromkeys(COUNTED, 0)
    print("\n=== tiers (lane, tier, result, seconds, pytest)")
    for lane_name, tier, verdict, seconds, counts in rows:
        print(f"{lane_name:10} {tier:28} {verdict:8} {seconds:7.0f}  {describe(counts)}")
        for word in COUNTED:
            totals[word] += counts[word]
    for lane in lanes:
        print(f"lane {lane.name}: {sum(r[2] for r in lane.results):.0f} s of tiers")
    print(f"wall time: {time.monotonic() - runner.start:.0f} s")
    failed = [(row[1], row[2]) for row in rows if row[2] != "PASS"]
    for tier, verdict in failed:
        if verdict != "FAIL":
            continue
        log = runner.log_dir / f"{tier}.log"
        lines = log.read_text(errors="replace").splitlines()[-runner.tail :]
        print(f"\n=== {tier} FAILED: last {len(lines)} lines of {log}")
        print("\n".join(lines))
    if failed:
        print("\nfailed tiers: " + " ".join(f"{t} ({v})" for t, v in failed))
    # Plain closing line with the pytest totals of every tier.
    print(f"tests: {totals['passed']} passed, {totals['failed'] + totals['error']} failed, {totals['skipped']} skipped")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lane", nargs=2, action="append", metavar=("NAME", "TIERS"), required=True)
    parser.add_argument("--log-dir", type=pathlib.Path, default=pathlib.Path("reports/tiers"))
    parser.add_argument("--make", default=os.environ.get("MAKE", "make"), help="make command (default: $MAKE)")
    parser.add_argument("--fail-fast", action="store_true", help="start no further tier after a failure")
    parser.add_argument("--tail", type=int, default=150, help="lines of a failed tier's log to print")
    args = parser.parse_args()
    seen = set()
    for name, tiers in args.lane:
        for tier in tiers.split():
            if tier in seen:
                parser.error(f"--lane {name}: tier {tier} is in more than one lane")
            seen.add(tier)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.log_dir, [args.make, "--no-print-directory"], args.fail_fast, args.tail)
    signal.signal(signal.SIGTERM, runner.stop_children)
    signal.signal(signal.SIGINT, runner.stop_children)
    lanes = [Lane(name, tiers.split(), runner) for name, tiers in args.lane]
    for name, tiers in args.lane:
        runner.say(f"lane {name}: {tiers}")
    for lane in lanes:
        lane.start()
    for lane in lanes:
        while lane.is_alive():
            lane.join(timeout=1)
    return summary(runner, lanes)


if __name__ == "__main__":
    sys.exit(main())
