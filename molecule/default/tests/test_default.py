"""Verify the Spark-profile host after converge (testinfra, through podman)."""

import pytest

pytestmark = pytest.mark.molecule


def test_kernel_modules_persisted(host):
    conf = host.file("/etc/modules-load.d/tokenfactory-kubernetes.conf")
    assert conf.content_string.split("\n")[1:3] == ["overlay", "br_netfilter"]


@pytest.mark.parametrize("name", ["net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"])
def test_sysctl_set_and_persisted(host, name):
    assert host.sysctl(name) == 1
    assert f"{name}=1" in host.file("/etc/sysctl.d/90-tokenfactory-kubernetes.conf").content_string


def test_swap_target_masked(host):
    assert host.run("systemctl is-enabled swap.target").stdout.strip() == "masked"


def test_containerd_runs_with_the_lab_cgroup_driver_and_nvidia_dropin(host):
    assert host.service("containerd").is_running
    dump = host.check_output("containerd config dump")
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dump
    # LAB: cgroupfs for runc and nvidia (the kubelet's driver on this cgroup v1 VM; production: systemd), and no
    # negative OOM scores (forbidden here).
    assert dump.count("SystemdCgroup = false") == 2
    assert "restrict_oom_score_adj = true" in dump
    assert host.file("/etc/containerd/conf.d/99-nvidia.toml").exists
    assert "runtimes.nvidia" not in host.file("/etc/containerd/config.toml").content_string


def test_containerd_answers_on_its_socket(host):
    assert "Server:" in host.check_output("ctr version")
