"""Job templates run the way AWX runs them: project sync installs collections/requirements.yml into a staging path
(offline here: Galaxy is unreachable, dependencies come from the pinned ansible bundle), then ansible_runner.run()
on a private data directory laid out like AWX's (tests/awx/awx_runner.py): survey answers as extra vars,
credentials injected as AWX injects them, set_stats artifacts handed from one workflow node to the next."""

import os
import pathlib
import subprocess

import pytest
import yaml

from tests.awx.awx_runner import BIN, job_template, node_extra_vars, run_job, template_extra_vars
from tests.awx.definitions import load
from tests.integration.test_collection_resolution import copy_project

PROVISION = "Token Factory - provision cluster"


@pytest.fixture(scope="module")
def awx_project(tmp_path_factory):
    """A synced project: a copy of the checkout plus its collections installed into the job's staging path."""
    base = tmp_path_factory.mktemp("awx")
    project = copy_project(base / "project")
    stage = base / "requirements_collections"
    job_env = {
        "ANSIBLE_COLLECTIONS_PATH": str(stage),
        "ANSIBLE_PYTHON_INTERPRETER": os.environ.get("TF_AWX_PYTHON", str(BIN / "python")),
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "-r", "collections/requirements.yml", "--offline"],
        cwd=project,
        env={**clean_environ(), **job_env, "PATH": f"{BIN}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return project, job_env


def clean_environ():
    return {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}


def controller_inventory(path, **variables):
    """An inventory without Spark hosts: only the controller (the execution environment) runs."""
    path.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": variables,
                    "children": {
                        "controller": {"hosts": {"localhost": {"ansible_connection": "local"}}},
                        "spark_nodes": {"hosts": {}},
                    },
                }
            }
        )
    )
    return path


def launch(awx_project, tmp_path, name, answers=None, inventory=None, **options):
    """Launch a template alone (survey defaults plus `answers`) on the spark-single inventory unless given one."""
    project, env = awx_project
    template = job_template(name)
    inventory = inventory or project / "inventories/spark-single/hosts.yml"
    extra_vars = node_extra_vars(template, workflow_vars=answers)
    return run_job(template, tmp_path / "job", project, inventory, extra_vars, envvars=env, **options)


@pytest.mark.parametrize(
    ("name", "answers", "refusal"),
    [
        ("Token Factory - reset cluster", {}, "Refusing to reset cluster spark-single"),
        (
            "Token Factory - remove model deployment",
            {"tf_model_deployment": "Bad_Name"},
            "tf_model_deployment must name an existing ModelDeployment",
        ),
        ("Token Factory - add node", {}, "tf_new_node must name a host of the workers group (none; got spark-02)"),
        (
            "Token Factory - restore ledger",
            {"tf_restore_database": "tokenfactory"},
            "restoring over the live ledger tokenfactory also needs gateway_restore_confirm (tf_restore_confirm)",
        ),
        (
            "Token Factory - restore ledger",
            {"tf_restore_file": "../etc/passwd"},
            "a ledger-YYYYMMDDTHHMMSSZ.dump (got '../etc/passwd')",
        ),
    ],
)
def test_bad_or_default_answers_are_refused_before_touching_anything(awx_project, tmp_path, name, answers, refusal):
    job = launch(awx_project, tmp_path, name, answers)
    assert job.runner.rc != 0
    assert refusal in job.stdout
    assert "spark-01" not in job.stdout.split("PLAY RECAP")[-1], "a Spark host was contacted"


def test_reset_runs_with_the_typed_confirmation(awx_project, tmp_path):
    """Controller-side effect only: an inventory without Spark hosts, a kubeconfig file that must disappear."""
    kubeconfig = tmp_path / "lab.kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    inventory = controller_inventory(tmp_path / "hosts.yml", tf_cluster_name="awx-test", tf_kubeconfig=str(kubeconfig))
    job = launch(awx_project, tmp_path, "Token Factory - reset cluster", {"tf_reset_confirm": "awx-test"}, inventory)
    assert job.runner.status == "successful", job.stdout[-3000:]
    assert not kubeconfig.exists()


def test_provision_hands_the_kubeconfig_path_to_the_next_node(awx_project, tmp_path):
    """cluster.yml's last play publishes the kubeconfig's path (on the state directory) as an artifact; the path,
    not the file's content, is what the next node's extra vars carry."""
    project, env = awx_project
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    kubeconfig = state_dir / "awx-test.kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: s3cret-admin}}]\n")
    inventory = controller_inventory(
        tmp_path / "hosts.yml",
        tf_cluster_name="awx-test",
        tf_kubeconfig=load(project / "inventories/spark-single/group_vars/all/cluster.yml")["tf_kubeconfig"],
    )
    template = job_template(PROVISION)
    # Job tags select the hand-over play (tagged always): the other phases need Spark hosts.
    extra = node_extra_vars(template, job_extra_vars=template_extra_vars(state_dir))
    job = run_job(template, tmp_path / "job", project, inventory, extra, envvars=env, job_tags="handover")
    assert job.runner.status == "successful", job.stdout[-3000:]
    assert job.artifacts == {"tf_kubeconfig": str(kubeconfig), "tf_cluster_name": "awx-test"}
    for path in (job.private_data_dir / "artifacts").rglob("*"):
        assert not path.is_file() or b"s3cret-admin" not in path.read_bytes(), f"{path} holds the kubeconfig"
    serve = job_template("Token Factory - serve model")
    following = node_extra_vars(serve, artifacts=job.artifacts, workflow_vars={"tf_model_deployment": "m"})
    assert following["tf_kubeconfig"] == str(kubeconfig)


def test_kubeconfig_credential_attached_at_launch_wins_over_the_inventory(awx_project, tmp_path):
    """A day-2 job with the kubeconfig credential (ask_credential_on_launch): the injected file is the job's
    tf_kubeconfig, so reset removes that file and leaves the inventory's kubeconfig alone."""
    inventory_kubeconfig = tmp_path / "inventory.kubeconfig"
    inventory_kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    inventory = controller_inventory(
        tmp_path / "hosts.yml", tf_cluster_name="awx-test", tf_kubeconfig=str(inventory_kubeconfig)
    )
    assert job_template("Token Factory - reset cluster")["ask_credential_on_launch"]
    credential = ("Token Factory kubeconfig", {"kubeconfig": "apiVersion: v1\nkind: Config\n"})
    job = launch(
        awx_project, tmp_path, "Token Factory - reset cluster", {"tf_reset_confirm": "awx-test"}, inventory,
        credentials=[credential],
    )  # fmt: skip
    assert job.runner.status == "successful", job.stdout[-3000:]
    assert inventory_kubeconfig.exists()
    injected = yaml.safe_load((job.private_data_dir / "env" / "envvars").read_text())["K8S_AUTH_KUBECONFIG"]
    assert injected.startswith(str(job.private_data_dir / "env"))
    assert not pathlib.Path(injected).exists(), "reset did not remove the injected kubeconfig"
