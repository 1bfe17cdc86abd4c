"""The real pair: kubeadm init on tf-spark-01, join of tf-spark-02 over the (SIMULATED) CX-7 link, pods across nodes."""

import ipaddress

import pytest

from tests.host_roles.cluster_checks import condition, delete_pods, get, kubectl, run_pod
from lab.versions import kube_tag

pytestmark = pytest.mark.molecule

# The first and second node (conftest.py's fixtures `first` and `second`).
FIRST, SECOND = "tf-spark-01", "tf-spark-02"
LINK = "enp1s0f0np0"
# Node IPs: the link addresses the connectx role gives (inventories/spark-pair: connectx_link_cidr 192.168.100.0/30).
NODE_IPS = {FIRST: "192.168.100.1", SECOND: "192.168.100.2"}
LINK_MTU = 9000
# IPv4 + ICMP headers: the largest ping payload that fits the MTU unfragmented.
PING_OVERHEAD = 28
# busybox httpd answering with the client address it sees (CGI REMOTE_ADDR).
ADDR_SERVER = (
    "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n'"
    " > /www/cgi-bin/addr && chmod +x /www/cgi-bin/addr && exec httpd -f -p 8080 -h /www"
)


@pytest.fixture(scope="module")
def pods(first):
    """One test pod pinned to each node; the first one's answers HTTP with the client's address."""
    created = {
        FIRST: run_pod(first, f"tf-pair-{FIRST}", node=FIRST, command=["sh", "-c", ADDR_SERVER]),
        SECOND: run_pod(first, f"tf-pair-{SECOND}", node=SECOND),
    }
    yield created
    delete_pods(first, *(pod["metadata"]["name"] for pod in created.values()))


def test_both_nodes_ready_with_their_link_address_as_node_ip(first):
    nodes = {node["metadata"]["name"]: node for node in get(first, "nodes")["items"]}
    assert set(nodes) == {FIRST, SECOND}
    for name, node in nodes.items():
        assert condition(node, "Ready") == "True", name
        internal = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
        assert internal == [NODE_IPS[name]], name
        assert node["status"]["nodeInfo"]["kubeletVersion"] == kube_tag()
        # Both serve the (SIMULATED) GPU and carry the fabric label of the pair.
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1", name
        assert node["metadata"]["labels"]["tokenfactory.io/fabric"] == "connectx_pair", name


def test_first_node_runs_the_control_plane_untainted_and_the_second_joined_as_worker(first, second):
    node = get(first, f"node {FIRST}")
    assert "node-role.kubernetes.io/control-plane" in node["metadata"]["labels"]
    assert not [t for t in node["spec"].get("taints") or [] if t["key"] == "node-role.kubernetes.io/control-plane"]
    assert "node-role.kubernetes.io/control-plane" not in get(first, f"node {SECOND}")["metadata"]["labels"]
    # kubeadm join wrote the worker's kubelet config and flags (node-ip on the link); no join config with a token left.
    assert f"--node-ip={NODE_IPS[SECOND]}" in second.file("/var/lib/kubelet/kubeadm-flags.env").content_string
    assert f"https://{NODE_IPS[FIRST]}:6443" in second.file("/etc/kubernetes/kubelet.conf").content_string
    assert not second.file("/etc/kubernetes/kubeadm-join.yaml").exists
    assert not second.file("/etc/kubernetes/manifests/kube-apiserver.yaml").exists
    assert second.service("kubelet").is_running


def test_kube_system_pods_running_on_both_nodes(first):
    pods = get(first, "pods -n kube-system")["items"]
    for pod in pods:
        assert pod["status"]["phase"] == "Running" and condition(pod, "Ready") == "True", pod["metadata"]["name"]
    proxies = {p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"].get("k8s-app") == "kube-proxy"}
    assert proxies == {FIRST, SECOND}


def test_routes_to_the_other_nodes_pod_subnet_go_over_the_link(first, second, pods):
    """The bridge plugin creates cni0 with the first pod on a node: `pods` pins one to each."""
    cidrs = {name: get(first, f"node {name}")["spec"]["podCIDR"] for name in (FIRST, SECOND)}
    for host, peer in ((first, SECOND), (second, FIRST)):
        routes = host.check_output("ip route show proto 233")
        assert f"{cidrs[peer]} via {NODE_IPS[peer]} dev {LINK}" in routes
    # The pod bridge takes the link's MTU.
    assert f"mtu {LINK_MTU}" in first.check_output("ip link show cni0")


def test_pod_to_pod_across_nodes_at_the_link_mtu_unfragmented(first, pods):
    here, there = pods[FIRST], pods[SECOND]
    target = there["status"]["podIP"]
    assert ipaddress.ip_address(target) in ipaddress.ip_network(get(first, f"node {SECOND}")["spec"]["podCIDR"])
    # The kernel of the first node sends it over the link to the second node's address.
    assert f"via {NODE_IPS[SECOND]} dev {LINK}" in first.check_output(f"ip route get {target}")
    name = here["metadata"]["name"]
    payload = LINK_MTU - PING_OVERHEAD
    kubectl(first, f"exec {name} -- ping -c 3 -W 2 -M do -s {payload} {target}")
    # One byte more does not fit unfragmented: the check can fail.
    with pytest.raises(AssertionError, match="ping"):
        kubectl(first, f"exec {name} -- ping -c 1 -W 2 -M do -s {payload + 1} {target}")


def test_coredns_resolves_kubernetes_default_from_the_second_node(first, pods):
    name = pods[SECOND]["metadata"]["name"]
    assert pods[SECOND]["spec"]["nodeName"] == SECOND
    resolved = kubectl(first, f"exec {name} -- getent hosts kubernetes.default").split()
    assert resolved[:2] == ["10.96.0.1", "kubernetes.default.svc.cluster.local"]
    # The Service VIP reaches the API server on the first node through kube-proxy's rules and the link.
    assert "ok" in kubectl(first, f"exec {name} -- curl -sSk --max-time 5 https://kubernetes.default/livez")


def test_pod_traffic_between_nodes_keeps_the_pod_address(first, pods):
    """No SNAT between the nodes' pod subnets: the server on the first node sees the client pod's own address."""
    server = pods[FIRST]["status"]["podIP"]
    seen = kubectl(
        first, f"exec {pods[SECOND]['metadata']['name']} -- curl -sS --max-time 5 http://{server}:8080/cgi-bin/addr"
    )
    # busybox listens on a dual-stack socket: IPv4 clients show as [::ffff:a.b.c.d].
    assert seen.strip().removeprefix("[::ffff:").removesuffix("]") == pods[SECOND]["status"]["podIP"]
