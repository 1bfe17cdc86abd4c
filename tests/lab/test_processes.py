"""processes.alive: children started here are judged by their Popen, other pids by /proc (no lab binaries needed)."""

import os
import shutil
import signal
import subprocess

from lab import processes
from lab.wait import wait_until

SLEEP = shutil.which("sleep")


def test_own_child_is_judged_by_popen_not_by_its_cmdline(tmp_path):
    # Right after Popen returns, the child's /proc cmdline can still be empty (execve not finished), so
    # a cmdline comparison would call it dead; its Popen knows better.
    pid = processes.spawn([SLEEP, "30"], tmp_path / "sleep.log", tie_to_parent=True)
    assert processes.alive(pid, "/not/what/it/runs")
    assert processes.exit_status(pid) == "running"
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: not processes.alive(pid, SLEEP), timeout=10, what="the killed child to be reaped")
    assert processes.exit_status(pid) == "killed by SIGKILL"


def test_other_pid_must_run_the_recorded_exe(tmp_path):
    # A pid read from a state file may have been reused by another program: the exe guards against that.
    other = subprocess.Popen([SLEEP, "30"])
    try:
        # Not started through processes.spawn, so judged by /proc: wait out the moment its cmdline is still empty.
        wait_until(lambda: processes.alive(other.pid, SLEEP), timeout=10, what="sleep's cmdline in /proc")
        assert not processes.alive(other.pid, "/usr/bin/something-else")
        assert processes.exit_status(other.pid).startswith("unknown")
    finally:
        other.kill()
        other.wait()
    assert not processes.alive(other.pid, SLEEP)
