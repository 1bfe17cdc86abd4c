"""playbooks/restore_ledger.yml refuses a bad request before it reads or changes anything in the cluster: no target,
a bad file name, the live ledger without the typed confirmation (inventories/lab's variables; no cluster is up)."""

import pytest

from tests.playbooks.ansible_run import ROOT, run_playbook


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ([], "got ''"),
        (["-e", "tf_restore_database=Ledger-Copy"], "got 'Ledger-Copy'"),
        (["-e", "tf_restore_database=ledger_copy", "-e", "tf_restore_file=../etc/passwd"], "got '../etc/passwd'"),
        (["-e", "tf_restore_database=tokenfactory"], "tf_restore_confirm) = tokenfactory"),
        (
            ["-e", "tf_restore_database=tokenfactory", "-e", "tf_restore_confirm=yes"],
            "tf_restore_confirm) = tokenfactory",
        ),
    ],
    ids=["no-target", "bad-name", "bad-file", "live-unconfirmed", "live-wrong-confirmation"],
)
def test_a_bad_restore_request_is_refused_before_the_cluster_is_touched(extra, named):
    proc = run_playbook(ROOT / "playbooks/restore_ledger.yml", "-i", ROOT / "inventories/lab", *extra, check=False)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, out[-3000:]
    assert "Restore - check the request before anything changes" in out and named in out, out[-3000:]
    assert "Restore - the gateway's replicas now" not in out, "the cluster was read before the request was checked"
