"""Each shipped inventory's group_vars/all/vault.yml.example lists exactly the vault_* variables that the playbooks,
roles and that inventory read (found by scanning them), so a vault file filled from it lacks nothing."""

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
INVENTORIES = ["spark-single", "spark-pair"]
VAULT_VARIABLE = re.compile(r"\bvault_[a-z0-9_]+\b")


def referenced(paths):
    """{vault_* name: the first file that reads it} over the YAML and template files under paths."""
    found = {}
    for top in paths:
        for path in sorted(top.rglob("*")):
            if path.suffix in {".yml", ".yaml", ".j2"} and path.is_file():
                for name in VAULT_VARIABLE.findall(path.read_text()):
                    found.setdefault(name, path.relative_to(ROOT))
    return found


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_the_vault_example_lists_every_vault_variable_read(inventory):
    group_vars = ROOT / "inventories" / inventory / "group_vars/all"
    example = yaml.safe_load((group_vars / "vault.yml.example").read_text())
    read = referenced([ROOT / "playbooks", ROOT / "roles", ROOT / "inventories" / inventory])
    assert read, "no vault_* variable read: the scan found nothing"
    missing = {name: str(path) for name, path in read.items() if name not in example}
    assert not missing, f"read but not in vault.yml.example: {missing}"
    unused = sorted(set(example) - set(read))
    assert not unused, f"in vault.yml.example but read nowhere: {unused}"
    assert all(value == "" for value in example.values()), "the example ships no secret values"
    assert not (group_vars / "vault.yml").exists(), "a filled vault file is in the checkout"
