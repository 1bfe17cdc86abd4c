"""What the rehearsals of the SHIPPED inventories share (tests/rehearsal/test_shipped_*.py):

    ansible-playbook -i inventories/<name> -i <overlay> tokenfactory.spark.site

The overlay (tests/rehearsal/<name>, copied with the vault file filled from vault.yml.example and encrypted) holds
only what a user edits (addresses, user, SSH) and the simulation layer (hardware, public internet, this 2-CPU VM);
tests/unit/test_rehearsal_overlay.py asserts that list. The controller is a fresh account (an empty HOME), so the
site CA and the key file are the ones the collection creates where it documents them."""

import json
import re
import secrets
import shutil
import socket
import ssl
import subprocess

import yaml

from lab.paths import lab_root, tf_cache
from tests.playbooks.ansible_run import BIN, ROOT, play_recap, run_playbook


class Shipped:
    """The shipped inventory `name` and its rehearsal overlay: hosts, addresses and what serve.yml creates."""

    def __init__(self, name):
        self.name = name
        self.inventory = ROOT / "inventories" / name
        self.overlay = ROOT / "tests/rehearsal" / name
        self.addresses = _addresses(yaml.safe_load((self.overlay / "hosts.yml").read_text())["all"], {})
        self.control_plane = next(iter(self.addresses))
        serving = yaml.safe_load((self.inventory / "group_vars/all/serving.yml").read_text())
        self.model = serving["tf_served_model_name"]
        self.deployment = serving["tf_model_deployment"]
        self.namespace = serving["tf_namespace"]
        self.tenant = serving["tf_gateway_tenants"][0]["name"]
        self.key_name = serving["tf_gateway_tenants"][0]["api_keys"][0]["name"]
        gateway = yaml.safe_load((self.inventory / "group_vars/all/gateway.yml").read_text())
        self.admin_node_port = gateway["gateway_admin_node_port"]
        self.gateway_namespace = gateway["gateway_namespace"]
        self.kubeconfig = self.inventory / f"artifacts/{name}.kubeconfig"


def _addresses(node, found):
    """{host: ansible_host} of an inventory tree, in file order (the control plane first)."""
    for name, values in (node.get("hosts") or {}).items():
        found[name] = values["ansible_host"]
    for child in (node.get("children") or {}).values():
        _addresses(child or {}, found)
    return found


def filled_vault(example):
    """The example's keys, filled as a new user would: an admin token of their own; every other value left empty
    means the documented default (no HF token, the site CA, the in-cluster PostgreSQL, the key tenants.yml writes)."""
    values = yaml.safe_load(example.read_text())
    assert "vault_gateway_admin_token" in values, sorted(values)
    return {name: (secrets.token_urlsafe(32) if name == "vault_gateway_admin_token" else "") for name in values}


def rehearse(shipped, tmp_path_factory):
    """Clean, the podman Spark host(s), a cold and a warm site.yml; yields what the tests read, then cleans up."""
    home = tmp_path_factory.mktemp("controller-home")
    overlay = tmp_path_factory.mktemp("overlay") / shipped.name
    shutil.copytree(shipped.overlay, overlay)  # symlinked overlay files are copied as files
    password = home / "vault-password"
    password.write_text(secrets.token_urlsafe(24))
    password.chmod(0o600)
    vault = overlay / "group_vars/all/vault.yml"
    vault_values = filled_vault(shipped.inventory / "group_vars/all/vault.yml.example")
    vault.write_text(yaml.safe_dump(vault_values))
    encrypted = subprocess.run(
        [BIN / "ansible-vault", "encrypt", vault, "--vault-password-file", password],
        capture_output=True,
        text=True,
        check=False,
    )
    assert encrypted.returncode == 0, encrypted.stderr
    assert vault.read_text().startswith("$ANSIBLE_VAULT;"), "the vault file must be encrypted"
    reports = lab_root() / f"{shipped.name}-reports"
    env = {
        "ANSIBLE_VAULT_PASSWORD_FILE": str(password),
        "HOME": str(home),
        "TF_CACHE": str(tf_cache()),
        "XDG_CACHE_HOME": str(tf_cache().parent),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CALLBACKS_ENABLED": "tokenfactory.spark.progress,tokenfactory.spark.validation_report",
        "ANSIBLE_SHOW_CUSTOM_STATS": "true",
        "TOKENFACTORY_VALIDATION_REPORT_DIR": str(reports),
        "TOKENFACTORY_VALIDATION_REPORT_NAME": shipped.name,
    }
    inventories = ["-i", shipped.inventory, "-i", overlay]

    def play(playbook):
        return run_playbook(playbook, *inventories, extra_env=env, timeout=3600).stdout

    def clean():
        play(ROOT / "lab/clean.yml")
        shipped.kubeconfig.unlink(missing_ok=True)

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
        "ca": config / f"site-ca/{shipped.name}/ca.crt",
        "key_file": config / f"api-keys/{shipped.tenant}/{shipped.key_name}.key",
        "admin_token": vault_values["vault_gateway_admin_token"],
        "reports": reports,
        "vault": vault,
    }
    clean()


def assert_validated_over_https(shipped, run):
    """The cold run printed the base URL on the first Spark's address with the site CA to trust, and validate.yml
    passed every request and every SLO, with no 429, and read the engines' KV cache through the API server's proxy
    (the controller is outside the cluster's networks)."""
    out = run["cold"]
    address = shipped.addresses[shipped.control_plane]
    assert f"OPENAI_BASE_URL=https://{address}/v1; clients trust the site CA {run['ca']}" in " ".join(out.split())
    row = re.search(rf"{re.escape(shipped.deployment)}\s+localhost\s+(\d+)/(\d+)\s.*?\s(PASS|FAIL)\n", out)
    assert row, out[-4000:]
    assert row[1] == row[2] and row[3] == "PASS", row[0]
    (report,) = run["reports"].glob(f"{shipped.name}*.json")
    (validation,) = [v["validation"] for v in json.loads(report.read_text())["validations"]]
    assert validation["slo"]["passed"] and validation["errors"]["rate_limited"] == 0
    assert validation["server"]["kv_cache_usage"]["peak"] is not None, validation.get("server")


def assert_second_run_changes_nothing(run):
    changed = {host: counts["changed"] for host, counts in play_recap(run["warm"]).items()}
    assert changed == dict.fromkeys(changed, 0), changed


def https_get(address, hostname, path, key, ca):
    """GET `path` from `address`:443 by the Endpoint's name `hostname` (SNI and Host), trusting only the site CA;
    returns (status line, body)."""
    context = ssl.create_default_context(cafile=str(ca))
    request = f"GET {path} HTTP/1.1\r\nHost: {hostname}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    with (
        socket.create_connection((address, 443), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        tls.sendall(request.encode())
        answer = b"".join(iter(lambda: tls.recv(65536), b"")).decode()
    head, _blank, body = answer.partition("\r\n\r\n")
    return head.splitlines()[0], body
