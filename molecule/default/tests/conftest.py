"""The pair's two real nodes as testinfra hosts (kubectl on the first one uses /etc/kubernetes/admin.conf)."""

import pytest
import testinfra

FIRST, SECOND = "tf-spark-01", "tf-spark-02"


@pytest.fixture(scope="module")
def first():
    """The control-plane node."""
    return testinfra.get_host(f"podman://{FIRST}")


@pytest.fixture(scope="module")
def second():
    """The node that joined as a worker."""
    return testinfra.get_host(f"podman://{SECOND}")
