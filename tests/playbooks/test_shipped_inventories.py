"""The shipped inventories work as shipped (docs/first-spark.md): what serve.yml, tenants.yml and validate.yml see with
them - through the settings role, as the playbooks see it - has a tenant with a key, TLS on, the base URL on the
listener's port, a way to the admin API that is not the public port, and node-local storage for a bare Spark."""

import json
import pathlib
import urllib.parse

import pytest
import yaml

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import base_url
from ansible_collections.tokenfactory.spark.plugins.modules.validate_deployment import ARGUMENT_SPEC as VALIDATE_SPEC
from tests.playbooks.ansible_run import ROOT, run_playbook

INVENTORIES = ["spark-single", "spark-pair"]
GATEWAY_DEFAULTS = yaml.safe_load((ROOT / "roles/gateway/defaults/main.yml").read_text())
OBSERVABILITY_DEFAULTS = yaml.safe_load((ROOT / "roles/observability/defaults/main.yml").read_text())
# What the playbooks decide from, each a role's default unless the inventory sets it.
SEEN = {
    "tenants": "tf_gateway_tenants",
    "tls_source": "tf_endpoint_tls_source",
    "hostname": "tf_endpoint_hostname",
    "endpoint_port": "tf_endpoint_port | int",
    "listener_port": f"gateway_public_port | default({GATEWAY_DEFAULTS['gateway_public_port']}) | int",
    "admin_url": "tf_gateway_admin_url",
    "admin_node_port": f"gateway_admin_node_port | default({GATEWAY_DEFAULTS['gateway_admin_node_port']}) | int",
    "postgres_storage": (
        f"gateway_postgres_storage_mode | default('{GATEWAY_DEFAULTS['gateway_postgres_storage_mode']}')"
    ),
    "postgres_node": "gateway_postgres_host_path_node | default('')",
    "prometheus_storage": (
        f"observability_storage_mode | default('{OBSERVABILITY_DEFAULTS['observability_storage_mode']}')"
    ),
    "validate_ca": "tf_validate_ca_path",
    "site_ca_dir": "tf_site_ca_dir",
    "control_plane": "groups['control_plane']",
    "first_address": "hostvars[groups['control_plane'][0]].ansible_host",
}


def seen_through_settings(inventory, expressions, tmp):
    """What the playbooks see with the inventory at `inventory`: each expression, evaluated on the controller after the
    settings role."""
    out = tmp / "seen.json"
    exprs = ", ".join(f"'{name}': ({expr})" for name, expr in expressions.items())
    book = tmp / "seen.yml"
    book.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "controller",
                    "gather_facts": False,
                    "roles": [{"role": "tokenfactory.spark.settings"}],
                    "tasks": [
                        {
                            "ansible.builtin.copy": {"content": "{{ {" + exprs + "} | to_json }}", "dest": str(out)},
                        }
                    ],
                }
            ]
        )
    )
    # HOME is the controller's (the site CA and key files live under it); no admin URL from the environment.
    run_playbook(book, "-i", inventory, extra_env={"HOME": str(tmp), "TF_GATEWAY_URL": ""})
    return json.loads(out.read_text())


@pytest.fixture(scope="module", params=INVENTORIES)
def seen(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    return {
        "inventory": request.param,
        "home": tmp,
        **seen_through_settings(ROOT / "inventories" / request.param, SEEN, tmp),
    }


def test_one_example_tenant_with_a_key_for_the_served_model(seen):
    (tenant,) = seen["tenants"]
    assert tenant["models"] == ["qwen2-0.5b-instruct"], tenant
    assert [key["name"] for key in tenant["api_keys"]] == ["validation"], tenant


def test_tls_is_on_from_the_site_ca_kept_under_home(seen):
    assert seen["tls_source"] == "site_ca"
    assert seen["site_ca_dir"] == f"{seen['home']}/.config/tokenfactory/site-ca/{seen['inventory']}"
    assert seen["validate_ca"] == f"{seen['site_ca_dir']}/ca.crt", "validation must trust the CA that signed it"


def test_the_base_url_is_https_on_the_listeners_port(seen):
    spec = {"hostname": seen["hostname"], "tls": {"secretName": "x"}}
    if seen["endpoint_port"] > 0:
        spec["port"] = seen["endpoint_port"]
    url = urllib.parse.urlsplit(base_url(spec))
    assert url.scheme == "https"
    assert (url.port or 443) == seen["listener_port"], (base_url(spec), seen["listener_port"])
    # No DNS needed: the Endpoint answers on the first Spark's address until the site names its own hostname.
    assert url.hostname == seen["first_address"]


def test_the_admin_api_is_reachable_from_the_controller_but_not_on_the_public_port(seen):
    assert seen["admin_url"] == ""
    assert 30000 <= seen["admin_node_port"] <= 32767, "an admin NodePort (kube-apiserver's default range)"
    assert seen["admin_node_port"] != seen["listener_port"]


def test_stores_are_node_local_on_a_bare_spark(seen):
    assert seen["postgres_storage"] == seen["prometheus_storage"] == "host_path"
    assert seen["postgres_node"] == seen["control_plane"][0]


def test_a_certificate_without_its_key_in_the_vault_fails_naming_the_vault_value(tmp_path):
    vault = yaml.safe_load((ROOT / "inventories/spark-single/group_vars/all/vault.yml.example").read_text())
    vault["vault_endpoint_tls_cert"] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "vault.yml").write_text(yaml.safe_dump(vault))
    book = tmp_path / "settings.yml"
    play = {"hosts": "controller", "gather_facts": False, "roles": ["tokenfactory.spark.settings"]}
    book.write_text(yaml.safe_dump([play]))
    run = run_playbook(
        book, "-i", ROOT / "inventories/spark-single", "-e", f"@{tmp_path / 'vault.yml'}",
        extra_env={"HOME": str(tmp_path)}, check=False,
    )  # fmt: skip
    assert run.returncode != 0
    assert "vault_endpoint_tls_cert and vault_endpoint_tls_key" in run.stdout and "the key is empty" in run.stdout
    assert "MIIB" not in run.stdout + run.stderr


ALL_INVENTORIES = sorted(p.name for p in (ROOT / "inventories").iterdir() if (p / "hosts.yml").is_file())
# What validate.yml sends with the first key of the first tenant, and the limits that key is under.
VALIDATION_LOAD = {
    "requests": "tf_validate_requests | int",
    "rate_limits": "tf_rate_limits",
    "tenants": "tf_gateway_tenants",
}


def per_minute_limits(seen):
    found = {f"tf_rate_limits.{scope}": limit for scope, limit in seen["rate_limits"].items()}
    if seen["tenants"]:
        tenant = seen["tenants"][0]
        key = (tenant.get("api_keys") or [{}])[0]
        found[f"tf_gateway_tenants[{tenant['name']}].limits"] = tenant.get("limits") or {}
        found[f"tf_gateway_tenants[{tenant['name']}].api_keys[{key.get('name')}].limits"] = key.get("limits") or {}
    return {where: limit["requests_per_minute"] for where, limit in found.items() if "requests_per_minute" in limit}


@pytest.mark.parametrize("inventory", ["role defaults", *ALL_INVENTORIES])
def test_the_validation_fits_the_limits_of_its_own_key(inventory, tmp_path):
    """validate.yml's requests (and the module's warmup) fit the requests per minute of the deployment's per-key and
    per-tenant limits and of the validation key: a shipped inventory whose validation was throttled by its own
    defaults failed its error-rate SLO on 429s."""
    path = ROOT / "inventories" / inventory
    if inventory == "role defaults":  # an inventory that sets nothing: the settings role's defaults
        path = tmp_path / "hosts.yml"
        path.write_text(yaml.safe_dump({"all": {"children": {"controller": {"hosts": {
            "localhost": {"ansible_connection": "local"}}}}}}))  # fmt: skip
    seen = seen_through_settings(pathlib.Path(path), VALIDATION_LOAD, tmp_path)
    requests = seen["requests"] + VALIDATE_SPEC["warmup_requests"]["default"]
    limits = per_minute_limits(seen)
    assert limits, "no requests_per_minute limit found: the check reads the wrong settings"
    too_low = {where: rpm for where, rpm in limits.items() if rpm < requests}
    assert not too_low, f"{inventory}: {requests} validation requests exceed {too_low} requests per minute"
