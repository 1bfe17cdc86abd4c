"""gateway role: the Deployment configures the gateway only through settings the gateway service has, and every
secret setting comes from a Secret (checked against services/gateway's Config, not a copy of its field list)."""

import dataclasses

from tests.playbooks.ansible_run import ROOT, render_role


def gateway_config_fields():
    import sys

    sys.path.insert(0, str(ROOT / "services/gateway"))
    try:
        from tokenfactory_gateway import config
    finally:
        sys.path.remove(str(ROOT / "services/gateway"))
    return {f.name for f in dataclasses.fields(config.Config)}, set(config.SECRETS), config.ENV_PREFIX


def test_deployment_env_matches_the_gateway_settings(tmp_path):
    manifests = render_role(tmp_path, "tokenfactory.spark.gateway", "render", ["gateway_manifests"])[
        "gateway_manifests"
    ]
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    fields, secrets, prefix = gateway_config_fields()
    names = {e["name"].removeprefix(prefix).lower(): e for e in env}
    assert set(names) <= fields, f"settings the gateway does not have: {set(names) - fields}"
    assert secrets <= set(names), f"secrets the role never sets: {secrets - set(names)}"
    for name in secrets:
        assert "secretKeyRef" in names[name].get("valueFrom", {}), f"{name} must come from a Secret"
    assert names["routing_source"]["value"] == "kubernetes"
    mounts = {m["mountPath"] for m in deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert names["spool_dir"]["value"] in mounts
