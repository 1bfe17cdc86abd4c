"""The launcher itself: detached CLI clusters, teardown when the owner dies, no collisions between clusters."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid

import pytest

from lab import processes
from lab.k8s import bins
from lab.k8s.cluster import LabCluster, LabError
from lab.paths import REPO_ROOT, lab_root
from lab.wait import wait_until

pytestmark = pytest.mark.lab


def run_cli(*args, check=True):
    argv = [sys.executable, "-m", "lab", *args]
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert not check or result.returncode == 0, f"{args} failed ({result.returncode}):\n{result.stderr}"
    return result


def test_cli_up_status_down(lab_cluster):
    name = f"cli-{uuid.uuid4().hex[:6]}"
    try:
        up = run_cli("up", "--profile", "x86-h100", "--name", name)
        kubeconfig = up.stdout.strip()
        assert kubeconfig == str(lab_root() / name / "admin.kubeconfig")

        status = json.loads(run_cli("status", "--name", name, "--profile", "x86-h100").stdout)
        assert status["running"] and status["server"] != lab_cluster.server  # no collision with the session lab
        assert set(status["components"]) == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        }
        assert all(c["rss_bytes"] > 0 for c in status["components"].values())

        nodes = subprocess.run(
            [str(bins.bin_dir() / "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "-o", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (node,) = json.loads(nodes)["items"]
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"

        again = run_cli("up", "--profile", "x86-h100", "--name", name, check=False)
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        run_cli("down", "--name", name)
    stopped = run_cli("status", "--name", name, check=False)
    assert stopped.returncode == 3
    assert not (lab_root() / name).exists()
    for component, proc in status["components"].items():
        assert not processes.alive(proc["pid"], str(bins.bin_dir() / component))


def test_components_die_with_the_test_process(tmp_path):
    """A test run killed with SIGKILL (no atexit, no finalizers) must not leak control-plane processes."""
    name = f"owner-{uuid.uuid4().hex[:6]}"
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from lab.k8s.cluster import LabCluster
        cluster = LabCluster("spark-single", {name!r}).start()
        print(json.dumps(cluster.status()["components"]), flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        components = json.loads(owner.stdout.readline())
        assert all(c["alive"] for c in components.values())
        exes = {c["pid"]: str(bins.bin_dir() / component) for component, c in components.items()}
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait()
    wait_until(
        lambda: not any(processes.alive(pid, exe) for pid, exe in exes.items()),
        timeout=15,
        what="control-plane processes to die with their owner",
    )
    subprocess.run([sys.executable, "-m", "lab", "down", "--name", name], cwd=REPO_ROOT, check=True)


def test_retries_when_a_port_is_taken(monkeypatch):
    """Another process binding the apiserver's port between choice and use costs one retry, not a failure."""
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    choices = iter([None, None, blocker.getsockname()[1]])  # etcd, etcd-peer, apiserver of attempt 1
    real_free_port = processes.free_port
    monkeypatch.setattr(processes, "free_port", lambda: next(choices, None) or real_free_port())
    with blocker, LabCluster("spark-single", f"pytest-{os.getpid()}-retry-{uuid.uuid4().hex[:6]}") as lab:
        assert lab.server != f"https://127.0.0.1:{blocker.getsockname()[1]}"
        assert lab.status()["running"]


def test_retries_a_component_killed_before_ready(monkeypatch, capsys):
    """A SIGKILL from outside during start-up (OOM killer, stray cleanup) costs one retry, and says so."""
    real_spawn = processes.spawn
    killed = []

    def spawn_and_kill_first_apiserver(argv, log_path, *, tie_to_parent):
        pid = real_spawn(argv, log_path, tie_to_parent=tie_to_parent)
        if argv[0].endswith("/kube-apiserver") and not killed:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return pid

    monkeypatch.setattr(processes, "spawn", spawn_and_kill_first_apiserver)
    with LabCluster("spark-single", f"pytest-{os.getpid()}-killed-{uuid.uuid4().hex[:6]}") as lab:
        assert lab.status()["running"]
        assert lab.status()["components"]["kube-apiserver"]["pid"] != killed[0]
    retried = "start attempt 1 failed, retrying: lab {}: kube-apiserver (killed by SIGKILL) exited while waiting"
    assert retried.format(lab.name) in capsys.readouterr().err


def test_a_component_failing_on_its_own_is_not_retried(monkeypatch):
    """An exit with the component's own error (here: a bad flag) fails at once with its exit code and log."""
    real_spawn = processes.spawn
    apiservers = []

    def spawn_with_bad_flag(argv, log_path, *, tie_to_parent):
        if argv[0].endswith("/kube-apiserver"):
            apiservers.append(argv[0])
            argv = [*argv, "--no-such-flag"]
        return real_spawn(argv, log_path, tie_to_parent=tie_to_parent)

    monkeypatch.setattr(processes, "spawn", spawn_with_bad_flag)
    lab = LabCluster("spark-single", f"pytest-{os.getpid()}-badflag-{uuid.uuid4().hex[:6]}")
    with pytest.raises(LabError, match=r"kube-apiserver \(exit code 1\) exited") as err:
        lab.start(timeout=60)
    assert "unknown flag: --no-such-flag" in str(err.value)
    assert len(apiservers) == 1
    lab.stop()
