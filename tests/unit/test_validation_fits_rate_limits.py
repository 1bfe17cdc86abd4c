"""The validation that an inventory runs is not rate-limited by the limits that inventory gives its own key: the
requests of validate.yml (tf_validate_requests and the module's warmup) fit the per-key and per-tenant requests per
minute of the deployment and of the validation key (the first key of the first tenant). A shipped inventory whose
validation was throttled by its own defaults failed its error-rate SLO on 429s."""

import pathlib

import pytest
import yaml

from ansible_collections.tokenfactory.spark.plugins.modules.validate_deployment import ARGUMENT_SPEC

ROOT = pathlib.Path(__file__).resolve().parents[2]
INVENTORIES = sorted(p.name for p in (ROOT / "inventories").iterdir() if (p / "group_vars/all").is_dir())


def inventory_vars(name):
    merged = yaml.safe_load((ROOT / "roles/settings/defaults/main.yml").read_text())
    for path in sorted((ROOT / "inventories" / name / "group_vars/all").glob("*.yml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def per_minute_limits(settings):
    limits = settings["tf_rate_limits"]
    found = {f"tf_rate_limits.{scope}": limits[scope] for scope in ("per_key", "per_tenant") if scope in limits}
    tenants = settings["tf_gateway_tenants"]
    if isinstance(tenants, list) and tenants:  # the role's default is a template: a key without limits of its own
        tenant = tenants[0]
        found[f"tf_gateway_tenants[{tenant['name']}].limits"] = tenant.get("limits") or {}
        key = (tenant.get("api_keys") or [{}])[0]
        found[f"tf_gateway_tenants[{tenant['name']}].api_keys[{key.get('name')}].limits"] = key.get("limits") or {}
    return {where: limit["requests_per_minute"] for where, limit in found.items() if "requests_per_minute" in limit}


@pytest.mark.parametrize("name", ["role defaults", *INVENTORIES])
def test_the_validation_fits_the_limits_of_its_own_key(name):
    settings = inventory_vars(name) if name != "role defaults" else inventory_vars("__none__")
    requests = int(settings["tf_validate_requests"]) + ARGUMENT_SPEC["warmup_requests"]["default"]
    limits = per_minute_limits(settings)
    assert limits, "no requests_per_minute limit found: the check reads the wrong settings"
    too_low = {where: rpm for where, rpm in limits.items() if rpm < requests}
    assert not too_low, f"{name}: {requests} validation requests exceed {too_low} requests per minute"
