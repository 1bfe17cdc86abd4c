"""The arm64 host really runs aarch64 binaries and ends up prepared."""

import pytest

pytestmark = pytest.mark.molecule


def test_userland_is_aarch64(host):
    assert host.check_output("uname -m") == "aarch64"
    assert host.check_output("dpkg --print-architecture") == "arm64"


def test_host_prep_applied(host):
    assert "br_netfilter" in host.file("/etc/modules-load.d/tokenfactory-kubernetes.conf").content_string
    assert host.sysctl("net.ipv4.ip_forward") == 1
    assert host.run("systemctl is-enabled swap.target").stdout.strip() == "masked"
