"""remove_node.yml refuses before touching anything: no typed confirmation, or a host the inventory lacks.

The refusal of the last control-plane node needs a cluster: molecule/default/side_effect.yml checks it on real nodes.
"""

import pytest

from tests.playbooks.ansible_run import ROOT, run_playbook

INVENTORY = ROOT / "inventories/spark-pair/hosts.yml"


def remove(tmp_path, *extra):
    kubeconfig = tmp_path / "cluster.kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    return run_playbook(
        "tokenfactory.spark.remove_node", "-i", INVENTORY, "-e", f"tf_kubeconfig={kubeconfig}", *extra, check=False
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["-e", "tf_remove_node=spark-02"],
        ["-e", "tf_remove_node=spark-02", "-e", "tf_remove_confirm=spark-01"],
        ["-e", "tf_remove_node=spark-09", "-e", "tf_remove_confirm=spark-09"],
        [],
    ],
    ids=["no-confirmation", "wrong-confirmation", "unknown-host", "nothing"],
)
def test_refused_before_anything_runs(tmp_path, extra):
    proc = remove(tmp_path, *extra)
    assert proc.returncode != 0
    assert "Refusing to remove a node" in proc.stdout
    assert "Read the cluster's nodes" not in proc.stdout


def test_confirmed_request_goes_on_to_the_cluster(tmp_path):
    """With the confirmation the checks pass and the playbook asks the cluster (here: an empty kubeconfig)."""
    proc = remove(tmp_path, "-e", "tf_remove_node=spark-02", "-e", "tf_remove_confirm=spark-02")
    assert proc.returncode != 0
    assert "Refusing to remove a node" not in proc.stdout
    assert "Read the cluster's nodes" in proc.stdout
