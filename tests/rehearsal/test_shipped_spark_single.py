"""The SHIPPED inventories/spark-single, rehearsed end to end on a podman Spark host (make test-rehearsal).

    ansible-playbook -i inventories/spark-single -i <overlay> tokenfactory.spark.site

The overlay (tests/rehearsal/spark-single, copied with the vault file filled from vault.yml.example and encrypted)
holds only what a user edits (address, user, SSH) and the simulation layer (hardware, public internet, this 2-CPU
VM); tests/unit/test_rehearsal_overlay.py asserts that list. The controller is a fresh account (an empty HOME), so
the site CA and the key file are the ones the collection creates where it documents them. Ends in validate PASS over
HTTPS with that CA, calls from curl-like and openai-SDK clients, and a second run that changes nothing."""

import json
import re
import secrets
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request

import openai
import pytest
import yaml

from lab.paths import lab_root, tf_cache
from tests.playbooks.ansible_run import BIN, ROOT, play_recap, run_playbook

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.timeout(5400)]
SHIPPED = ROOT / "inventories/spark-single"
OVERLAY = ROOT / "tests/rehearsal/spark-single"
NODE = "spark-01"
NODE_IP = yaml.safe_load((OVERLAY / "hosts.yml").read_text())["all"]["children"]["spark_nodes"]["children"][
    "control_plane"
]["hosts"][NODE]["ansible_host"]
SERVING = yaml.safe_load((SHIPPED / "group_vars/all/serving.yml").read_text())
MODEL = SERVING["tf_served_model_name"]
DEPLOYMENT = SERVING["tf_model_deployment"]
TENANT = SERVING["tf_gateway_tenants"][0]["name"]
KEY_NAME = SERVING["tf_gateway_tenants"][0]["api_keys"][0]["name"]
ADMIN_NODE_PORT = yaml.safe_load((SHIPPED / "group_vars/all/gateway.yml").read_text())["gateway_admin_node_port"]
KUBECONFIG = SHIPPED / "artifacts/spark-single.kubeconfig"


def filled_vault(example):
    """The example's keys, filled as a new user would: an admin token of their own; every other value left empty
    means the documented default (no HF token, the site CA, the in-cluster PostgreSQL, the key tenants.yml writes)."""
    values = yaml.safe_load(example.read_text())
    assert "vault_gateway_admin_token" in values, sorted(values)
    return {name: (secrets.token_urlsafe(32) if name == "vault_gateway_admin_token" else "") for name in values}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    home = tmp_path_factory.mktemp("controller-home")
    overlay = tmp_path_factory.mktemp("overlay") / "spark-single"
    shutil.copytree(OVERLAY, overlay)
    password = home / "vault-password"
    password.write_text(secrets.token_urlsafe(24))
    password.chmod(0o600)
    vault = overlay / "group_vars/all/vault.yml"
    vault_values = filled_vault(SHIPPED / "group_vars/all/vault.yml.example")
    vault.write_text(yaml.safe_dump(vault_values))
    run_playbook_env = {"ANSIBLE_VAULT_PASSWORD_FILE": str(password)}
    encrypted = subprocess.run(
        [BIN / "ansible-vault", "encrypt", vault, "--vault-password-file", password],
        capture_output=True,
        text=True,
        check=False,
    )
    assert encrypted.returncode == 0, encrypted.stderr
    assert vault.read_text().startswith("$ANSIBLE_VAULT;"), "the vault file must be encrypted"
    reports = lab_root() / "spark-single-reports"
    env = {
        **run_playbook_env,
        "HOME": str(home),
        "TF_CACHE": str(tf_cache()),
        "XDG_CACHE_HOME": str(tf_cache().parent),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CALLBACKS_ENABLED": "tokenfactory.spark.progress,tokenfactory.spark.validation_report",
        "ANSIBLE_SHOW_CUSTOM_STATS": "true",
        "TOKENFACTORY_VALIDATION_REPORT_DIR": str(reports),
        "TOKENFACTORY_VALIDATION_REPORT_NAME": "spark-single",
    }
    inventories = ["-i", SHIPPED, "-i", overlay]

    def play(playbook):
        return run_playbook(playbook, *inventories, extra_env=env, timeout=3600).stdout

    def clean():
        play(ROOT / "lab/clean.yml")
        KUBECONFIG.unlink(missing_ok=True)

    clean()
    shutil.rmtree(reports, ignore_errors=True)  # the last run's reports stay for reading until the next run
    hosts = play(ROOT / "lab/hosts.yml")
    cold = play("tokenfactory.spark.site")
    warm = play("tokenfactory.spark.site")
    config = home / ".config/tokenfactory"
    yield {
        "hosts": hosts,
        "cold": cold,
        "warm": warm,
        "ca": config / "site-ca/spark-single/ca.crt",
        "key_file": config / f"api-keys/{TENANT}/{KEY_NAME}.key",
        "admin_token": vault_values["vault_gateway_admin_token"],
        "reports": reports,
        "vault": vault,
    }
    clean()


def test_the_simulation_boundary_is_printed(rehearsal):
    assert "SIMULATED: GPU and its driver" in rehearsal["hosts"]
    assert "SIMULATION of the public internet" in rehearsal["hosts"]


def test_cold_run_ends_in_validate_pass_over_https_naming_the_site_ca(rehearsal):
    out = rehearsal["cold"]
    assert play_recap(out)[NODE]["failed"] == 0
    assert f"OPENAI_BASE_URL=https://{NODE_IP}/v1; clients trust the site CA {rehearsal['ca']}" in " ".join(out.split())
    row = re.search(rf"{re.escape(DEPLOYMENT)}\s+localhost\s+(\d+)/(\d+)\s.*?\s(PASS|FAIL)\n", out)
    assert row, out[-4000:]
    assert row[1] == row[2] and row[3] == "PASS", row[0]
    (report,) = rehearsal["reports"].glob("spark-single*.json")
    (validation,) = [v["validation"] for v in json.loads(report.read_text())["validations"]]
    assert validation["slo"]["passed"] and validation["errors"]["rate_limited"] == 0
    # Engine metrics through the API server's proxy (the controller is outside the cluster's networks).
    assert validation["server"]["kv_cache_usage"]["peak"] is not None, validation.get("server")


def test_second_run_changes_nothing(rehearsal):
    recap = play_recap(rehearsal["warm"])
    assert {host: counts["changed"] for host, counts in recap.items()} == dict.fromkeys(recap, 0), recap


def test_the_created_ca_and_key_file_serve_a_tenant_with_curl_and_the_openai_sdk(rehearsal):
    key_file = rehearsal["key_file"]
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    key = key_file.read_text().strip()
    assert key not in rehearsal["cold"] + rehearsal["warm"], "the key value must never be printed"
    context = ssl.create_default_context(cafile=str(rehearsal["ca"]))
    request = urllib.request.Request(f"https://{NODE_IP}/v1/models", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 - https
        assert [m["id"] for m in json.load(answer)["data"]] == [MODEL]
    client = openai.OpenAI(
        base_url=f"https://{NODE_IP}/v1",
        api_key=key,
        http_client=openai.DefaultHttpxClient(verify=str(rehearsal["ca"])),
    )
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8)
    assert reply.usage.completion_tokens > 0


def test_admin_api_only_on_the_admin_node_port(rehearsal):
    context = ssl.create_default_context(cafile=str(rehearsal["ca"]))
    token = rehearsal["admin_token"]
    public = urllib.request.Request(f"https://{NODE_IP}/admin/v1/tenants", headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(public, context=context, timeout=30)  # noqa: S310 - https
    assert refused.value.code == 404
    admin = urllib.request.Request(
        f"http://{NODE_IP}:{ADMIN_NODE_PORT}/admin/v1/tenants", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(admin, timeout=30) as answer:  # noqa: S310 - the management address
        assert TENANT in {t["name"] for t in json.load(answer)["data"]}
    assert token not in rehearsal["cold"] + rehearsal["warm"]
