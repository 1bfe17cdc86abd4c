"""The gateway role serves the Endpoint (against the real API server; the gateway pods are kwok's): the gateway is
deployed in plain HTTP before any Endpoint exists, the `endpoint` entry point copies the Endpoint's TLS Secret into
the gateway's namespace and turns HTTPS on (and gives the status keeper, which keeps the copy from then on, access to
those two Secrets only), a rerun changes nothing, a renewed certificate is copied without a new rollout (the gateway
reloads it), and the public Service sits on the node's address."""

import base64
import json
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import DEPLOYMENT, NODE, SECRET, SERVICE

from tests.modules.lab_helpers import self_signed
from tests.playbooks.ansible_run import play_recap, run_playbook

pytestmark = pytest.mark.lab
KEEPER = "tokenfactory-gateway-status-keeper"


def changed(stdout):
    return play_recap(stdout)["localhost"]["changed"]


def play(tmp_path, lab, namespace, tasks_from, extra=None, check=True):
    gateway_vars = {
        "gateway_namespace": f"{namespace}-gw",
        "gateway_kubeconfig": str(lab.kubeconfig),
        "gateway_postgres_mode": "external",
        "gateway_postgres_dsn": "postgresql://tokenfactory@db.example:5432/tokenfactory",
        "gateway_redis_mode": "external",
        "gateway_redis_url": "redis://cache.example:6379/0",
        "gateway_replicas": 2,
        "gateway_wait_timeout": 120,
        "gateway_endpoint": "public",
        "gateway_endpoint_namespace": namespace,
        **(extra or {}),
    }
    path = tmp_path / f"{tasks_from}.yml"
    path.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "ansible.builtin.include_role": {
                                "name": "tokenfactory.spark.gateway",
                                "tasks_from": tasks_from,
                            },
                            "vars": gateway_vars,
                        }
                    ],
                }
            ]
        )
    )
    return run_playbook(path, "-i", "localhost,", "-c", "local", check=check)


def test_the_gateway_serves_the_endpoint_certificate(tf_lab, tmp_path):
    kube = tf_lab.kube
    namespace = tf_lab.namespace()
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{namespace}-gw"}})
    gateway_ns = f"{namespace}-gw"

    first = play(tmp_path, tf_lab, namespace, "main")  # no Endpoint yet: plain HTTP
    assert changed(first.stdout) > 0
    env = {
        e["name"]
        for e in kube.get(DEPLOYMENT, "tokenfactory-gateway", gateway_ns)["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
    }
    assert "TF_GATEWAY_TLS_CERT_FILE" not in env
    node_ips = sorted(
        a["address"] for n in kube.list(NODE) for a in n["status"]["addresses"] if a["type"] == "InternalIP"
    )
    public = kube.get(SERVICE, "tokenfactory-gateway-public", gateway_ns)["spec"]
    assert public["externalIPs"] == node_ips and public["ports"][0]["port"] == 443

    cert, key = self_signed("llm.example.com")
    tf_lab.ok("compute_cluster", name="spark", namespace=namespace)
    endpoint = {
        "name": "public",
        "namespace": namespace,
        "hostname": "llm.example.com",
        "compute_cluster": "spark",
        "gateway": {"namespace": gateway_ns},
    }
    tf_lab.ok("endpoint", tls_cert=cert, tls_key=key, **endpoint)
    served = play(tmp_path, tf_lab, namespace, "endpoint")
    assert changed(served.stdout) > 0
    copied = kube.get(SECRET, "tokenfactory-gateway-tls", gateway_ns)
    assert copied["type"] == "kubernetes.io/tls"
    assert base64.b64decode(copied["data"]["tls.crt"]).decode() == cert
    assert cert not in served.stdout and key.split("\n")[1] not in served.stdout  # never printed
    deployment = kube.get(DEPLOYMENT, "tokenfactory-gateway", gateway_ns)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "TF_GATEWAY_TLS_CERT_FILE", "value": "/etc/tokenfactory-gateway/tls/tls.crt"} in container["env"]
    assert kube.get(SERVICE, "tokenfactory-gateway-public", gateway_ns)["spec"]["ports"][0]["name"] == "https"
    # The status keeper keeps the copy from now on (a renewal needs no Ansible run), on those two Secrets only.
    keeper = kube.get(DEPLOYMENT, KEEPER, gateway_ns)["spec"]["template"]["spec"]
    assert {"name": "TF_STATUS_KEEPER_TLS_COPY", "value": f"{gateway_ns}/tokenfactory-gateway-tls"} in (
        keeper["containers"][0]["env"]
    )
    for where, role, secret in ((namespace, "source", "public-tls"), (gateway_ns, "copy", "tokenfactory-gateway-tls")):
        path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{where}/roles/{KEEPER}-tls-{role}"
        (rule,) = kube.request("GET", path)["rules"]
        assert rule["resources"] == ["secrets"] and rule["resourceNames"] == [secret], rule
    assert changed(play(tmp_path, tf_lab, namespace, "endpoint").stdout) == 0

    renewed, renewed_key = self_signed("llm.example.com")
    tf_lab.ok("endpoint", tls_cert=renewed, tls_key=renewed_key, **endpoint)
    generation = deployment["metadata"]["generation"]
    assert changed(play(tmp_path, tf_lab, namespace, "endpoint").stdout) == 1  # the copy, nothing else
    assert base64.b64decode(kube.get(SECRET, "tokenfactory-gateway-tls", gateway_ns)["data"]["tls.crt"]).decode() == (
        renewed
    )
    assert kube.get(DEPLOYMENT, "tokenfactory-gateway", gateway_ns)["metadata"]["generation"] == generation

    status = tf_lab.ok("endpoint", tls_cert=renewed, tls_key=renewed_key, **endpoint)["endpoint"]["status"]
    assert status["phase"] == "Ready" and status["gatewayReadyPods"] == 2, status
    assert status["baseURL"] == "https://llm.example.com/v1"


def test_bad_exposure_settings_fail_before_anything_is_applied(tf_lab, tmp_path):
    namespace = f"tf-{uuid.uuid4().hex[:6]}"
    proc = play(tmp_path, tf_lab, namespace, "main", {"gateway_admin_node_port": 8081}, check=False)
    assert proc.returncode != 0
    assert "gateway_admin_node_port 0 or in the NodePort range 30000-32767 (got 8081)" in " ".join(proc.stdout.split())
    assert tf_lab.kube.get(SERVICE, "tokenfactory-gateway-public", f"{namespace}-gw") is None


def test_admin_access_reads_the_token_and_the_admin_node_port_url(tf_lab, tmp_path):
    kube = tf_lab.kube
    gateway_ns = f"{tf_lab.namespace()}-gw"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": gateway_ns}})
    facts = tmp_path / "facts.json"
    role_vars = {"gateway_namespace": gateway_ns, "gateway_kubeconfig": str(tf_lab.kubeconfig),
                 "gateway_admin_node_port": 30081}  # fmt: skip
    tasks = [
        {"ansible.builtin.include_role": {"name": "tokenfactory.spark.gateway", "tasks_from": "admin_access"},
         "vars": role_vars},
        {"ansible.builtin.copy": {"dest": str(facts), "mode": "0600",
         "content": "{{ {'token': gateway_admin_token, 'url': gateway_admin_node_url} | to_json }}"}},
    ]  # fmt: skip
    book = tmp_path / "admin_access.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))

    missing = run_playbook(book, "-i", "localhost,", "-c", "local", check=False)
    assert missing.returncode != 0
    assert f"Secret {gateway_ns}/tokenfactory-gateway-secrets not found: deploy the gateway first" in missing.stdout

    token = "adm-" + uuid.uuid4().hex
    secret = {"name": "tokenfactory-gateway-secrets", "namespace": gateway_ns}
    data = {"admin-token": base64.b64encode(token.encode()).decode()}
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": secret, "data": data})
    found = run_playbook(book, "-i", "localhost,", "-c", "local", "-v")
    assert token not in found.stdout
    node_ip = next(a["address"] for a in kube.list(NODE)[0]["status"]["addresses"] if a["type"] == "InternalIP")
    assert json.loads(facts.read_text()) == {"token": token, "url": f"http://{node_ip}:30081"}
    # Where the node IPs are not the controller's way to the nodes (a Spark pair's are its link addresses).
    run_playbook(book, "-i", "localhost,", "-c", "local", "-e", "gateway_admin_node_address=192.0.2.11")
    assert json.loads(facts.read_text())["url"] == "http://192.0.2.11:30081"


def test_postgres_on_a_pvc_without_a_storage_class_fails_in_preflight_with_nothing_created(tf_lab, tmp_path):
    """The lab's API server has no StorageClass, as a bare Spark: the role stops before its first object."""
    namespace = tf_lab.namespace()
    extra = {"gateway_postgres_mode": "in_cluster", "gateway_postgres_storage_mode": "pvc"}
    run = play(tmp_path, tf_lab, namespace, "main", extra, check=False)
    assert run.returncode != 0
    assert "gateway_postgres_storage_mode=pvc needs a StorageClass, and the cluster has no default one" in run.stdout
    assert play_recap(run.stdout)["localhost"]["changed"] == 0
    assert tf_lab.kube.list(SECRET, f"{namespace}-gw") == []
    assert tf_lab.kube.list(DEPLOYMENT, f"{namespace}-gw") == []
