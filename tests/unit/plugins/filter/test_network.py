import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.tokenfactory.spark.plugins.filter.network import (
    checked_cidr,
    cni_bridge_nodes,
    cidrs_overlap,
    connectx_port_netdev,
    link_address,
)


@pytest.mark.parametrize(
    ("cidr", "index", "expected"),
    [
        ("192.168.100.0/30", 0, "192.168.100.1/30"),
        ("192.168.100.0/30", 1, "192.168.100.2/30"),
        ("192.168.100.0/31", 0, "192.168.100.0/31"),
        ("192.168.100.0/31", 1, "192.168.100.1/31"),
        ("169.254.100.0/24", 1, "169.254.100.2/24"),
        ("fd00:c7::/127", 1, "fd00:c7::1/127"),
    ],
)
def test_link_addresses(cidr, index, expected):
    assert link_address(cidr, index) == expected


@pytest.mark.parametrize(("cidr", "index"), [("192.168.100.0/30", 2), ("192.168.100.0/31", 2), ("10.0.0.0/30", -1)])
def test_link_without_room_names_the_field(cidr, index):
    with pytest.raises(AnsibleFilterError, match=r"connectx_link_cidr=.* no usable address"):
        link_address(cidr, index, field="connectx_link_cidr")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10.244.0.0", "needs a prefix"),
        ("10.244.1.0/16", "host bits set; did you mean 10.244.0.0/16"),
        ("banana/8", "not a CIDR"),
    ],
)
def test_checked_cidr_errors(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        checked_cidr(value, "kubernetes_pod_cidr")


def test_checked_cidr_normalises():
    assert checked_cidr("10.96.0.0/12", "x") == "10.96.0.0/12"


def test_overlap():
    assert cidrs_overlap("10.96.0.0/12", "10.100.0.0/16")
    assert not cidrs_overlap("10.244.0.0/16", "10.96.0.0/12")


SPARK_PORTS = [
    {"netdev": "enP2p1s0f0np0", "pci_address": "0002:01:00.0", "connectx7": True},
    {"netdev": "enp1s0f1np1", "pci_address": "0000:01:00.1", "connectx7": True},
    {"netdev": "enp1s0f0np0", "pci_address": "0000:01:00.0", "connectx7": True},
    {"netdev": "enP2p1s0f1np1", "pci_address": "0002:01:00.1", "connectx7": True},
    {"netdev": "ens9", "pci_address": "0000:00:09.0", "connectx7": False},
]


@pytest.mark.parametrize(("port", "netdev"), [(0, "enp1s0f0np0"), (1, "enp1s0f1np1")])
def test_connectx_port_picks_lowest_domain_function(port, netdev):
    assert connectx_port_netdev(SPARK_PORTS, port) == netdev


def test_connectx_port_missing_lists_what_exists():
    with pytest.raises(AnsibleFilterError, match=r"connectx_physical_port=3: .*enp1s0f0np0 \(0000:01:00.0\)"):
        connectx_port_netdev(SPARK_PORTS, 3)
    with pytest.raises(AnsibleFilterError, match="seen: none"):
        connectx_port_netdev([], 0)


def node(name, cidr, ip):
    return {
        "metadata": {"name": name},
        "spec": {"podCIDR": cidr},
        "status": {"addresses": [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": ip}]},
    }


def test_cni_bridge_nodes_plan_the_routes():
    nodes = [node("spark-02", "10.244.1.0/24", "192.168.100.2"), node("spark-01", "10.244.0.0/24", "192.168.100.1")]
    assert cni_bridge_nodes(nodes, "10.244.0.0/16") == [
        {"name": "spark-01", "pod_cidr": "10.244.0.0/24", "node_ip": "192.168.100.1"},
        {"name": "spark-02", "pod_cidr": "10.244.1.0/24", "node_ip": "192.168.100.2"},
    ]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (node("x", "10.245.0.0/24", "192.168.100.1"), "outside the pod network"),
        ({"metadata": {"name": "x"}, "spec": {}, "status": {}}, "has no spec.podCIDR"),
        (
            {"metadata": {"name": "x"}, "spec": {"podCIDR": "10.244.0.0/24"}, "status": {"addresses": []}},
            "no IPv4 InternalIP",
        ),
    ],
)
def test_cni_bridge_nodes_refuse_what_cannot_be_routed(bad, message):
    with pytest.raises(AnsibleFilterError, match=message):
        cni_bridge_nodes([bad], "10.244.0.0/16")
