"""Inventory from node labels/capacity: GB10 unified memory, discrete GPU memory label, fabrics."""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import inventory

from tests.unit.plugins.module_utils.tokenfactory.samples import gb10, h100, node


def test_gb10_memory_is_the_node_memory_and_fabrics_are_grouped():
    found = inventory(
        [gb10("spark-2", "pair-a"), gb10("spark-1", "pair-a"), node("cpu-1", {"kubernetes.io/arch": "amd64"}, 0)]
    )
    assert [n["name"] for n in found["nodes"]] == ["cpu-1", "spark-1", "spark-2"]
    (group,) = found["gpus"]
    assert group["product"] == "NVIDIA-GB10"
    assert group["unifiedMemory"] is True
    assert group["memoryBytesPerGPU"] == 119 * 2**30
    assert group["count"] == group["allocatable"] == 2
    assert group["computeCapability"] == "12.1"
    assert group["fabrics"] == ["pair-a"]
    assert group["nodes"] == ["spark-1", "spark-2"]
    assert found["totals"] == {
        "nodes": 3,
        "readyNodes": 3,
        "gpus": 2,
        "cpuMillicores": 60000,
        "memoryBytes": 357 * 2**30,
    }
    assert "gpuProduct" not in found["nodes"][0]


def test_discrete_gpu_memory_comes_from_the_gfd_label():
    (group,) = inventory([h100("dgx-1")])["gpus"]
    assert group["unifiedMemory"] is False
    assert group["memoryBytesPerGPU"] == 81559 * 2**20
    assert group["gpusPerNode"] == 8


def test_not_ready_nodes_do_not_count():
    found = inventory([node("spark-1", {"nvidia.com/gpu.product": "NVIDIA-GB10"}, ready=False)])
    assert found["gpus"] == []
    assert found["totals"]["gpus"] == 0
