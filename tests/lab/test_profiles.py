"""Node profiles are data; these checks need no cluster (they run in `make unit`)."""

import pytest

from lab.k8s import nodes

GB10_LABELS = {
    "kubernetes.io/arch": "arm64",
    "nvidia.com/gpu.product": "NVIDIA-GB10",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/gpu.family": "blackwell",
    "nvidia.com/gpu.compute.major": "12",
    "nvidia.com/gpu.compute.minor": "1",
}


def by_name(profile):
    return {m["metadata"]["name"]: m for m in nodes.load_profile(profile)}


def test_profiles_listed():
    assert nodes.profiles() == ["mixed", "spark-pair", "spark-single", "x86-h100"]


@pytest.mark.parametrize("profile", ["spark-single", "spark-pair", "mixed"])
def test_spark_nodes_look_like_a_dgx_spark(profile):
    sparks = [m for m in nodes.load_profile(profile) if m["metadata"]["name"].startswith("spark-")]
    assert sparks
    for node in sparks:
        assert GB10_LABELS.items() <= node["metadata"]["labels"].items()
        assert node["status"]["capacity"] == {
            "cpu": "20",
            "memory": "119Gi",
            "ephemeral-storage": "3600Gi",
            "nvidia.com/gpu": "1",
            "pods": "110",
        }
        assert node["status"]["allocatable"] == node["status"]["capacity"]
        assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
        assert node["status"]["nodeInfo"]["architecture"] == "arm64"


@pytest.mark.parametrize("profile", ["spark-pair", "mixed"])
def test_pair_shares_one_fabric(profile):
    sparks = [m for m in nodes.load_profile(profile) if m["metadata"]["name"].startswith("spark-")]
    assert len(sparks) == 2
    assert len({m["metadata"]["labels"]["tokenfactory.io/fabric"] for m in sparks}) == 1


def test_single_spark_has_no_fabric():
    assert "tokenfactory.io/fabric" not in by_name("spark-single")["spark-01"]["metadata"]["labels"]


def test_h100_node():
    node = by_name("x86-h100")["h100-01"]
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/arch"] == "amd64"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("9", "0")
    assert labels["nvidia.com/gpu.memory"] == str(80 * 1024)
    assert node["status"]["capacity"]["nvidia.com/gpu"] == labels["nvidia.com/gpu.count"] == "8"
    assert set(by_name("mixed")) == {"spark-01", "spark-02", "h100-01"}


def test_node_identity_is_stable_and_distinct():
    first, second = nodes.load_profile("spark-pair")
    again = nodes.load_profile("spark-pair")[0]
    assert first["status"]["nodeInfo"]["machineID"] == again["status"]["nodeInfo"]["machineID"]
    assert first["status"]["nodeInfo"]["machineID"] != second["status"]["nodeInfo"]["machineID"]


def test_unknown_profile_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown lab profile 'spark-quad'; allowed: mixed, spark-pair"):
        nodes.load_profile("spark-quad")


@pytest.mark.parametrize("profile", ["spark-single", "spark-pair", "x86-h100", "mixed"])
def test_nodes_have_distinct_internal_ips(profile):
    ips = [
        a["address"] for m in nodes.load_profile(profile) for a in m["status"]["addresses"] if a["type"] == "InternalIP"
    ]
    assert len(ips) == len(set(ips)) == len(nodes.load_profile(profile))
