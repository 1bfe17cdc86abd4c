"""Run playbooks the way AWX does: project sync installs collections/requirements.yml into a staging path
(offline here: Galaxy is unreachable, dependencies come from the pinned ansible bundle), then the job runs
non-interactively with the survey answers as extra vars and no terminal."""

import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from tests.awx.definitions import survey
from tests.integration.test_collection_resolution import copy_project

BIN = pathlib.Path(sys.executable).parent


@pytest.fixture(scope="module")
def awx_project(tmp_path_factory):
    """A synced project: a copy of the checkout plus its collections installed into the job's staging path."""
    base = tmp_path_factory.mktemp("awx")
    project = copy_project(base / "project")
    stage = base / "requirements_collections"
    job_env = awx_env(stage)
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "-r", "collections/requirements.yml", "--offline"],
        cwd=project,
        env=job_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return project, job_env


def awx_env(stage):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        PATH=f"{BIN}:{env['PATH']}",
        ANSIBLE_COLLECTIONS_PATH=str(stage),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    return env


def survey_answers(path, name, **answers):
    """Extra vars as AWX builds them from a survey: defaults, overridden by the user's answers."""
    values = {q["variable"]: q.get("default", "") for q in survey(name)["spec"]}
    values.update(answers)
    path.write_text(yaml.safe_dump(values))
    return path


def run_job(project, env, playbook, inventory, extra_vars_file):
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), "-e", f"@{extra_vars_file}", playbook],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_reset_refuses_with_the_survey_defaults(awx_project, tmp_path):
    project, env = awx_project
    answers = survey_answers(tmp_path / "extra_vars.yml", "reset.yml")
    proc = run_job(project, env, "playbooks/reset.yml", "inventories/spark-single/hosts.yml", answers)
    assert proc.returncode != 0
    assert "Refusing to reset cluster spark-single" in proc.stdout
    assert "spark-01" not in proc.stdout.split("PLAY RECAP")[-1], "a Spark host was contacted"


def test_reset_runs_with_the_typed_confirmation(awx_project, tmp_path):
    """Controller-side effect only: an inventory without Spark hosts, a kubeconfig file that must disappear."""
    project, env = awx_project
    kubeconfig = tmp_path / "lab.kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {"tf_cluster_name": "awx-test", "tf_kubeconfig": str(kubeconfig)},
                    "children": {
                        "controller": {"hosts": {"localhost": {"ansible_connection": "local"}}},
                        "spark_nodes": {"hosts": {}},
                    },
                }
            }
        )
    )
    answers = survey_answers(tmp_path / "extra_vars.yml", "reset.yml", tf_reset_confirm="awx-test")
    proc = run_job(project, env, "playbooks/reset.yml", inventory, answers)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not kubeconfig.exists()


def test_remove_deployment_rejects_a_bad_name_before_calling_the_api(awx_project, tmp_path):
    project, env = awx_project
    answers = survey_answers(tmp_path / "extra_vars.yml", "remove_deployment.yml", tf_model_deployment="Bad_Name")
    proc = run_job(project, env, "playbooks/remove_deployment.yml", "inventories/spark-single/hosts.yml", answers)
    assert proc.returncode != 0
    assert "tf_model_deployment must name an existing ModelDeployment" in proc.stdout


def test_add_node_refuses_a_host_outside_the_workers_group(awx_project, tmp_path):
    project, env = awx_project
    answers = survey_answers(tmp_path / "extra_vars.yml", "add_node.yml")
    proc = run_job(project, env, "playbooks/add_node.yml", "inventories/spark-single/hosts.yml", answers)
    assert proc.returncode != 0
    assert "tf_new_node must name a host of the workers group (none; got spark-02)" in proc.stdout
    assert "spark-01" not in proc.stdout.split("PLAY RECAP")[-1], "a Spark host was contacted"
