"""scripts/run_lanes.py with real make on a small Makefile: lanes side by side, every tier run after a failure, the
summary (PASS/FAIL, seconds, pytest totals, a failed tier's log tail), --fail-fast, one lane per tier, interrupts."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN_LANES = ROOT / "scripts/run_lanes.py"

MAKEFILE = """\
SHELL := /bin/bash
ok:
\t@echo "==== 3 passed, 1 skipped, 2 deselected in 0.50s ===="
broken:
\t@echo "the cause of the failure"
\t@echo "==== 1 failed, 4 passed in 0.20s ===="
\t@exit 2
slow:
\t@sleep $${SLOW:-1}; echo "==== 2 passed in 1.00s ===="
twice:
\t@echo "==== 1 passed in 0.1s ===="; echo "=== 2 passed, 1 error in 0.3s ===="
marker:
\t@date +%s.%N > $(OUT)/$@.$${LANE_TAG:-x}
\t@sleep 1
burn:
\t@python3 -c "import time; any(time.process_time() > 1.0 for _ in iter(int, 1))"
ids:
\t@echo "PASSED tests/x.py::test_a[1]"; echo "FAILED ../../molecule/m/tests/test_b.py::test_b"
starts:
\t@redis-server --port 0 --unixsocket $(OUT)/redis.sock --save '' --appendonly no >/dev/null & pid=$$!; \\
\t  sleep 2.5; kill $$pid; wait $$pid || true
hang:
\t@echo $$$$ > $(OUT)/hang.pid; sleep 600
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    return tmp_path


def run_lanes(project, *lanes, extra=(), timeout=60):
    args = [sys.executable, str(RUN_LANES), "--log-dir", str(project / "logs"), *extra]
    for name, tiers in lanes:
        args += ["--lane", name, tiers]
    return subprocess.run(
        args,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OUT": str(project), "MAKEFLAGS": ""},
        check=False,
    )


def summary_row(stdout, tier):
    table = stdout.split("=== tiers")[1].split("\nlane ")[0]
    rows = [line.split() for line in table.splitlines() if line.split()[1:2] == [tier]]
    assert len(rows) == 1, stdout
    return rows[0]


def test_a_failed_tier_stops_neither_lane_and_the_summary_names_it(project):
    proc = run_lanes(project, ("one", "broken ok"), ("two", "ok2 twice"))
    assert proc.returncode == 1
    # ok2 does not exist in the Makefile: make fails, and that tier is reported FAIL too.
    assert summary_row(proc.stdout, "broken")[:3] == ["one", "broken", "FAIL"]
    assert summary_row(proc.stdout, "ok")[:3] == ["one", "ok", "PASS"]
    assert summary_row(proc.stdout, "ok2")[:3] == ["two", "ok2", "FAIL"]
    assert summary_row(proc.stdout, "twice")[:3] == ["two", "twice", "PASS"]
    assert "=== broken FAILED: last" in proc.stdout
    assert "the cause of the failure" in proc.stdout
    assert "failed tiers: broken (FAIL) ok2 (FAIL)" in proc.stdout
    # pytest totals of every tier: ok 3p1s, broken 4p1f, twice 3p1e.
    assert proc.stdout.rstrip().splitlines()[-1] == "tests: 10 passed, 2 failed, 1 skipped"
    assert (project / "logs/broken.log").read_text().startswith("the cause of the failure")


def test_all_passing_lanes_exit_zero_with_seconds_per_tier(project):
    proc = run_lanes(project, ("one", "ok"), ("two", "slow"))
    assert proc.returncode == 0, proc.stdout
    assert float(summary_row(proc.stdout, "slow")[3]) >= 1
    assert "failed tiers" not in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == "tests: 5 passed, 0 failed, 1 skipped"


def test_each_tier_reports_the_cpu_of_its_own_processes_and_the_summary_the_machines(project):
    proc = run_lanes(project, ("one", "burn"), ("two", "slow"))
    assert proc.returncode == 0, proc.stdout
    # burn spends 1 CPU-second in a grandchild (make -> python): wait4 counts the tree; slow only sleeps.
    assert float(summary_row(proc.stdout, "burn")[4]) >= 1
    assert float(summary_row(proc.stdout, "slow")[4]) < 1
    machine = next(line for line in proc.stdout.splitlines() if line.startswith("machine CPU: "))
    busy, total = (float(v) for v in re.match(r"machine CPU: (\d+) CPU-s busy of (\d+)", machine).groups())
    assert 1 <= busy <= total, machine


def test_suite_json_holds_each_tiers_test_ids_and_the_real_components_it_started(project):
    proc = run_lanes(project, ("one", "ids"), ("two", "starts"))
    assert proc.returncode == 0, proc.stdout
    suite = json.loads((project / "logs/suite.json").read_text())
    assert suite["ids"]["tests"] == ["PASSED tests/x.py::test_a[1]", "FAILED molecule/m/tests/test_b.py::test_b"]
    assert suite["ids"]["components"] == {}
    # A real redis-server the tier started, seen in /proc and attributed by the TF_TIER run_lanes gives the tier.
    assert suite["starts"]["components"] == {"redis-server": 1}, proc.stdout
    assert suite["starts"]["lane"] == "two" and suite["starts"]["result"] == "PASS"
    assert "starts                       redis-server x1" in proc.stdout


def test_lanes_run_side_by_side(project):
    began = time.monotonic()
    proc = run_lanes(project, ("one", "marker"), ("two", "slow"), extra=())
    took = time.monotonic() - began
    assert proc.returncode == 0, proc.stdout
    # marker sleeps 1 s and slow 1 s: one after another would take at least 2 s.
    assert took < 1.9, (took, proc.stdout)


def test_fail_fast_starts_no_further_tier(project):
    proc = run_lanes(project, ("one", "broken ok"), extra=("--fail-fast",))
    assert proc.returncode == 1
    assert summary_row(proc.stdout, "ok")[:3] == ["one", "ok", "NOT"]
    assert not (project / "logs/ok.log").exists()


def test_a_tier_in_two_lanes_is_refused(project):
    proc = run_lanes(project, ("one", "ok"), ("two", "ok"))
    assert proc.returncode == 2
    assert "--lane two: tier ok is in more than one lane" in proc.stderr


def test_an_interrupt_ends_the_running_tiers_process_tree(project):
    proc = subprocess.Popen(
        [sys.executable, str(RUN_LANES), "--log-dir", "logs", "--lane", "a", "hang"],
        cwd=project,
        env={**os.environ, "OUT": str(project), "MAKEFLAGS": ""},
        stdout=subprocess.DEVNULL,
    )
    pid_file = project / "hang.pid"
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    shell = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 130
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(shell, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"the tier's shell {shell} still runs after the interrupt")


def test_make_test_lanes_hold_every_tier_once():
    """The Makefile's two lanes: every tier once, the kubelet scenarios in the clusters lane."""
    proc = subprocess.run(
        ["make", "-n", "--no-print-directory", "test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MAKEFLAGS": ""},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if "scripts/run_lanes.py" in line)
    parsed = {}
    for part in line.split("--lane ")[1:]:
        name, tiers = part.split(" ", 1)
        parsed[name] = tiers.strip().strip('"').split()
    assert set(parsed) == {"clusters", "services"}, line
    every = parsed["clusters"] + parsed["services"]
    assert len(every) == len(set(every))
    assert {"molecule-default", "test-e2e", "test-rehearsal"} <= set(parsed["clusters"])
    assert parsed["services"][:3] == ["lint", "sanity", "unit"]
