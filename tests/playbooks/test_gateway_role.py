"""gateway role: the Deployment configures the gateway only through settings the gateway service has, and every
secret setting comes from a Secret (checked against services/gateway's Config, not a copy of its field list)."""

import dataclasses
import re
import subprocess

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES

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
    (deployment,) = [
        m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == "tokenfactory-gateway"
    ]
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


def stores(tmp_path, **role_vars):
    out = render_role(tmp_path, "tokenfactory.spark.gateway", "render_stores", ["gateway_store_manifests"], role_vars)
    return {(m["kind"], m["metadata"]["name"]): m for m in out["gateway_store_manifests"]}


def test_the_ledger_keeps_its_data_on_a_claim_or_on_a_node_directory(tmp_path):
    claim = stores(tmp_path)[("StatefulSet", "tokenfactory-gateway-postgres")]["spec"]
    assert claim["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "10Gi"
    node = stores(tmp_path, gateway_postgres_storage_mode="host_path", gateway_postgres_host_path_node="spark-01")
    spec = node[("StatefulSet", "tokenfactory-gateway-postgres")]["spec"]
    assert "volumeClaimTemplates" not in spec
    assert spec["template"]["spec"]["volumes"] == [
        {"name": "data", "hostPath": {"path": "/var/lib/tokenfactory/postgres", "type": "DirectoryOrCreate"}}
    ]
    assert spec["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "spark-01"}


def test_no_pod_on_the_request_path_is_best_effort(tmp_path):
    """The gateway, its PostgreSQL and Redis and the status keeper request CPU and memory: a BestEffort pod is the
    first a busy node starves (the rehearsal's Redis beside an engine at full CPU: 4 of 64 requests got 503)."""
    (tmp_path / "gateway").mkdir()
    (tmp_path / "stores").mkdir()
    workloads = {**rendered(tmp_path / "gateway"), **stores(tmp_path / "stores")}
    pods = {
        name: m["spec"]["template"]["spec"]
        for (kind, name), m in workloads.items()
        if kind in ("Deployment", "StatefulSet")
    }
    assert {"tokenfactory-gateway", "tokenfactory-gateway-postgres", "tokenfactory-gateway-redis"} <= set(pods)
    for name, spec in pods.items():
        for container in spec["containers"]:
            requests = container.get("resources", {}).get("requests", {})
            assert {"cpu", "memory"} <= set(requests), (name, container["name"], requests)


def test_the_status_keeper_runs_its_package_from_the_gateway_image_with_its_own_account(tmp_path):
    """Its own ServiceAccount and ClusterRole (least privilege: of the Token Factory kinds the status subresources only,
    besides them the engines' child kinds it applies as the module does, no Secrets); it runs the keeper's package,
    services/status_keeper (the gateway's Containerfile installs it beside the collection's module_utils)."""
    objects = rendered(tmp_path, gateway_status_keeper_interval=7)
    name = "tokenfactory-gateway-status-keeper"
    pod = objects[("Deployment", name)]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["serviceAccountName"] == name
    assert (
        container["image"]
        == objects[("Deployment", "tokenfactory-gateway")]["spec"]["template"]["spec"]["containers"][0]["image"]
    )
    assert container["command"] == ["python", "-m", "tokenfactory_status_keeper"]
    assert (ROOT / "services/status_keeper" / container["command"][2] / "__main__.py").is_file()
    assert "--from=status-keeper tokenfactory_status_keeper" in (ROOT / "services/gateway/Containerfile").read_text()
    assert container["env"] == [{"name": "TF_STATUS_KEEPER_INTERVAL", "value": "7"}]
    rules = objects[("ClusterRole", name)]["rules"]
    writes = [(r["apiGroups"], r["resources"]) for r in rules if set(r["verbs"]) - {"get", "list"}]
    assert writes[0] == (["tokenfactory.io"], ["modeldeployments/status", "endpoints/status"])
    children = {
        (rtype.api_version.rpartition("/")[0], rtype.plural) for e in ENGINES.values() for rtype in e.CHILD_TYPES
    }
    assert {(group, plural) for groups, plurals in writes[1:] for group in groups for plural in plurals} == children
    assert all(r["verbs"] == ["patch"] for r in rules if any("/status" in x for x in r["resources"]))
    assert not [r for r in rules if "secrets" in r["resources"] or "*" in r["resources"] + r["verbs"]]
    for engine in ENGINES.values():  # an operator-run engine's object is read for its phase
        crd = engine.REQUIRED_CRD
        assert not crd or [r for r in rules if [crd["group"]] == r["apiGroups"] and crd["plural"] in r["resources"]]
    binding = objects[("ClusterRoleBinding", name)]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "tokenfactory-system"}]
    assert binding["roleRef"]["name"] == name

    assert not [kind for kind, _name in objects if kind in ("Role", "RoleBinding")], "no Endpoint TLS: no Secret"

    off = rendered(tmp_path, gateway_status_keeper=False, gateway_endpoint_tls_source="public-tls")
    assert not [key for key in off if key[1].startswith(name)]


def test_with_an_endpoint_certificate_the_status_keeper_keeps_the_copy_with_two_named_secrets_only(tmp_path):
    """The Endpoint's TLS Secret (gateway_endpoint_tls_source, from tls.yml) renewed in place reaches the gateway's
    copy without an Ansible run: the keeper is told both, and may get that one Secret in the Endpoint's namespace and
    get and patch the copy in its own, nothing else (no list, no create, no other name)."""
    objects = rendered(
        tmp_path,
        gateway_endpoint_tls_source="public-tls",
        gateway_endpoint="public",
        gateway_endpoint_namespace="tokenfactory",
    )
    name = "tokenfactory-gateway-status-keeper"
    (container,) = objects[("Deployment", name)]["spec"]["template"]["spec"]["containers"]
    assert container["env"][1:] == [
        {"name": "TF_STATUS_KEEPER_ENDPOINT", "value": "tokenfactory/public"},
        {"name": "TF_STATUS_KEEPER_TLS_COPY", "value": "tokenfactory-system/tokenfactory-gateway-tls"},
    ]
    roles = {key: m for key, m in objects.items() if key[0] in ("Role", "RoleBinding")}
    assert sorted(roles) == [
        ("Role", f"{name}-tls-copy"),
        ("Role", f"{name}-tls-source"),
        ("RoleBinding", f"{name}-tls-copy"),
        ("RoleBinding", f"{name}-tls-source"),
    ]
    source, copy = objects[("Role", f"{name}-tls-source")], objects[("Role", f"{name}-tls-copy")]
    assert source["metadata"]["namespace"] == "tokenfactory"
    assert source["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["public-tls"],
                                "verbs": ["get"]}]  # fmt: skip
    assert copy["metadata"]["namespace"] == "tokenfactory-system"
    assert copy["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "resourceNames": ["tokenfactory-gateway-tls"], "verbs": ["get", "patch"]}]  # fmt: skip
    for suffix, namespace in (("tls-source", "tokenfactory"), ("tls-copy", "tokenfactory-system")):
        binding = objects[("RoleBinding", f"{name}-{suffix}")]
        assert binding["metadata"]["namespace"] == namespace
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": f"{name}-{suffix}",
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "tokenfactory-system"}]


def backup_pod(manifest):
    return manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def test_the_ledger_backup_cronjob_dumps_to_a_node_directory_or_a_given_claim(tmp_path):
    cron = stores(tmp_path, gateway_ledger_node="spark-01")[("CronJob", "tokenfactory-gateway-ledger-backup")]
    assert cron["spec"]["schedule"] == "17 3 * * *" and cron["spec"]["timeZone"] == "Etc/UTC"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = backup_pod(cron)
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "spark-01"}
    assert pod["volumes"] == [
        {"name": "backups", "hostPath": {"path": "/var/lib/tokenfactory/backups/ledger", "type": "DirectoryOrCreate"}}
    ]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["PGPASSWORD"] == {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "tokenfactory-gateway-secrets", "key": "postgres-password"}}}  # fmt: skip
    assert (
        env["KEEP"]["value"] == "7"
        and env["PGHOST"]["value"] == "tokenfactory-gateway-postgres.tokenfactory-system.svc"
    )
    assert "pg_dump --format=custom" in container["args"][0]

    on_claim = stores(
        tmp_path, gateway_backup_storage_mode="pvc", gateway_backup_claim="ledger-nfs", gateway_backup_keep=3
    )
    pod = backup_pod(on_claim[("CronJob", "tokenfactory-gateway-ledger-backup")])
    assert pod["nodeSelector"] == {}
    assert pod["volumes"] == [{"name": "backups", "persistentVolumeClaim": {"claimName": "ledger-nfs"}}]
    assert {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}["KEEP"] == "3"

    assert not [k for k in stores(tmp_path, gateway_backup_enabled=False) if k[0] == "CronJob"]


def test_the_restore_job_reads_the_backups_volume_and_targets_the_asked_database(tmp_path):
    out = render_role(tmp_path, "tokenfactory.spark.gateway", "render_restore", ["gateway_restore_manifest"], {
        "gateway_restore_database": "ledger_copy", "gateway_restore_file": "ledger-20261207T031700Z.dump",
        "gateway_ledger_node": "spark-01"})  # fmt: skip
    job = out["gateway_restore_manifest"]
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "spark-01"}
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TARGET"] == "ledger_copy" and env["RESTORE_FILE"] == "ledger-20261207T031700Z.dump"
    assert container["volumeMounts"] == [{"name": "backups", "mountPath": "/backups", "readOnly": True}]
    assert "--single-transaction" in container["args"][0]


def test_the_backup_script_keeps_the_newest_dumps_and_touches_nothing_else(tmp_path):
    """The rendered script run by a real sh against a directory of older dumps (pg_dump stood in by a script that
    writes a file: the real one runs in the lab e2e)."""
    cron = stores(tmp_path, gateway_backup_keep=2)[("CronJob", "tokenfactory-gateway-ledger-backup")]
    (container,) = backup_pod(cron)["containers"]
    backups, bin_dir = tmp_path / "backups", tmp_path / "bin"
    backups.mkdir()
    bin_dir.mkdir()
    for name in ("ledger-20261201T031700Z.dump", "ledger-20261202T031700Z.dump", "ledger-20261203T031700Z.dump",
                 "notes.txt", "ledger-latest.dump"):  # fmt: skip
        (backups / name).write_text("old")
    pg_dump = bin_dir / "pg_dump"
    pg_dump.write_text('#!/bin/sh\nfor a; do case "$a" in --file=*) echo dump > "${a#--file=}";; esac; done\n')
    pg_dump.chmod(0o755)
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    script = container["args"][0].replace("/backups", str(backups))
    ran = subprocess.run(
        [*container["command"], script],
        env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    kept = sorted(p.name for p in backups.iterdir())
    dumps = [name for name in kept if re.match(env["BACKUP_FILES"], name)]
    assert len(dumps) == 2 and dumps[0] == "ledger-20261203T031700Z.dump", kept
    assert {"notes.txt", "ledger-latest.dump"} <= set(kept), "files that are not backups are left alone"
    assert "2 kept (newest 2)" in ran.stdout, ran.stdout
