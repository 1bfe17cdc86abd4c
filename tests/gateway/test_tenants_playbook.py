"""playbooks/tenants.yml against a real gateway (PostgreSQL, Redis): tenants and keys from inventory variables, key
values only in 0600 files (never in the output), a rerun changes nothing, bad input creates nothing."""

import json

import openai
import pytest

from tests.gateway.gateway import deployment_objects
from tests.playbooks.ansible_run import ROOT, changed_count, run_playbook

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"
TENANTS = [
    {"name": "acme", "description": "Acme", "limits": {"requests_per_minute": 100}, "budget": {"amount": "40"},
     "api_keys": [{"name": "ci"}, {"name": "batch", "limits": {"tokens_per_minute": 5000},
                                   "budget": {"period": "day", "tokens": 100000}}]},
    {"name": "beta", "models": [MODEL]},
]  # fmt: skip


def run(gw, tmp_path, tenants, check=True):
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"controller": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({
        "tf_gateway_tenants": tenants, "tf_api_key_dir": str(tmp_path / "keys"),
        "tf_gateway_admin_url": gw.admin_url, "tf_gateway_admin_token": gw.admin_token,
    }))  # fmt: skip
    proc = run_playbook(ROOT / "playbooks/tenants.yml", "-v", "-i", inventory, "-e", f"@{settings}", check=check)
    return proc


def changed(proc):
    return changed_count(proc.stdout, proc.stderr)


def test_tenants_and_keys_come_from_the_inventory_and_keys_only_reach_0600_files(gateway_factory, tmp_path):
    gw = gateway_factory(deployment_objects("tiny", MODEL, "http://127.0.0.1:9", tenants=["acme"]))
    first = run(gw, tmp_path, TENANTS)
    assert changed(first) == 3, first.stdout[-3000:]  # the tenants, key directory and keys tasks
    keys = {name: tmp_path / "keys/acme" / f"{name}.key" for name in ("ci", "batch")}
    assert oct((tmp_path / "keys/acme").stat().st_mode & 0o777) == "0o700"
    for path in keys.values():
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        value = path.read_text().strip()
        assert value.startswith("tfk-") and value not in first.stdout
    assert gw.admin_token not in first.stdout
    status, acme = gw.admin("GET", "/tenants/acme")
    assert status == 200 and acme["description"] == "Acme" and acme["limits"]["requests_per_minute"] == 100
    assert acme["budget"] == {"period": "month", "amount": "40", "tokens": 0}
    batch = [k for k in gw.admin("GET", "/tenants/acme/keys")[1]["data"] if k["name"] == "batch"]
    assert batch[0]["budget"] == {"period": "day", "amount": "0", "tokens": 100000}
    assert gw.admin("GET", "/tenants/beta")[1]["models"] == [MODEL]
    listed = openai.OpenAI(base_url=gw.url + "/v1", api_key=keys["ci"].read_text().strip(), max_retries=0).models.list()
    assert [m.id for m in listed.data] == [MODEL]

    values = {name: path.read_text() for name, path in keys.items()}
    again = run(gw, tmp_path, TENANTS)
    assert changed(again) == 0, again.stdout[-3000:]
    assert {name: path.read_text() for name, path in keys.items()} == values
    assert "No value on this controller" not in again.stdout

    keys["batch"].unlink()
    lost = run(gw, tmp_path, TENANTS)
    assert changed(lost) == 0
    assert "No value on this controller for acme/batch" in lost.stdout


@pytest.mark.parametrize(
    "tenants",
    [
        [{"name": "acme"}, {"name": "acme"}],
        [{"name": "acme", "api_keys": [{"name": "ci"}, {"name": "ci"}]}],
        [{"description": "no name"}],
        [{"name": "acme", "api_keys": [{"limits": {}}]}],
    ],
    ids=["duplicate-tenant", "duplicate-key", "tenant-without-name", "key-without-name"],
)
def test_bad_tenant_lists_fail_before_anything_is_created(gateway_factory, tmp_path, tenants):
    gw = gateway_factory(deployment_objects("tiny", MODEL, "http://127.0.0.1:9"))
    proc = run(gw, tmp_path, tenants, check=False)
    assert proc.returncode != 0
    assert "tf_gateway_tenants must be a list of" in proc.stdout
    assert gw.admin("GET", "/tenants/acme")[0] == 404
    assert not (tmp_path / "keys").exists()
