"""The observability role applied for real to a fresh lab API server that has the Prometheus Operator's
PrometheusRule CRD (its real schema, from the operator's module): the API server accepts every manifest and the
PrometheusRule, a second run changes nothing, and changing the storage mode replaces the StatefulSet (its claim
template cannot change in place). Pods are kwok's, so Prometheus itself does not run here (tests/observability/
test_prometheus_state.py runs the same image's binary)."""

import json
import subprocess

import pytest
import yaml

from lab.paths import REPO_ROOT
from lab.wait import wait_until
from tests.modules.lab_helpers import client
from tests.playbooks.ansible_run import changed_count, run_playbook
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import CRD, ResourceType, STATEFUL_SET

pytestmark = [pytest.mark.observability, pytest.mark.lab]
PROMETHEUS_RULE = ResourceType("monitoring.coreos.com/v1", "PrometheusRule", "prometheusrules")
NAMESPACE = "tokenfactory-monitoring"


def operator_crd():
    out = subprocess.run(
        [str(REPO_ROOT / "scripts/ensure-prometheus-operator-crds")], capture_output=True, text=True, check=True
    )
    return yaml.safe_load((REPO_ROOT / out.stdout.strip() / "monitoring.coreos.com_prometheusrules.yaml").read_text())


STORAGE_CLASS = ResourceType("storage.k8s.io/v1", "StorageClass", "storageclasses")


def apply_role(tmp_path, kubeconfig, check=True, **role_vars):
    playbook = tmp_path / "observability.yml"
    role = {"role": "tokenfactory.spark.observability", "vars": {
        "observability_kubeconfig": str(kubeconfig), "observability_storage_mode": "host_path",
        "observability_host_path_node": "spark-01", "observability_wait_timeout": 120, **role_vars}}  # fmt: skip
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "roles": [role]}]))
    proc = run_playbook(
        playbook, "-i", "localhost,", "-c", "local", extra_env={"ANSIBLE_NOCOLOR": "1"}, timeout=900, check=check
    )
    return changed_count(proc.stdout, proc.stderr) if check else proc


@pytest.fixture(scope="module")
def applied(lab_cluster, tmp_path_factory):
    kube = client(lab_cluster.kubeconfig)
    crd = operator_crd()
    kube.apply(crd)
    wait_until(
        lambda: any(c["type"] == "Established" and c["status"] == "True"
                    for c in (kube.get(CRD, crd["metadata"]["name"]) or {}).get("status", {}).get("conditions", [])),
        60, "the PrometheusRule CRD",
    )  # fmt: skip
    tmp = tmp_path_factory.mktemp("role")
    first = apply_role(tmp, lab_cluster.kubeconfig)
    sts = kube.get(STATEFUL_SET, "tokenfactory-prometheus", NAMESPACE)
    second = apply_role(tmp, lab_cluster.kubeconfig)
    return {"kube": kube, "tmp": tmp, "kubeconfig": lab_cluster.kubeconfig, "changed": (first, second), "sts": sts}


def test_rules_are_applied_as_a_prometheus_rule_the_real_schema_accepts(applied):
    rule = applied["kube"].get(PROMETHEUS_RULE, "tokenfactory", NAMESPACE)
    assert rule is not None
    rendered = yaml.safe_load(
        applied["kube"].get(ResourceType("v1", "ConfigMap", "configmaps"), "tokenfactory-prometheus-rules", NAMESPACE)[
            "data"
        ]["tokenfactory.rules.yml"]
    )
    assert rule["spec"]["groups"] == rendered["groups"]
    assert {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]} >= {
        "TokenFactoryGPUXidCritical",
        "TokenFactoryUnifiedMemoryPressure",
        "TokenFactoryLedgerSpoolGrowing",
    }


def test_a_second_run_changes_nothing(applied):
    first, second = applied["changed"]
    assert first > 0 and second == 0, applied["changed"]


def test_a_pvc_without_a_storage_class_fails_before_anything_changes(applied):
    """The lab's API server has no StorageClass, as a bare Spark: the claim would stay Pending."""
    assert applied["kube"].list(STORAGE_CLASS) == []
    proc = apply_role(applied["tmp"], applied["kubeconfig"], check=False, observability_storage_mode="pvc")
    assert proc.returncode != 0
    assert "observability_storage_mode=pvc needs a StorageClass, and the cluster has no default one" in proc.stdout
    after = applied["kube"].get(STATEFUL_SET, "tokenfactory-prometheus", NAMESPACE)
    assert after["metadata"]["uid"] == applied["sts"]["metadata"]["uid"]
    assert "volumeClaimTemplates" not in after["spec"]


def test_changing_the_storage_mode_replaces_the_statefulset(applied):
    before = applied["sts"]
    assert "volumeClaimTemplates" not in before["spec"]
    default_class = {"storageclass.kubernetes.io/is-default-class": "true"}
    applied["kube"].apply({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "tokenfactory.test/none",
        "metadata": {"name": "lab-default", "annotations": default_class},
    })  # fmt: skip
    try:
        apply_role(applied["tmp"], applied["kubeconfig"], observability_storage_mode="pvc", observability_wait=False)
    finally:
        applied["kube"].delete(STORAGE_CLASS, "lab-default")
    after = applied["kube"].get(STATEFUL_SET, "tokenfactory-prometheus", NAMESPACE)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "20Gi"
