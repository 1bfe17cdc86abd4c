import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.tokenfactory.spark.plugins.filter.kubelet import kubelet_configuration, kubelet_reserved_cpus

# GB10-like: two clusters, efficiency cores with a lower cpu_capacity (ids interleaved as on big.LITTLE parts).
GB10 = [f"{i} {512 if i % 10 < 5 else 1024}" for i in range(20)]


def test_reserves_the_lowest_capacity_cores():
    assert kubelet_reserved_cpus(GB10, 2) == "0-1"
    assert kubelet_reserved_cpus(GB10, 6) == "0-4,10"
    assert kubelet_reserved_cpus("0 1024\n1 1024\n2 600\n3 1024\n", 1) == "2"


def test_equal_cores_reserve_the_first_ones():
    assert kubelet_reserved_cpus(["0 1024", "1 1024"], 1) == "0"
    assert kubelet_reserved_cpus(["0", "1", "2", "3"], 2) == "0-1"  # no cpu_capacity (x86-64)


@pytest.mark.parametrize("count", [0, 2])
def test_refuses_to_reserve_nothing_or_everything(count):
    with pytest.raises(AnsibleFilterError, match=f"cannot reserve {count} of 2 CPUs"):
        kubelet_reserved_cpus(["0 1024", "1 1024"], count)


def test_configuration_merges_profile_then_overrides():
    profile = {"cpuManagerPolicy": "static", "evictionHard": {"memory.available": "4Gi", "nodefs.available": "10%"}}
    config = kubelet_configuration(
        profile,
        cgroup_driver="cgroupfs",
        fail_cgroup_v1=False,
        reserved_system_cpus="0",
        overrides={"evictionHard": {"memory.available": "1Gi"}},
    )
    assert config == {
        "cgroupDriver": "cgroupfs",
        "failSwapOn": True,
        "failCgroupV1": False,
        "cpuManagerPolicy": "static",
        "evictionHard": {"memory.available": "1Gi", "nodefs.available": "10%"},
        "reservedSystemCPUs": "0",
    }
    assert profile["evictionHard"]["memory.available"] == "4Gi"  # input untouched


def test_reserved_cpus_only_with_the_static_cpu_manager():
    assert "reservedSystemCPUs" not in kubelet_configuration({}, reserved_system_cpus="0")
    with pytest.raises(AnsibleFilterError, match="cgroup_driver"):
        kubelet_configuration({}, cgroup_driver="system")
