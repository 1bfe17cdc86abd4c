"""After playbooks/upgrade.yml (the side effect) took the real node from v1.36.2 to v1.36.3: versions, static pods,
workloads, re-run."""

import pytest

from tests.host_roles import upgrade_checks as checks

pytestmark = pytest.mark.molecule

NODE = "tf-spark-1"


def test_node_reports_the_new_kubelet_and_is_schedulable(host):
    checks.assert_node_upgraded(host, NODE)


def test_node_binaries_are_the_new_version(host):
    checks.assert_binaries_upgraded(host)


@pytest.mark.parametrize("component", checks.CONTROL_PLANE)
def test_control_plane_static_pod_runs_the_new_image(host, component):
    checks.assert_static_pod_upgraded(host, NODE, component)


def test_cluster_addons_follow(host):
    checks.assert_addons_upgraded(host, nodes=1)


def test_deployment_pod_was_rescheduled_and_daemonset_pod_kept_running(host):
    checks.assert_workloads_moved_and_kept(host, deployment_node=NODE)


def test_second_run_changes_nothing():
    print(f"second run: {checks.assert_second_run_changes_nothing([NODE]):.0f} s")
