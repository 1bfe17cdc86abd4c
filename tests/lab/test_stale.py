"""Leftovers of test processes that died are pruned; running or CLI clusters are left alone (no cluster needed)."""

import json
import os

from lab.k8s import cluster


def fake_cluster_dir(root, name, pid):
    state_dir = root / name
    (state_dir / "etcd").mkdir(parents=True)
    state = {"procs": {"etcd": {"pid": pid, "exe": "/nonexistent/etcd"}}}
    (state_dir / "state.json").write_text(json.dumps(state))
    return state_dir


def test_prune_stale_removes_only_dead_test_clusters(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_LAB_ROOT", str(tmp_path))
    dead_pid = 2**22 + 1  # above pid_max's default range: never a live process
    dead = fake_cluster_dir(tmp_path, f"pytest-{dead_pid}-spark-single-abc123", dead_pid)
    mine = fake_cluster_dir(tmp_path, f"pytest-{os.getpid()}-spark-single-def456", os.getpid())
    named = fake_cluster_dir(tmp_path, "dev", dead_pid)

    cluster.prune_stale()

    assert not dead.exists()
    assert mine.exists() and named.exists()
