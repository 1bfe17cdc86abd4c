"""Run test tiers (make targets) in lanes side by side: the tiers of one lane one after another, the lanes at once.

Each tier's output goes to its own log (LOG_DIR/<tier>.log); one line is printed when a tier ends. A failing tier
stops nothing: every tier of every lane runs (unless --fail-fast), then a summary lists each tier with PASS/FAIL, its
seconds and the CPU seconds of its own processes, the tail of each failed tier's log, the machine's CPU over the run
(busy, the tiers' own share, the rest: podman hosts' kubelets, engines, daemons) and the pytest totals of all tiers.
LOG_DIR/suite.json records per tier every test id with its outcome and the real components it started
(tier_census.py); scripts/suite_diff.py compares two of them. Exit status 1 if any tier failed.

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

import tier_census

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


def machine_cpu() -> tuple:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat (busy: all but idle and iowait)."""
    fields = [int(v) for v in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    ticks = os.sysconf("SC_CLK_TCK")
    total = sum(fields)
    return (total - fields[3] - fields[4]) / ticks, total / ticks


def describe(counts: dict) -> str:
    return ", ".join(f"{counts[w]} {w}" for w in COUNTED if counts[w]) or "no pytest summary"


class Lane(threading.Thread):
    def __init__(self, name, tiers, runner):
        super().__init__(name=name, daemon=True)
        self.tiers, self.runner, self.results = tiers, runner, []

    def run(self):
        for tier in self.tiers:
            if self.runner.stopping.is_set():
                self.results.append((tier, "NOT RUN", 0.0, 0.0, dict.fromkeys(COUNTED, 0)))
                continue
            self.results.append(self.runner.run_tier(self.name, tier))


class Runner:
    def __init__(self, log_dir: pathlib.Path, make: list, fail_fast: bool, tail: int):
        self.log_dir, self.make, self.fail_fast, self.tail = log_dir, make, fail_fast, tail
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.children = set()
        self.start = time.monotonic()
        self.cpu_start = machine_cpu()
        self.census = tier_census.Census()

    def say(self, text):
        with self.lock:
            print(f"[{time.monotonic() - self.start:7.0f} s] {text}", flush=True)

    def run_tier(self, lane, tier):
        log = self.log_dir / f"{tier}.log"
        self.say(f"{lane}: {tier} started (log {log})")
        began = time.monotonic()
        with log.open("w") as out:
            # Own process group, so an interrupt ends the tier's whole tree (podman, kubelets' helpers, pytest).
            # TF_TIER marks the tier's processes for the census; -rA lists every test id in pytest's summary.
            addopts = f"{os.environ.get('PYTEST_ADDOPTS', '')} -rA".strip()
            env = {**os.environ, "TF_TIER": tier, "PYTEST_ADDOPTS": addopts}
            child = subprocess.Popen(  # noqa: S603 - make and the Makefile's own tier names
                [*self.make, tier], stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
            with self.lock:
                self.children.add(child)
            # wait4: the CPU of the tier's tree (every descendant it waited for; not the podman hosts' processes,
            # which conmon holds outside it).
            _pid, status, usage = os.wait4(child.pid, 0)
            child.returncode = rc = os.waitstatus_to_exitcode(status)
            with self.lock:
                self.children.discard(child)
        seconds = time.monotonic() - began
        cpu = usage.ru_utime + usage.ru_stime
        counts = pytest_counts(log)
        verdict = "PASS" if rc == 0 else "FAIL"
        self.say(f"{lane}: {tier} {verdict} in {seconds:.0f} s, {cpu:.0f} CPU-s ({describe(counts)}; exit {rc})")
        if rc != 0 and self.fail_fast:
            self.stopping.set()
        return tier, verdict, seconds, cpu, counts

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
    print("\n=== tiers (lane, tier, result, seconds, CPU seconds of its own processes, pytest)")
    for lane_name, tier, verdict, seconds, cpu, counts in rows:
        print(f"{lane_name:10} {tier:28} {verdict:8} {seconds:7.0f} {cpu:7.0f}  {describe(counts)}")
        for word in COUNTED:
            totals[word] += counts[word]
    for lane in lanes:
        print(f"lane {lane.name}: {sum(r[2] for r in lane.results):.0f} s of tiers")
    wall = time.monotonic() - runner.start
    print(f"wall time: {wall:.0f} s")
    busy, total = (now - then for now, then in zip(machine_cpu(), runner.cpu_start, strict=True))
    own = sum(row[4] for row in rows)
    print(
        f"machine CPU: {busy:.0f} CPU-s busy of {total:.0f} ({100 * busy / total if total else 0:.0f} % of "
        f"{os.cpu_count()} cores); the tiers' own processes {own:.0f}, the rest {busy - own:.0f} (podman hosts' "
        "kubelets, API servers, engines; daemons; anything else running)"
    )
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
    tiers = {
        row[1]: {
            "lane": row[0],
            "result": row[2],
            "seconds": round(row[3]),
            "cpu_seconds": round(row[4]),
            "tests": tier_census.test_ids(runner.log_dir / f"{row[1]}.log") if row[2] != "NOT RUN" else [],
            "components": runner.census.of(row[1]),
        }
        for row in rows
    }
    tier_census.write(runner.log_dir / "suite.json", tiers)
    print(f"\n=== real components started (tier: component x starts; {runner.log_dir / 'suite.json'} has the test ids)")
    for tier, record in tiers.items():
        if record["components"]:
            print(f"{tier:28} " + ", ".join(f"{name} x{count}" for name, count in record["components"].items()))
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
    runner.census.start()
    for lane in lanes:
        lane.start()
    for lane in lanes:
        while lane.is_alive():
            lane.join(timeout=1)
    return summary(runner, lanes)


if __name__ == "__main__":
    sys.exit(main())
