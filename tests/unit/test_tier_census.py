"""scripts/tier_census.py: test ids from a tier's log, container names from podman's and conmon's argv, and the
attribution of a real child process to the tier whose TF_TIER it inherited."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.unit.test_run_lanes import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import tier_census  # pylint: disable=wrong-import-position


@pytest.mark.parametrize(
    ("argv", "names", "value"),
    [
        (["podman", "run", "-d", "--name", "tf-spark-01", "img"], ("--name",), "tf-spark-01"),
        (["podman", "create", "--name=spark-01", "img"], ("--name",), "spark-01"),
        (["conmon", "--api-version", "1", "-c", "abc", "-n", "tf-lab-spark-1", "--exit-dir", "/x"], ("-n", "--name"),
         "tf-lab-spark-1"),
        (["podman", "start", "tf-spark-01"], ("--name",), ""),
        (["podman", "run", "--name"], ("--name",), ""),
    ],
)  # fmt: skip
def test_option_value(argv, names, value):
    assert tier_census.option_value(argv, *names) == value


def test_test_ids_keep_the_outcome_and_drop_the_relative_prefix_of_molecule_paths(tmp_path):
    log = tmp_path / "tier.log"
    log.write_text(
        "collected 3 items\nPASSED tests/a.py::test_x[1]\nSKIPPED [1] tests/a.py:9: why\n"
        "FAILED ../../molecule/default/tests/test_b.py::test_y[podman://tf-spark-01] - AssertionError\n"
    )
    assert tier_census.test_ids(log) == [
        "PASSED tests/a.py::test_x[1]",
        "FAILED molecule/default/tests/test_b.py::test_y[podman://tf-spark-01]",
    ]


def test_a_component_under_a_process_with_tf_tier_is_counted_once_for_that_tier(tmp_path):
    """redis-server rewrites its process title over its environment: the shell above it carries the tier."""
    census = tier_census.Census(interval=0.1)
    sock = tmp_path / "redis.sock"
    child = subprocess.Popen(  # a real component under a shell, the way a tier's make starts one
        ["bash", "-c", f"redis-server --port 0 --unixsocket {sock} --save '' --appendonly no & wait"],
        env={**os.environ, "TF_TIER": "tier-a"}, stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        census.scan()
        census.scan()
        assert census.of("tier-a") == {"redis-server": 1}
        assert census.of("tier-b") == {}
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=10)
