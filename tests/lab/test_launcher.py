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

from tests.lab import bins, processes
from tests.lab.cluster import LabCluster, lab_root
from tests.lab.wait import wait_until

pytestmark = pytest.mark.lab


def run_cli(*args, check=True):
    argv = [sys.executable, "-m", "tests.lab", *args]
    result = subprocess.run(argv, cwd=bins.REPO_ROOT, capture_output=True, text=True, check=False)
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
        from tests.lab.cluster import LabCluster
        cluster = LabCluster("spark-single", {name!r}).start()
        print(json.dumps(cluster.status()["components"]), flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], cwd=bins.REPO_ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
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
    subprocess.run([sys.executable, "-m", "tests.lab", "down", "--name", name], cwd=bins.REPO_ROOT, check=True)


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
