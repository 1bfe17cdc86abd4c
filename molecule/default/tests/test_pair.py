"""Verify the pair: addresses, netplan, link with jumbo frames, SSH trust, workload settings."""

import pytest

pytestmark = pytest.mark.molecule

# The link network's interface name, pinned in molecule.yml (a DGX Spark CX-7 port name).
LINK = "enp1s0f0np0"
ADDRESSES = {"tf-spark-01": ("192.168.100.1", "192.168.100.2"), "tf-spark-02": ("192.168.100.2", "192.168.100.1")}


def addresses(host):
    """(this host's link address, the peer's)."""
    return ADDRESSES[host.check_output("hostname")]


def test_link_address_and_mtu(host):
    mine = addresses(host)[0]
    assert f"inet {mine}/30" in host.check_output(f"ip -o addr show dev {LINK}")
    assert "mtu 9000" in host.check_output(f"ip link show {LINK}")


def test_netplan_file_is_private_and_valid(host):
    netplan = host.file("/etc/netplan/40-cx7.yaml")
    assert netplan.mode == 0o600
    assert host.run("netplan generate").rc == 0


def test_jumbo_frames_cross_the_link_unfragmented(host):
    peer = addresses(host)[1]
    assert host.run(f"ping -c 2 -W 2 -M do -s 8972 -I {LINK} {peer}").rc == 0
    # One byte over the MTU must be refused, proving the check can fail.
    assert host.run(f"ping -c 1 -W 2 -M do -s 8973 -I {LINK} {peer}").rc != 0


def test_ssh_to_peer_over_the_link_without_password(host):
    me, peer = host.check_output("hostname"), addresses(host)[1]
    other = host.check_output(f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes {peer} hostname")
    assert other != me and other.startswith("tf-spark-")


def test_workload_interface_settings(host):
    env = host.file("/etc/tokenfactory/fabric.env").content_string
    for line in (
        f"NCCL_SOCKET_IFNAME={LINK}",
        f"GLOO_SOCKET_IFNAME={LINK}",
        f"UCX_NET_DEVICES={LINK}",
        "TOKENFACTORY_FABRIC=connectx_pair",  # the pair inventory's group name
    ):
        assert line in env
    assert f"NCCL_SOCKET_IFNAME={LINK}" in host.check_output("bash -lc env")


def test_management_route_untouched(host):
    assert "dev eth0" in host.check_output("ip route show default")
    assert host.check_output(f"ip route show default dev {LINK}") == ""
