"""The cni role converged for real against the lab's kube-apiserver v1.36.3 (kwok GB10 nodes).

kube-system/kubeadm-config is written by the real kubeadm (`kubeadm init phase upload-config kubeadm`).
Calico's CRDs are the real ones (tigera/operator Go module); tigera-operator.yaml is a labelled fixture.
Simulated: the nodes (kwok sets Ready; no kubelet, no Calico pods ever run). See roles/cni/README.md.
"""

import contextlib
import os
import subprocess
import sys
import uuid

import pytest
import yaml
from kubernetes import client, dynamic

from tests.host_roles import cni_sources
from tests.host_roles.playbook import changed_count, run_role
from lab.k8s import bins
from lab.k8s.cluster import POD_CIDR, SERVICE_CIDR, LabCluster

pytestmark = pytest.mark.lab


def upload_kubeadm_config(cluster, tmp_path, pod_cidr=POD_CIDR):
    """kube-system/kubeadm-config as `kubeadm init` writes it, by the real kubeadm binary."""
    config = tmp_path / "kubeadm.yaml"
    config.write_text(
        yaml.safe_dump_all(
            [
                {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration"},
                {
                    "apiVersion": "kubeadm.k8s.io/v1beta4",
                    "kind": "ClusterConfiguration",
                    "kubernetesVersion": bins.KUBE_VERSION,
                    "networking": {"podSubnet": pod_cidr, "serviceSubnet": SERVICE_CIDR},
                },
            ]
        )
    )
    argv = [cni_sources.lab_binary("kubeadm"), "init", "phase", "upload-config", "kubeadm", "--config", str(config)]
    subprocess.run([*argv, "--kubeconfig", str(cluster.kubeconfig)], check=True, capture_output=True, text=True)


def run_cni(cluster, manifest_dir="", **overrides):
    variables = {
        "ansible_python_interpreter": sys.executable,  # the venv with the kubernetes client
        "cni_kubeconfig": str(cluster.kubeconfig),
        "cni_pod_cidr": POD_CIDR,
        "cni_calico_manifest_dir": str(manifest_dir),
        "cni_ready_timeout": 120,
        **overrides,
    }
    return run_role("localhost", "cni", variables, connection="local")


def output(result):
    return f"{result.stdout[-4000:]}\n{result.stderr[-2000:]}"


@pytest.fixture(scope="module")
def manifest_dir(tmp_path_factory):
    return cni_sources.calico_manifests(tmp_path_factory.mktemp("calico"))


@contextlib.contextmanager
def kubeadm_cluster(tmp_dir, profile="spark-pair"):
    """A fresh lab cluster carrying kubeadm's configuration (the role changes cluster-wide objects)."""
    with LabCluster(profile, f"pytest-{os.getpid()}-cni-{uuid.uuid4().hex[:6]}") as cluster:
        upload_kubeadm_config(cluster, tmp_dir)
        yield cluster


@pytest.fixture(scope="module")
def kubeadm_pair(tmp_path_factory):
    with kubeadm_cluster(tmp_path_factory.mktemp("kubeadm")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def calico_runs(kubeadm_pair, manifest_dir):
    """The role applied twice: (first, second) CompletedProcess."""
    return run_cni(kubeadm_pair, manifest_dir), run_cni(kubeadm_pair, manifest_dir)


def test_calico_converges_and_nodes_are_ready(calico_runs):
    first = calico_runs[0]
    assert first.returncode == 0, output(first)
    assert changed_count(first) > 0
    assert "Wait until every node is Ready" in first.stdout


def test_calico_objects_exist_with_kubeadms_pod_cidr(kubeadm_pair, calico_runs):
    assert calico_runs[0].returncode == 0, output(calico_runs[0])
    with kubeadm_pair.api_client() as api:
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition("installations.operator.tigera.io")
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
        assert client.AppsV1Api(api).read_namespaced_deployment("tigera-operator", "tigera-operator")
        kind = dynamic.DynamicClient(api).resources.get(api_version="operator.tigera.io/v1", kind="Installation")
        pools = kind.get(name="default").spec.calicoNetwork.ipPools
        assert [(p.name, p.cidr, p.encapsulation) for p in pools] == [
            ("default-ipv4-ippool", POD_CIDR, "VXLANCrossSubnet")
        ]


def test_second_run_changes_nothing(calico_runs):
    second = calico_runs[1]
    assert second.returncode == 0, output(second)
    assert changed_count(second) == 0, output(second)


def test_pod_cidr_differing_from_kubeadm_fails_before_installing(lab_cluster_factory, manifest_dir, tmp_path):
    cluster = lab_cluster_factory("spark-single")
    upload_kubeadm_config(cluster, tmp_path)
    result = run_cni(cluster, manifest_dir, cni_pod_cidr="10.245.0.0/16")
    assert result.returncode != 0
    assert f"cni_pod_cidr=10.245.0.0/16 differs from kubeadm's podSubnet {POD_CIDR}" in result.stdout, output(result)
    with cluster.api_client() as api:
        names = [c.metadata.name for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items]
    assert not [n for n in names if n.endswith("tigera.io") or n.endswith("projectcalico.org")]


def test_cluster_without_kubeadm_config_is_refused(lab_cluster_factory, manifest_dir):
    result = run_cni(lab_cluster_factory("spark-single"), manifest_dir)
    assert result.returncode != 0
    assert "kube-system/kubeadm-config not found: is this a kubeadm cluster?" in result.stdout, output(result)


def test_node_that_never_becomes_ready_fails_the_wait(lab_cluster_factory, manifest_dir, tmp_path):
    cluster = lab_cluster_factory("spark-single")
    upload_kubeadm_config(cluster, tmp_path)
    with cluster.api_client() as api:
        # No kwok annotation: nothing heartbeats for this node, as for a node whose CNI never comes up.
        client.CoreV1Api(api).create_node({"metadata": {"name": "spark-without-kubelet"}})
    result = run_cni(cluster, manifest_dir, cni_ready_timeout=10)
    assert result.returncode != 0
    assert "Failed to gather information about Node(s) even after waiting" in result.stdout, output(result)


@pytest.fixture(scope="module")
def cilium_pair(tmp_path_factory):
    """(cluster, first run, second run) of the role with cni_plugin=cilium on its own two-Spark cluster."""
    with kubeadm_cluster(tmp_path_factory.mktemp("kubeadm")) as cluster:
        overrides = {
            "cni_plugin": "cilium",
            "cni_cilium_chart_dir": str(cni_sources.cilium_chart()),
            "cni_helm_binary": cni_sources.lab_binary("helm"),
        }
        yield cluster, run_cni(cluster, **overrides), run_cni(cluster, **overrides)


def test_cilium_chart_installs_with_kubeadms_pod_cidr(cilium_pair):
    cluster, first = cilium_pair[:2]
    assert first.returncode == 0, output(first)
    with cluster.api_client() as api:
        config = client.CoreV1Api(api).read_namespaced_config_map("cilium-config", "kube-system").data
        agents = client.AppsV1Api(api).read_namespaced_daemon_set("cilium", "kube-system").status
    assert (config["ipam"], config["cluster-pool-ipv4-cidr"]) == ("cluster-pool", POD_CIDR)
    # helm --wait passed: an agent on each simulated Spark reported Ready (by kwok).
    assert (agents.desired_number_scheduled, agents.number_ready) == (2, 2)


def test_cilium_second_run_changes_nothing(cilium_pair):
    second = cilium_pair[2]
    assert second.returncode == 0, output(second)
    assert changed_count(second) == 0, output(second)
