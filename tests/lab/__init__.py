"""Real Kubernetes control plane (Go-built binaries) with kwok-simulated DGX Spark nodes, for tests."""

from tests.lab.cluster import LabCluster, LabError

__all__ = ["LabCluster", "LabError"]
