"""`make lab LAB_INVENTORY=inventories/lab-pair` as a test (marker e2e_pair, `make test-e2e-pair`): lab-clean, a
cold run, a warm run, checks, lab-clean. Two podman Sparks cabled by the SIMULATED ConnectX-7 link (an internal
podman network with the link's MTU): the product - `ansible-playbook -i inventories/lab-pair tokenfactory.spark.site`
- runs kubeadm init on the first, joins the second over the link, and serves the model with one engine replica per
node behind the gateway; validation goes over HTTPS through the Endpoint. See docs/lab.md."""

import ipaddress
import json
import socket
import ssl
import subprocess

import pytest

from lab.paths import lab_root
from tests.e2e.lab_run import engine_pods, inventory_values, kubectl, ledger, make, parts, pod_token_counters
from tests.playbooks.ansible_run import play_recap
from lab.versions import kube_tag

pytestmark = [pytest.mark.e2e_pair, pytest.mark.slow, pytest.mark.timeout(7200)]
INVENTORY = "inventories/lab-pair"
NAMES = (
    "tf_cluster_name", "tf_lab_link", "connectx_link_cidr", "connectx_mtu", "tf_endpoint_hostname", "tf_lab_tls_dir",
    "tf_api_key_dir", "tf_lab_tenant", "tf_api_key_name", "tf_namespace", "tf_model_deployment",
    "tf_served_model_name", "tf_replicas", "tf_validate_requests",
)  # fmt: skip


@pytest.fixture(scope="module")
def pair():
    """The inventory's values, its two nodes and their management addresses."""
    values = inventory_values(INVENTORY, (*NAMES, "groups['control_plane'][0]", "groups['workers'][0]"))
    first, second = values["groups['control_plane'][0]"], values["groups['workers'][0]"]
    addresses = inventory_values(INVENTORY, (f"hostvars['{first}'].ansible_host", f"hostvars['{second}'].ansible_host"))
    values["nodes"] = [first, second]
    values["addresses"] = {first: addresses[f"hostvars['{first}'].ansible_host"],
                           second: addresses[f"hostvars['{second}'].ansible_host"]}  # fmt: skip
    return values


@pytest.fixture(scope="module")
def runs(pair):
    make("lab-clean", INVENTORY)
    cold, cold_s = make("lab", INVENTORY)
    warm, warm_s = make("lab", INVENTORY)
    yield {"cold": cold, "warm": warm, "cold_s": cold_s, "warm_s": warm_s}
    make("lab-clean", INVENTORY)


def control_plane(pair):
    return pair["nodes"][0]


def pods_of_the_deployment(pair):
    return engine_pods(control_plane(pair), pair["tf_namespace"], pair["tf_model_deployment"])


def test_cold_run_succeeds_on_both_nodes_and_names_the_simulated_link(runs, pair):
    for part, text in parts(runs["cold"], INVENTORY).items():
        hosts = play_recap(text)
        assert all(h["failed"] == 0 and h["unreachable"] == 0 for h in hosts.values()), (part, hosts)
    product = play_recap(parts(runs["cold"], INVENTORY)["product"])
    assert all(product[node]["changed"] > 0 for node in pair["nodes"]), product
    banner = " ".join(runs["cold"].split("TASK [")[1].split())
    assert banner.count("SIMULATED:") == 1 and f"is the internal podman network {pair['tf_lab_link']['name']}" in banner


def test_second_run_changes_nothing(runs):
    """Every playbook of the warm run - lab/hosts.yml, the product's site.yml, lab/ledger.yml - has changed=0."""
    for part, text in parts(runs["warm"], INVENTORY).items():
        hosts = play_recap(text)
        assert all(h["changed"] == 0 and h["failed"] == 0 for h in hosts.values()), (part, hosts)
    print(f"pair lab cold {runs['cold_s']:.0f} s, warm {runs['warm_s']:.0f} s")


def test_both_nodes_ready_and_the_worker_joined_over_the_link(runs, pair):
    link = ipaddress.ip_network(pair["connectx_link_cidr"])
    nodes = {
        n["metadata"]["name"]: n
        for n in json.loads(kubectl(control_plane(pair), "get", "nodes", "-o", "json"))["items"]
    }
    assert sorted(nodes) == sorted(pair["nodes"])
    for name, node in nodes.items():
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True", name
        assert node["status"]["nodeInfo"]["kubeletVersion"] == kube_tag()
        # SIMULATED GPU on each node (the worker's advertised with its own kubelet credentials).
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1", name
        internal = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
        assert len(internal) == 1 and ipaddress.ip_address(internal[0]) in link, (name, internal)
    # The link inside the worker: the CX-7 port's name, the link's MTU, the address kubeadm joined with.
    worker = pair["nodes"][1]
    shown = json.loads(
        subprocess.run(
            ["podman", "exec", worker, "ip", "-j", "addr", "show", "dev", pair["tf_lab_link"]["interface"]],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
    )  # fmt: skip
    assert shown[0]["mtu"] == int(pair["connectx_mtu"])
    worker_ip = next(a["address"] for a in nodes[worker]["status"]["addresses"] if a["type"] == "InternalIP")
    assert worker_ip in [a["local"] for a in shown[0]["addr_info"]]


def test_one_engine_pod_per_node_ready(runs, pair):
    pods = pods_of_the_deployment(pair)
    assert len(pods) == pair["tf_replicas"] == 2
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(pair["nodes"])
    for pod in pods:
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True", pod["metadata"]["name"]


def test_validation_reached_both_engine_pods_and_the_ledger_is_their_sum(runs, pair):
    """The gateway spread the validation traffic over both replicas (each pod's own counters rose), and every token
    both counted went through the gateway and was metered: ledger = the sum over the engine pods, on both runs."""
    product = parts(runs["cold"], INVENTORY)["product"]
    assert f"tf_endpoint_base_url: https://{pair['tf_endpoint_hostname']}/v1" in product.split("CUSTOM STATS")[-1]
    requests = pair["tf_validate_requests"]
    assert f"{pair['tf_model_deployment']} localhost {requests}/{requests}" in " ".join(product.split())
    cold, warm = ledger(runs["cold"]), ledger(runs["warm"])
    assert cold[0] >= requests and warm[0] >= cold[0] + requests and warm[3] > cold[3], (cold, warm)
    for run in (cold, warm):
        assert (run[1], run[2]) == (run[4], run[5]), run
    counters = [pod_token_counters(control_plane(pair), pod) for pod in pods_of_the_deployment(pair)]
    assert all(prompt > 0 and generation > 0 for prompt, generation in counters), counters
    assert tuple(map(sum, zip(*counters, strict=True))) == (warm[1], warm[2]), (counters, warm)
    print(f"engine pods' (prompt, generation) tokens: {counters}; ledger: {warm[1]} + {warm[2]}")


def https_models(pair, address):
    """GET /v1/models from this machine on `address`:443 by the Endpoint's hostname (SNI), trusting the lab CA only."""
    context = ssl.create_default_context(cafile=f"{pair['tf_lab_tls_dir']}/ca.crt")
    key_file = f"{pair['tf_api_key_dir']}/{pair['tf_lab_tenant']}/{pair['tf_api_key_name']}.key"
    with open(key_file, encoding="utf-8") as key:
        request = f"GET /v1/models HTTP/1.1\r\nHost: {pair['tf_endpoint_hostname']}\r\n"
        request += f"Authorization: Bearer {key.read().strip()}\r\nConnection: close\r\n\r\n"
    with (
        socket.create_connection((address, 443), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=pair["tf_endpoint_hostname"]) as tls,
    ):
        tls.sendall(request.encode())
        return b"".join(iter(lambda: tls.recv(65536), b"")).decode()


def test_the_endpoint_answers_on_both_sparks_management_addresses(runs, pair):
    """The node IPs are the link's: the gateway's externalIPs are the management addresses (inventories/spark-pair),
    so the Endpoint answers on either Spark's; its name resolves to the first (lab/hosts.yml's /etc/hosts line)."""
    for node, address in pair["addresses"].items():
        answer = https_models(pair, address)
        assert answer.startswith("HTTP/1.1 200") and pair["tf_served_model_name"] in answer, (node, answer[:300])
    assert socket.gethostbyname(pair["tf_endpoint_hostname"]) == pair["addresses"][control_plane(pair)]


def test_lab_clean_leaves_no_pair_hosts_volumes_or_link(runs, pair):
    """Last: `make lab-clean` on the pair inventory removes both hosts, their volumes, the link network, the /etc/hosts
    line and the cluster's state (the fixture's own lab-clean after it finds nothing left)."""
    make("lab-clean", INVENTORY)

    def podman(*args):
        return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=60, check=False)

    for node in pair["nodes"]:
        assert podman("container", "exists", node).returncode == 1, node
        for volume in ("containerd", "kubelet"):
            assert podman("volume", "exists", f"tf-{node}-{volume}").returncode == 1, (node, volume)
    assert podman("network", "exists", pair["tf_lab_link"]["name"]).returncode == 1
    with open("/etc/hosts", encoding="utf-8") as hosts:
        assert pair["tf_endpoint_hostname"] not in hosts.read()
    assert not (lab_root() / pair["tf_cluster_name"]).exists()
