"""gpu_node_gaps filter: what keeps nodes from running GPU workloads (Node objects shaped like the API's)."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.tokenfactory.spark.plugins.filter.gpu_node_gaps import gpu_node_gaps

LABELS = ["nvidia.com/gpu.product", "nvidia.com/gpu.count"]


def node(name, gpus="1", labels=None):
    return {
        "metadata": {"name": name, "labels": labels if labels is not None else dict.fromkeys(LABELS, "x")},
        "status": {"allocatable": {"cpu": "20", "nvidia.com/gpu": gpus} if gpus is not None else {"cpu": "20"}},
    }


def test_ready_nodes_have_no_gaps():
    assert gpu_node_gaps([node("spark-01"), node("spark-02")], [], LABELS) == {}


def test_missing_resource_and_labels_are_reported_per_node():
    gaps = gpu_node_gaps([node("spark-01"), node("spark-02", gpus="0", labels={})], [], LABELS)
    assert gaps == {
        "spark-02": [
            "nvidia.com/gpu not allocatable",
            "label nvidia.com/gpu.product missing",
            "label nvidia.com/gpu.count missing",
        ]
    }


def test_node_without_the_resource_at_all():
    assert gpu_node_gaps([node("a", gpus=None)], [], []) == {"a": ["nvidia.com/gpu not allocatable"]}


def test_expected_node_absent_from_cluster():
    assert gpu_node_gaps([node("spark-01")], ["spark-01", "spark-02"], LABELS) == {"spark-02": ["node not found"]}


def test_only_listed_nodes_are_checked():
    cpu_only = node("control", gpus=None, labels={})
    assert gpu_node_gaps([cpu_only, node("spark-01")], ["spark-01"], LABELS) == {}


def test_empty_cluster_is_a_gap_not_success():
    assert gpu_node_gaps([], [], LABELS) == {"(cluster)": ["no node found"]}


def test_rejects_non_list():
    with pytest.raises(AnsibleFilterError, match="expects a list"):
        gpu_node_gaps({"metadata": {}})
