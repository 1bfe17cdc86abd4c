"""The PLAY RECAP parser every playbook test uses (tests/playbooks/ansible_run.py)."""

import pytest

from tests.playbooks.ansible_run import changed_count, play_recap

OUTPUT = """
PLAY [spark_nodes] *************************************************************
TASK [x] ***********************************************************************
changed: [tf-spark-01]

PLAY RECAP *********************************************************************
localhost                  : ok=3    changed=0    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0
tf-spark-01                : ok=41   changed=7    unreachable=0    failed=1    skipped=12   rescued=0    ignored=0
tf-spark-02                : ok=0    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0
"""


def test_every_host_of_the_last_recap_with_its_counts():
    earlier_run = "PLAY RECAP ***\nh : ok=5 changed=5 unreachable=0 failed=0\n"
    later_run = "PLAY RECAP ***\nh : ok=1 changed=2 unreachable=0 failed=0\n"
    assert play_recap(earlier_run + later_run) == {"h": {"ok": 1, "changed": 2, "unreachable": 0, "failed": 0}}
    recap = play_recap(OUTPUT)
    assert recap["tf-spark-01"] == {"ok": 41, "changed": 7, "unreachable": 0, "failed": 1}
    assert recap["tf-spark-02"]["unreachable"] == 1 and set(recap) == {"localhost", "tf-spark-01", "tf-spark-02"}
    assert changed_count(OUTPUT) == 7


def test_a_run_without_a_recap_fails_the_test():
    with pytest.raises(AssertionError, match="no PLAY RECAP"):
        changed_count("ERROR! the playbook could not be parsed", "stderr tail")
