"""Verify the pair: addresses, netplan, link with jumbo frames, SSH trust, workload settings."""

import pytest

pytestmark = pytest.mark.molecule

ADDRESSES = {"tf-spark-a": ("192.168.100.1", "192.168.100.2"), "tf-spark-b": ("192.168.100.2", "192.168.100.1")}


def addresses(host):
    """(this host's link address, the peer's)."""
    return ADDRESSES[host.check_output("hostname")]


def test_link_address_and_mtu(host):
    mine = addresses(host)[0]
    assert f"inet {mine}/30" in host.check_output("ip -o addr show dev eth1")
    assert "mtu 9000" in host.check_output("ip link show eth1")


def test_netplan_file_is_private_and_valid(host):
    netplan = host.file("/etc/netplan/40-cx7.yaml")
    assert netplan.mode == 0o600
    assert host.run("netplan generate").rc == 0


def test_jumbo_frames_cross_the_link_unfragmented(host):
    peer = addresses(host)[1]
    assert host.run(f"ping -c 2 -W 2 -M do -s 8972 -I eth1 {peer}").rc == 0
    # One byte over the MTU must be refused, proving the check can fail.
    assert host.run(f"ping -c 1 -W 2 -M do -s 8973 -I eth1 {peer}").rc != 0


def test_ssh_to_peer_over_the_link_without_password(host):
    me, peer = host.check_output("hostname"), addresses(host)[1]
    other = host.check_output(f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes {peer} hostname")
    assert other != me and other.startswith("tf-spark-")


def test_workload_interface_settings(host):
    env = host.file("/etc/tokenfactory/fabric.env").content_string
    for line in (
        "NCCL_SOCKET_IFNAME=eth1",
        "GLOO_SOCKET_IFNAME=eth1",
        "UCX_NET_DEVICES=eth1",
        "TOKENFACTORY_FABRIC=spark_pair",
    ):
        assert line in env
    assert "NCCL_SOCKET_IFNAME=eth1" in host.check_output("bash -lc env")
