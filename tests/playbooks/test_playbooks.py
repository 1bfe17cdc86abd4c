"""Every playbook parses with each shipped inventory and is callable as tokenfactory.spark.<name>."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.playbooks.ansible_run import ROOT, ansible_env, run_playbook

PLAYBOOKS = sorted(p.stem for p in (ROOT / "playbooks").glob("*.yml"))
INVENTORIES = ["spark-single", "spark-pair"]


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("name", PLAYBOOKS)
def test_syntax_check_by_fqcn(name, inventory):
    proc = run_playbook(
        f"tokenfactory.spark.{name}",
        "--syntax-check",
        "-i",
        ROOT / "inventories" / inventory / "hosts.yml",
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_inventory_groups(inventory):
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(ROOT / "inventories" / inventory), "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["controller"]["hosts"] == ["localhost"]
    nodes = set(data["control_plane"]["hosts"]) | set(data.get("workers", {}).get("hosts", []))
    assert nodes and len(data["control_plane"]["hosts"]) == 1
    local = data["_meta"]["hostvars"]["localhost"]
    resolved = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "-i",
            str(ROOT / "inventories" / inventory),
            "localhost",
            "-m",
            "ansible.builtin.debug",
            "-a",
            "var=tf_kubeconfig",
            "-o",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=ansible_env(),
    ).stdout
    assert f"/inventories/{inventory}/artifacts/{inventory}.kubeconfig" in resolved
    assert "ansible_become" not in local, "become must not leak to the controller"
    if inventory == "spark-pair":
        assert set(data["connectx_pair"]["hosts"]) == nodes == {"spark-01", "spark-02"}
