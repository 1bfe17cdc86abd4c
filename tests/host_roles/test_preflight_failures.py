"""Each failure the preflight role claims to catch, provoked on a real podman systemd host.

GPU states come from the nvidia-smi SIMULATION (recorded outputs; no GPU exists on these machines).
Swap is shown to the host through a bind-mounted /proc/swaps (the lxcfs technique), because turning
swap on would change the shared test machine.
"""

import pytest

from tests.host_roles.podman_host import PodmanHost, run_role

pytestmark = pytest.mark.molecule

# Conditions this VM cannot meet (no NTP, cgroup v1) are switched off except in their own tests.
PASSING = {
    "preflight_profile": "gpu",
    "preflight_min_disk_gb": 1,
    "preflight_require_time_sync": False,
    "preflight_require_cgroup_v2": False,
}


@pytest.fixture(scope="module")
def gb10_host():
    with PodmanHost() as host:
        host.simulate_gpu("gb10")
        yield host


def expect_failure(host, message, **overrides):
    result = run_role(host, "preflight", {**PASSING, **overrides})
    assert result.returncode != 0, result.stdout[-3000:]
    assert message in result.stdout, result.stdout[-3000:]


def test_gb10_host_passes_and_reports_spark_facts(gb10_host):
    result = run_role(gb10_host, "preflight", PASSING)
    assert result.returncode == 0, result.stdout[-3000:]
    for fact in ('"gpu_product": "NVIDIA-GB10"', '"sm": "sm_121"', '"unified_memory": true', '"cuda_version": "13.0"'):
        assert fact in result.stdout


def test_wrong_architecture_for_profile(gb10_host):
    expect_failure(
        gb10_host, "preflight [arch]: architecture x86_64 does not fit profile spark", preflight_profile="spark"
    )


def test_unsupported_os(gb10_host):
    expect_failure(gb10_host, "preflight [os]: Debian 12.", preflight_supported_os={"Ubuntu": ["24.04"]})


def test_gpu_product_outside_profile(gb10_host):
    profiles = {"spark": {"architectures": ["x86_64"], "gpu_required": True, "gpu_products": ["NVIDIA-H100-80GB-HBM3"]}}
    expect_failure(
        gb10_host,
        "preflight [gpu-product]: GPU NVIDIA-GB10 does not fit profile spark",
        preflight_profile="spark",
        preflight_profiles=profiles,
    )


def test_too_little_disk(gb10_host):
    expect_failure(gb10_host, "at least 100000 GB are required", preflight_min_disk_gb=100000)


def test_time_not_synchronised(gb10_host):
    expect_failure(gb10_host, "preflight [time]: the clock is not NTP-synchronised", preflight_require_time_sync=True)


def test_cgroup_v1(gb10_host):
    expect_failure(gb10_host, "preflight [cgroup-v2]: this host uses cgroup v1", preflight_require_cgroup_v2=True)


def test_containerd_cgroup_driver_mismatch(gb10_host):
    gb10_host.write("/etc/containerd/config.toml", "version = 2\n  SystemdCgroup = false\n")
    try:
        expect_failure(
            gb10_host, "cgroup driver mismatch: wanted systemd, containerd (/etc/containerd/config.toml) uses cgroupfs"
        )
    finally:
        gb10_host.exec("rm", "-f", "/etc/containerd/config.toml")


def test_kubelet_cgroup_driver_mismatch(gb10_host):
    gb10_host.write("/var/lib/kubelet/config.yaml", "kind: KubeletConfiguration\ncgroupDriver: cgroupfs\n")
    try:
        expect_failure(gb10_host, "kubelet (/var/lib/kubelet/config.yaml) uses cgroupfs")
    finally:
        gb10_host.exec("rm", "-f", "/var/lib/kubelet/config.yaml")


# Docker's containerd.io as dpkg records it (the package itself comes from Docker's repository, the internet).
CONTAINERD_IO_RECORD = """
Package: containerd.io
Status: install ok installed
Architecture: amd64
Version: 1.7.27-1
Description: An open and reliable container runtime
"""


def test_docker_containerd_is_not_doubled(gb10_host):
    gb10_host.exec("cp", "/var/lib/dpkg/status", "/var/lib/dpkg/status.tf-test")
    try:
        gb10_host.exec("sh", "-c", f"printf '%s' '{CONTAINERD_IO_RECORD}' >> /var/lib/dpkg/status")
        for method in ("distro", "release"):
            expect_failure(
                gb10_host,
                f"preflight [docker-containerd]: Docker's containerd.io 1.7.27-1 is installed (DGX OS ships it with "
                f"Docker) and containerd_install_method={method} would install a second containerd",
                containerd_install_method=method,
            )
        result = run_role(gb10_host, "preflight", {**PASSING, "containerd_install_method": "docker"})
        assert result.returncode == 0, result.stdout[-3000:]
    finally:
        gb10_host.exec("mv", "/var/lib/dpkg/status.tf-test", "/var/lib/dpkg/status")


def test_reusing_a_docker_containerd_that_is_not_there(gb10_host):
    expect_failure(
        gb10_host,
        "preflight [docker-containerd]: containerd_install_method=docker reuses Docker's containerd.io package, "
        "which is not installed on this host",
        containerd_install_method="docker",
    )


@pytest.fixture(scope="module")
def bare_host():
    with PodmanHost() as host:
        yield host


def test_missing_driver(bare_host):
    expect_failure(bare_host, "preflight [driver]: NVIDIA driver missing or not loaded (nvidia-smi not found)")


def test_cpu_profile_accepts_a_host_without_gpu(bare_host):
    result = run_role(bare_host, "preflight", {**PASSING, "preflight_profile": "cpu"})
    assert result.returncode == 0, result.stdout[-3000:]
    assert '"gpu_state": "none (cpu profile)"' in result.stdout


@pytest.mark.parametrize(
    ("case", "message", "overrides"),
    [
        ("no-driver", "preflight [driver]: NVIDIA driver missing or not loaded (NVIDIA-SMI has failed", {}),
        ("no-devices", "preflight [gpu]: no GPU visible to the driver (No devices were found)", {}),
        ("h100", "preflight [driver-version]: NVIDIA driver 550.54.15 is too old; 580.0 or newer", {}),
        (
            "h100",
            "preflight [cuda-version]: CUDA 12.4 (from nvidia-smi) is too old",
            {"preflight_min_driver_version": "550"},
        ),
    ],
)
def test_gpu_failures(case, message, overrides):
    with PodmanHost() as host:
        host.simulate_gpu(case)
        expect_failure(host, message, **overrides)


def test_swap_on(tmp_path):
    swaps = tmp_path / "swaps"
    swaps.write_text("Filename\tType\tSize\tUsed\tPriority\n/swap.img file\t8388604\t0\t-2\n")
    with PodmanHost(volumes=[f"{swaps}:/proc/swaps:ro"]) as host:
        host.simulate_gpu("gb10")
        expect_failure(host, "preflight [swap]: swap is on (/swap.img)")
