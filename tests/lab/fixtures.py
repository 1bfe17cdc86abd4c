"""Pytest fixtures: real control plane + kwok nodes (marker `lab`). Loaded by tests/conftest.py."""

import os
import uuid

import pytest

from lab.k8s.cluster import LabCluster


def _unique_name(profile: str) -> str:
    return f"pytest-{os.getpid()}-{profile}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def lab_cluster():
    """A started spark-single cluster shared by the session; stopped at the end (and on crash/SIGTERM)."""
    cluster = LabCluster("spark-single", _unique_name("spark-single"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def lab_cluster_factory():
    """Call with a profile name to get a started LabCluster; all are stopped when the test ends."""
    started = []

    def make(profile: str = "spark-single") -> LabCluster:
        cluster = LabCluster(profile, _unique_name(profile))
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()
