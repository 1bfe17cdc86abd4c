"""gpu_operator role: rendered Helm values and preflight errors (no chart registry or GPU here: helm install
itself is not exercised; GPU readiness is checked against Node objects, see test_gpu_node_gaps.py)."""

import pathlib

import pytest

from tests.playbooks.ansible_run import ROOT, run_playbook, render_role

ROLE = "tokenfactory.spark.gpu_operator"


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
