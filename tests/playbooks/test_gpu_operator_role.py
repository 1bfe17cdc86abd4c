"""gpu_operator role: rendered Helm values and preflight errors (no chart registry or GPU here: helm install
itself is not exercised; GPU readiness is checked against Node objects, see test_gpu_node_gaps.py)."""

import json
import pathlib
import re
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ResourceType

from tests.modules.lab_helpers import client
from tests.playbooks.ansible_run import ROOT, changed_count, render_role, run_playbook

ROLE = "tokenfactory.spark.gpu_operator"
CONFIG_MAP = ResourceType("v1", "ConfigMap", "configmaps")


def values(tmp_path, **role_vars):
    return render_role(tmp_path, ROLE, "render", ["gpu_operator_values"], role_vars)["gpu_operator_values"]


def test_default_values_fit_driver_preinstalled_hosts(tmp_path):
    v = values(tmp_path)
    assert v["driver"]["enabled"] is False
    assert v["toolkit"]["enabled"] is True
    assert v["cdi"]["enabled"] is True
    assert v["gfd"]["enabled"] is True and v["devicePlugin"]["enabled"] is True
    assert v["migManager"]["enabled"] is False  # GB10 has no MIG
    assert v["operator"]["defaultRuntime"] == "containerd"
    assert v["operator"]["repository"] == "nvcr.io/nvidia"


def test_registry_override_reaches_every_nvidia_image(tmp_path):
    v = values(tmp_path, gpu_operator_image_registry="registry.site.local:5000/nvidia/")
    repos = {name: comp["repository"] for name, comp in v.items() if isinstance(comp, dict) and "repository" in comp}
    assert len(repos) >= 8
    assert all(r.startswith("registry.site.local:5000/nvidia") and "//" not in r for r in repos.values()), repos


def test_extra_values_merge_recursively(tmp_path):
    v = values(
        tmp_path,
        gpu_operator_extra_values={
            "toolkit": {"env": [{"name": "X", "value": "1"}]},
            "dcgmExporter": {"enabled": False},
        },
    )
    assert v["toolkit"] == {"enabled": True, "repository": "nvcr.io/nvidia/k8s", "env": [{"name": "X", "value": "1"}]}
    assert v["dcgmExporter"]["enabled"] is False


def preflight(tmp_path, *args, extra_env=None):
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        f"    - ansible.builtin.include_role: {{name: {ROLE}, tasks_from: preflight}}\n"
    )
    return run_playbook(playbook, "-i", "localhost,", "-c", "local", *args, extra_env=extra_env, check=False)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("gpu_operator_chart_version=v25.3.4", "too old: GB10 needs v25.10.0"),
        ("gpu_operator_chart_repo_url=ftp://mirror/charts", "gpu_operator_chart_repo_url must be empty"),
        ("gpu_operator_toolkit_enabled=false", "gpu_operator_toolkit_enabled must be true"),
    ],
)
def test_preflight_rejects_bad_settings(tmp_path, setting, message):
    proc = preflight(tmp_path, "-e", setting, "-e", "gpu_operator_install=false")
    assert proc.returncode != 0
    assert message in proc.stdout


def test_preflight_requires_helm_only_when_installing(tmp_path):
    no_helm = {"PATH": f"{ROOT / '.venv/bin'}:/usr/bin:/bin"}  # helm is not installed on this machine
    assert not any((pathlib.Path(d) / "helm").exists() for d in no_helm["PATH"].split(":"))
    verify_only = preflight(tmp_path, "-e", "gpu_operator_install=false", extra_env=no_helm)
    assert verify_only.returncode == 0, verify_only.stdout
    install = preflight(tmp_path, extra_env=no_helm)
    assert install.returncode != 0
    assert "needs the helm binary" in install.stdout


def dcgm_collectors():
    """Field names of files/dcgm-metrics.csv (comments and blank lines skipped)."""
    lines = (ROOT / "roles/gpu_operator/files/dcgm-metrics.csv").read_text().splitlines()
    fields = [line.split(",")[0].strip() for line in lines if line.strip() and not line.startswith("#")]
    assert len(fields) == len(set(fields)), "a field is listed twice"
    return set(fields)


def test_dcgm_exporter_reads_the_role_collector_list(tmp_path):
    exporter = values(tmp_path)["dcgmExporter"]
    assert exporter["config"] == {"name": "tokenfactory-dcgm-metrics"}
    assert {"name": "DCGM_EXPORTER_COLLECTORS", "value": "/etc/dcgm-exporter/dcgm-metrics.csv"} in exporter["env"]
    disabled = values(tmp_path, gpu_operator_dcgm_exporter_enabled=False)["dcgmExporter"]
    assert "config" not in disabled and "env" not in disabled


def test_every_dcgm_field_the_rules_dashboards_and_simulation_use_is_collected():
    used = set()
    for path in [
        *(ROOT / "roles/observability").rglob("*.j2"),
        *(ROOT / "roles/observability").rglob("*.yml"),
        *(ROOT / "lab/fixtures/dcgm").glob("*.prom"),
    ]:
        used |= set(re.findall(r"\bDCGM_FI_[A-Z0-9_]+", path.read_text()))
    assert {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS"} <= used
    assert used - dcgm_collectors() == set()


@pytest.mark.lab
def test_dcgm_metrics_configmap_is_applied_once(tmp_path, lab_cluster):
    namespace = f"gpu-operator-{uuid.uuid4().hex[:6]}"
    playbook = tmp_path / "dcgm.yml"
    role_vars = {"gpu_operator_kubeconfig": str(lab_cluster.kubeconfig), "gpu_operator_namespace": namespace}
    task = {"ansible.builtin.include_role": {"name": ROLE, "tasks_from": "dcgm_metrics"}, "vars": role_vars}
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    runs = [run_playbook(playbook, "-i", "localhost,", "-c", "local").stdout for _run in range(2)]
    assert [changed_count(out) for out in runs] == [2, 0]
    config_map = client(lab_cluster.kubeconfig).get(CONFIG_MAP, "tokenfactory-dcgm-metrics", namespace)
    applied = config_map["data"]["dcgm-metrics.csv"]
    assert applied == (ROOT / "roles/gpu_operator/files/dcgm-metrics.csv").read_text().rstrip("\n")
