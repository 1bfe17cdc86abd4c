"""The pair after playbooks/upgrade.yml took it from v1.36.2 to v1.36.3 (side effect upgrade.yml), the API server
polled from the controller throughout; test_cluster.py and test_pair.py check the same cluster, now upgraded."""

import pytest

from lab import api_poller
from tests.host_roles import upgrade_checks as checks

pytestmark = pytest.mark.molecule

# The first and second node (conftest.py's fixtures `first` and `second`).
FIRST, SECOND = "tf-spark-01", "tf-spark-02"
POLLS = checks.EPHEMERAL / "controller" / "api-polls.jsonl"


def kubeadm_work_dirs(host):
    """{name: mtime} of the directories kubeadm upgrade leaves in /etc/kubernetes/tmp (backups, timestamped)."""
    listing = host.check_output(
        "find /etc/kubernetes/tmp -mindepth 1 -maxdepth 1 -name 'kubeadm-*' -printf '%f %T@\\n'"
    )
    return {name: float(mtime) for name, mtime in (line.split() for line in listing.splitlines())}


def test_both_nodes_report_the_new_kubelet_and_are_schedulable(first):
    for name in (FIRST, SECOND):
        checks.assert_node_upgraded(first, name)


def test_node_binaries_are_the_new_version(host):
    checks.assert_binaries_upgraded(host)


@pytest.mark.parametrize("component", checks.CONTROL_PLANE)
def test_control_plane_static_pod_runs_the_new_image(first, component):
    checks.assert_static_pod_upgraded(first, FIRST, component)


def test_cluster_addons_follow_on_both_nodes(first):
    checks.assert_addons_upgraded(first, nodes=2)


def test_worker_was_upgraded_by_kubeadm_upgrade_node_after_the_control_plane(first, second):
    """`kubeadm upgrade apply` backed up the static pod manifests on the first node; on the worker only
    `kubeadm upgrade node`'s backup of the kubelet configuration, made later (no static pod there: test_cluster.py)."""
    control, worker = kubeadm_work_dirs(first), kubeadm_work_dirs(second)
    assert [name for name in control if name.startswith("kubeadm-backup-manifests-")], control
    assert [name.rsplit("-", 6)[0] for name in worker] == ["kubeadm-kubelet-config"], worker
    assert second.file(f"/etc/kubernetes/tmp/{next(iter(worker))}/config.yaml").exists
    assert min(worker.values()) > max(control.values()), "the worker was upgraded before the control plane"


def test_api_server_answered_every_poll_while_the_second_node_upgraded(second):
    found = api_poller.window(api_poller.read_polls(POLLS), checks.TO)
    assert found, f"the polls never saw {SECOND} cordoned and then back on {checks.TO}: {POLLS}"
    print(
        f"\nAPI server while {SECOND} upgraded: {found.polls} polls in {found.seconds:.0f} s,"
        f" {len(found.failures)} failed, longest gap between answers {found.longest_gap_s:.2f} s"
        f" ({found.failures_before} polls failed earlier, while {FIRST}'s control plane was upgraded)"
    )
    assert not found.failures, found.failures[:5]
    # `kubeadm upgrade node` ran on the worker inside the polled window.
    [upgraded] = kubeadm_work_dirs(second).values()
    assert found.start < upgraded < found.end


def test_deployment_pod_was_rescheduled_and_daemonset_pods_kept_running(first):
    """The second node was drained last: the Deployment's pod ends on the first one."""
    checks.assert_workloads_moved_and_kept(first, deployment_node=FIRST)


def test_second_run_changes_nothing():
    print(f"\nsecond run: {checks.assert_second_run_changes_nothing([FIRST, SECOND]):.0f} s")
