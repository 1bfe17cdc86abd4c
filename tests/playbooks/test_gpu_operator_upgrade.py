"""gpu_operator role, entry point `upgrade` (playbooks/upgrade.yml's last step) against the lab's real API server:
the target chart's CRDs are applied before `helm upgrade`, which never touches CRDs (NVIDIA's documented order).

REAL: NVIDIA's gpu-operator chart (deployments/gpu-operator of the github.com/NVIDIA/gpu-operator module, main
branch of 2025-09-17 with its node-feature-discovery subchart: the module proxy serves no release tag, v25.x tags
not being Go module versions), helm, kube-apiserver, the role's values. SIMULATED: the chart's two versions are
that chart re-versioned v25.10.0 and v25.10.1, and the "new" one has one property added to the ClusterPolicy CRD
(the change `helm upgrade` alone would not apply); kwok nodes stand in for the operator's pods.
"""

import json
import pathlib
import shutil
import subprocess

import pytest
import yaml

from tests.host_roles import cni_sources
from tests.playbooks.ansible_run import run_playbook

pytestmark = [pytest.mark.lab, pytest.mark.slow]

GPU_OPERATOR_MODULE = "github.com/NVIDIA/gpu-operator@v0.0.0-20250917190837-d73a0086a6ba"
NEW_PROPERTY = "tokenfactoryUpgradeCheck"
NAMESPACE = "gpu-operator"


def chart(tmp_path, version, new_property=False):
    """A writable copy of the real chart, re-versioned; optionally with NEW_PROPERTY in the ClusterPolicy CRD."""
    source = cni_sources.module_dir(GPU_OPERATOR_MODULE) / "deployments" / "gpu-operator"
    target = tmp_path / version / "gpu-operator"
    shutil.copytree(source, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    meta = yaml.safe_load((target / "Chart.yaml").read_text())
    meta["version"] = version
    (target / "Chart.yaml").write_text(yaml.safe_dump(meta))
    if new_property:
        crd_path = target / "crds" / "nvidia.com_clusterpolicies.yaml"
        crd = yaml.safe_load(crd_path.read_text())
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        spec[NEW_PROPERTY] = {"type": "string", "description": "SIMULATED: a field the new chart's CRD adds"}
        crd_path.write_text(yaml.safe_dump(crd))
    return target


def run_role(tmp_path, cluster, tasks_from, chart_dir):
    role_vars = {
        "gpu_operator_kubeconfig": str(cluster.kubeconfig),
        "gpu_operator_chart_repo_url": "",
        "gpu_operator_chart_ref": str(chart_dir),
        "gpu_operator_chart_version": chart_dir.parent.name,
        "gpu_operator_wait": False,
        "gpu_operator_wait_timeout": 300,
    }
    task = {
        "ansible.builtin.include_role": {"name": "tokenfactory.spark.gpu_operator", "tasks_from": tasks_from},
        "vars": role_vars,
    }
    playbook = tmp_path / f"{tasks_from}-{chart_dir.parent.name}.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    helm_dir = pathlib.Path(cni_sources.lab_binary("helm")).parent
    return run_playbook(playbook, "-i", "localhost,", "-c", "local", extra_env={"PATH": f"{helm_dir}:/usr/bin:/bin"})


def cluster_policy_properties(cluster):
    out = subprocess.run(
        [cni_sources.lab_binary("kubectl"), "--kubeconfig", str(cluster.kubeconfig), "get", "crd",
         "clusterpolicies.nvidia.com", "-o", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    crd = json.loads(out.stdout)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def release(cluster):
    out = subprocess.run(
        [cni_sources.lab_binary("helm"), "--kubeconfig", str(cluster.kubeconfig),
         "list", "-n", NAMESPACE, "-o", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    [item] = json.loads(out.stdout)
    return item


def test_crds_are_applied_before_the_chart_is_upgraded(tmp_path, lab_cluster_factory):
    cluster = lab_cluster_factory("spark-single")
    old, new = chart(tmp_path, "v25.10.0"), chart(tmp_path, "v25.10.1", new_property=True)
    run_role(tmp_path, cluster, "main", old)
    assert NEW_PROPERTY not in cluster_policy_properties(cluster)
    assert (release(cluster)["chart"], release(cluster)["revision"]) == ("gpu-operator-v25.10.0", "1")

    run_role(tmp_path, cluster, "upgrade", new)
    assert cluster_policy_properties(cluster)[NEW_PROPERTY]["type"] == "string"
    upgraded = release(cluster)
    assert (upgraded["chart"], upgraded["revision"], upgraded["status"]) == ("gpu-operator-v25.10.1", "2", "deployed")
