"""The SHIPPED inventories/spark-pair, rehearsed end to end on two podman Spark hosts cabled by the SIMULATED
ConnectX-7 link (make test-rehearsal-pair): only the overlay tests/rehearsal/spark-pair on top (tests/rehearsal/
shipped.py). spark-01 runs kubeadm init, spark-02 joins over the link, the model is served with one engine replica
per Spark behind the gateway; validate PASS over HTTPS with the site CA the collection created, the Endpoint on both
management addresses, pod-to-pod traffic between the Sparks on the link, and a second run that changes nothing."""

import base64
import datetime
import ipaddress
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lab.versions import kube_tag
from tests.e2e.lab_run import engine_pods, kubectl, pod_token_counters
from tests.playbooks.ansible_run import play_recap
from tests.rehearsal.shipped import (
    Shipped,
    assert_second_run_changes_nothing,
    assert_validated_over_https,
    https_get,
    rehearse,
)

pytestmark = [pytest.mark.rehearsal_pair, pytest.mark.slow, pytest.mark.timeout(7200)]
SHIPPED = Shipped("spark-pair")
FIRST, SECOND = list(SHIPPED.addresses)  # the control plane, then the worker
CONNECTX = yaml.safe_load((SHIPPED.inventory / "group_vars/all/connectx.yml").read_text())
LINK = yaml.safe_load((SHIPPED.overlay / "group_vars/all/simulated_link.yml").read_text())["tf_lab_link"]
GATEWAY_NAMESPACE = SHIPPED.gateway_namespace
REPLICAS = yaml.safe_load((SHIPPED.inventory / "group_vars/all/pair_serving.yml").read_text())["tf_replicas"]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    yield from rehearse(SHIPPED, tmp_path_factory)


def on_node(node, *command):
    return subprocess.run(
        ["podman", "exec", node, *command], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def interface_bytes(node, device):
    """(rx, tx) byte counters of `device` on `node`."""
    (link,) = json.loads(on_node(node, "ip", "-j", "-s", "link", "show", "dev", device))
    stats = link["stats64"]
    return stats["rx"]["bytes"], stats["tx"]["bytes"]


def test_the_simulation_boundary_names_the_link(rehearsal):
    banner = " ".join(rehearsal["hosts"].split())
    assert "SIMULATED: GPU and its driver" in banner and "SIMULATION of the public internet" in banner
    assert f"the ConnectX-7 link between {FIRST} and {SECOND} is the internal podman network" in banner


def test_cold_run_ends_in_validate_pass_over_https_on_both_sparks(rehearsal):
    recap = play_recap(rehearsal["cold"])
    assert all(recap[node]["failed"] == 0 and recap[node]["changed"] > 0 for node in (FIRST, SECOND)), recap
    assert_validated_over_https(SHIPPED, rehearsal)


def test_second_run_changes_nothing(rehearsal):
    assert_second_run_changes_nothing(rehearsal)


def nodes():
    items = json.loads(kubectl(FIRST, "get", "nodes", "-o", "json"))["items"]
    return {n["metadata"]["name"]: n for n in items}


def internal_ip(node):
    (address,) = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    return address


def test_both_sparks_ready_and_the_second_joined_over_the_link(rehearsal):
    link = ipaddress.ip_network(CONNECTX["connectx_link_cidr"])
    found = nodes()
    assert sorted(found) == sorted((FIRST, SECOND))
    for name, node in found.items():
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True", name
        assert node["status"]["nodeInfo"]["kubeletVersion"] == kube_tag()
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1", name  # SIMULATED GPU
        assert ipaddress.ip_address(internal_ip(node)) in link, name
    (shown,) = json.loads(on_node(SECOND, "ip", "-j", "addr", "show", "dev", LINK["interface"]))
    assert shown["mtu"] == CONNECTX["connectx_mtu"]
    assert internal_ip(found[SECOND]) in [a["local"] for a in shown["addr_info"]]


def test_one_engine_replica_per_spark_and_validation_reached_both(rehearsal):
    pods = engine_pods(FIRST, SHIPPED.namespace, SHIPPED.deployment)
    assert len(pods) == REPLICAS == 2
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted((FIRST, SECOND))
    for pod in pods:
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True", pod["metadata"]["name"]
    counters = [pod_token_counters(FIRST, pod) for pod in pods]
    assert all(prompt > 0 and generation > 0 for prompt, generation in counters), counters


def test_the_endpoint_answers_on_both_management_addresses(rehearsal):
    """The node IPs are the link's; the gateway's externalIPs are the Sparks' management addresses (connectx.yml), so
    the Endpoint answers on either, by the name its certificate carries (the first Spark's address)."""
    key = rehearsal["key_file"].read_text().strip()
    assert key not in rehearsal["cold"] + rehearsal["warm"], "the key value must never be printed"
    hostname = SHIPPED.addresses[FIRST]
    for node, address in SHIPPED.addresses.items():
        status, body = https_get(address, hostname, "/v1/models", key, rehearsal["ca"])
        assert status.startswith("HTTP/1.1 200") and SHIPPED.model in body, (node, status, body[:300])


def test_admin_api_only_on_the_admin_node_port_of_the_first_spark(rehearsal):
    token = rehearsal["admin_token"]
    key = rehearsal["key_file"].read_text().strip()
    address = SHIPPED.addresses[FIRST]
    status, _body = https_get(address, address, "/admin/v1/tenants", token, rehearsal["ca"])
    assert status.startswith("HTTP/1.1 404"), status
    admin = urllib.request.Request(
        f"http://{address}:{SHIPPED.admin_node_port}/admin/v1/tenants", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(admin, timeout=30) as answer:  # noqa: S310 - the management address
        assert SHIPPED.tenant in {t["name"] for t in json.load(answer)["data"]}
    as_tenant = urllib.request.Request(admin.full_url, headers={"Authorization": f"Bearer {key}"})  # noqa: S310
    with pytest.raises(urllib.error.HTTPError) as refused:  # a tenant's key is not an admin token
        urllib.request.urlopen(as_tenant, timeout=30)  # noqa: S310 - the management address
    assert refused.value.code == 401
    assert token not in rehearsal["cold"] + rehearsal["warm"]


def test_pod_to_pod_traffic_between_the_sparks_goes_over_the_link(rehearsal):
    """A pod on one Spark reads the engine pod on the other Spark (its /metrics, 20 times): the bytes leave and arrive
    on the link's interface (enp1s0f0np0) of the engine's Spark, not on its management interface (eth0)."""
    pods = json.loads(kubectl(FIRST, "-n", GATEWAY_NAMESPACE, "get", "pods", "-o", "json"))["items"]
    gateway = next(p for p in pods if "gateway" in {c["name"] for c in p["spec"]["containers"]})
    (engine,) = [
        p
        for p in engine_pods(FIRST, SHIPPED.namespace, SHIPPED.deployment)
        if p["spec"]["nodeName"] != gateway["spec"]["nodeName"]
    ]
    target = engine["spec"]["nodeName"]
    port = engine["spec"]["containers"][0]["ports"][0]["containerPort"]
    url = f"http://{engine['status']['podIP']}:{port}/metrics"
    read = (
        "import sys, urllib.request as u; print(sum(len(u.urlopen(sys.argv[1], timeout=10).read()) for _ in range(20)))"
    )
    before = {dev: interface_bytes(target, dev) for dev in (LINK["interface"], "eth0")}
    sent = int(kubectl(FIRST, "-n", GATEWAY_NAMESPACE, "exec", gateway["metadata"]["name"], "-c", "gateway", "--",
                       "python", "-c", read, url))  # fmt: skip
    after = {dev: interface_bytes(target, dev) for dev in (LINK["interface"], "eth0")}
    link_tx = after[LINK["interface"]][1] - before[LINK["interface"]][1]
    mgmt_tx = after["eth0"][1] - before["eth0"][1]
    print(f"{sent} bytes of /metrics from {target}: link tx +{link_tx}, eth0 tx +{mgmt_tx}")
    assert link_tx >= sent > 100_000, (sent, link_tx)
    assert mgmt_tx < sent / 4, (sent, mgmt_tx)


def served_serial(address):
    return x509.load_pem_x509_certificate(ssl.get_server_certificate((address, 443)).encode()).serial_number


def renewed(pem, ca_dir):
    """A new certificate and key for what `pem` certifies (subject, SANs), signed by the site CA, as cert-manager
    would renew it."""
    old = x509.load_pem_x509_certificate(pem)
    ca_cert = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(old.subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=90))
        .add_extension(old.extensions.get_extension_for_class(x509.SubjectAlternativeName).value, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert, cert.public_bytes(serialization.Encoding.PEM), key_pem


def test_a_renewed_endpoint_certificate_reaches_the_gateway_without_an_ansible_run(rehearsal):
    """Last (it changes the Endpoint's Secret): the Endpoint's TLS Secret renewed in place, as cert-manager does; the
    status keeper copies it into the gateway's namespace, the kubelet refreshes the gateway's Secret volume and the
    gateway reloads it: the Endpoint serves the new certificate, no Ansible run, no pod restart."""
    (endpoint,) = json.loads(kubectl(FIRST, "-n", SHIPPED.namespace, "get", "endpoints.tokenfactory.io", "-o", "json"))[
        "items"
    ]
    name = endpoint["spec"]["tls"]["secretName"]
    secret = json.loads(kubectl(FIRST, "-n", SHIPPED.namespace, "get", "secret", name, "-o", "json"))
    cert, cert_pem, key_pem = renewed(base64.b64decode(secret["data"]["tls.crt"]), rehearsal["ca"].parent)
    address = SHIPPED.addresses[FIRST]
    assert served_serial(address) != cert.serial_number
    pods_before = json.loads(kubectl(FIRST, "-n", GATEWAY_NAMESPACE, "get", "pods", "-o", "json"))["items"]
    secret["data"] = {"tls.crt": base64.b64encode(cert_pem).decode(), "tls.key": base64.b64encode(key_pem).decode()}
    for field in ("resourceVersion", "managedFields", "uid", "creationTimestamp"):
        secret["metadata"].pop(field, None)
    subprocess.run(
        ["podman", "exec", "-i", FIRST, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "apply", "-f", "-"],
        input=json.dumps(secret), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    started = time.monotonic()
    while served_serial(address) != cert.serial_number:
        assert time.monotonic() - started < 300, "the renewed certificate is not served after 300 s"
        time.sleep(2)
    print(f"renewed certificate served {time.monotonic() - started:.0f} s after the Secret changed")
    pods_after = json.loads(kubectl(FIRST, "-n", GATEWAY_NAMESPACE, "get", "pods", "-o", "json"))["items"]
    restarts = {
        p["metadata"]["name"]: [c["restartCount"] for c in p["status"]["containerStatuses"]] for p in pods_before
    }
    assert {
        p["metadata"]["name"]: [c["restartCount"] for c in p["status"]["containerStatuses"]] for p in pods_after
    } == (restarts)
    logs = kubectl(FIRST, "-n", GATEWAY_NAMESPACE, "logs", "deployment/tokenfactory-gateway-status-keeper")
    assert key_pem.decode().splitlines()[1] not in logs and base64.b64encode(key_pem).decode()[:40] not in logs
