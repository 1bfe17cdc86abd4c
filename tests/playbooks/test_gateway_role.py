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


def rendered(tmp_path, **role_vars):
    manifests = render_role(tmp_path, "tokenfactory.spark.gateway", "render", ["gateway_manifests"], role_vars)
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests["gateway_manifests"]}


def test_the_public_endpoint_is_the_public_listener_on_the_node_addresses_and_nothing_else(tmp_path):
    """Bare metal, no load balancer: Service <name>-public with externalIPs carries only the public listener (the
    OpenAI routes); the internal listener (admin, metrics, probes) is on in-cluster Services only."""
    objects = rendered(tmp_path, gateway_public_ips=["10.88.0.5", "10.88.0.6"], gateway_replicas=2)
    public = objects[("Service", "tokenfactory-gateway-public")]["spec"]
    assert public["externalIPs"] == ["10.88.0.5", "10.88.0.6"]
    assert public["ports"] == [{"name": "http", "port": 443, "targetPort": "http"}]
    assert "type" not in public  # ClusterIP + externalIPs: kube-proxy forwards the node addresses, no NodePort
    internal = objects[("Service", "tokenfactory-gateway-internal")]["spec"]["ports"]
    assert [p["targetPort"] for p in internal] == ["internal"]
    assert ("Service", "tokenfactory-gateway-admin") not in objects
    pod = objects[("Deployment", "tokenfactory-gateway")]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["port"] == "internal"
    assert container["livenessProbe"]["httpGet"]["port"] == "internal"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8081"
    assert not [e for e in container["env"] if e["name"].startswith("TF_GATEWAY_TLS")], "no Endpoint TLS: plain HTTP"


def test_with_the_endpoint_certificate_the_public_listener_speaks_https(tmp_path):
    objects = rendered(tmp_path, gateway_tls_enabled=True, gateway_public_ips=["10.88.0.5"], gateway_public_port=8443)
    pod = objects[("Deployment", "tokenfactory-gateway")]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["TF_GATEWAY_TLS_CERT_FILE"] == "/etc/tokenfactory-gateway/tls/tls.crt"
    assert env["TF_GATEWAY_TLS_KEY_FILE"] == "/etc/tokenfactory-gateway/tls/tls.key"
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert volume["secret"] == {"secretName": "tokenfactory-gateway-tls", "defaultMode": 0o440}
    assert pod["securityContext"]["fsGroup"] == 10001  # the image's user reads the key through its group
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tls")
    assert mount["readOnly"] and mount["mountPath"] == "/etc/tokenfactory-gateway/tls"
    public = objects[("Service", "tokenfactory-gateway-public")]["spec"]["ports"]
    assert public == [{"name": "https", "port": 8443, "targetPort": "http"}]


def test_admins_outside_the_cluster_get_a_node_port_of_the_internal_listener_only_when_asked(tmp_path):
    objects = rendered(tmp_path, gateway_admin_node_port=30081)
    admin = objects[("Service", "tokenfactory-gateway-admin")]["spec"]
    assert admin["type"] == "NodePort"
    assert admin["ports"] == [{"name": "internal", "port": 8081, "targetPort": "internal", "nodePort": 30081}]
