"""Bad input to the kubernetes role on a real podman host: a clear error naming the field, nothing installed."""

import pytest

from tests.host_roles.podman_host import PodmanHost, run_role

pytestmark = pytest.mark.molecule

VALID = {
    "kubernetes_install_method": "binary",
    "kubernetes_binary_src_dir": "/nonexistent",  # never reached: every case fails before the install
    "kubernetes_bootstrap": False,
}


@pytest.fixture(scope="module")
def host():
    with PodmanHost() as podman_host:
        yield podman_host


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"kubernetes_pod_cidr": "10.244.0.1/16"},
            "kubernetes_pod_cidr='10.244.0.1/16' has host bits set; did you mean 10.244.0.0/16?",
        ),
        (
            {"kubernetes_pod_cidr": "10.96.0.0/16"},
            "kubernetes_pod_cidr=10.96.0.0/16 and kubernetes_service_cidr=10.96.0.0/12 must be valid, non-overlapping",
        ),
        (
            {"kubernetes_bootstrap_phases": ["control-plane"]},
            "value of kubernetes_bootstrap_phases must be one or more of: certs, kubeconfig",
        ),
    ],
    ids=["host-bits", "overlap", "phase"],
)
def test_refused_before_anything_is_installed(host, overrides, message):
    result = run_role(host, "kubernetes", {**VALID, **overrides})
    assert result.returncode != 0
    assert message in result.stdout, result.stdout[-3000:]
    assert host.exec("test", "-e", "/usr/local/bin/kubeadm", check=False).returncode == 1
    assert host.exec("test", "-e", "/etc/kubernetes", check=False).returncode == 1
