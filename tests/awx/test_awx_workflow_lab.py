"""The provision -> serve -> tenants -> validate workflow as AWX runs it, through ansible-runner, against the lab's
real API server (kwok GB10 node), a real gateway (PostgreSQL, Redis) and the synthetic engine behind it.

What stands in for the heavy lab: provision runs only its hand-over play (job tags; the kubernetes role's output,
the admin kubeconfig on the state directory, is the lab's kubeconfig copied there), and the engine is the
deterministic upstream of tests/engine/synthetic.py, reached through the ModelDeployment's upstream_url.
"""

import shutil
import stat
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from tests.awx.awx_runner import job_template, node_extra_vars, run_job, template_extra_vars
from tests.awx.definitions import load, survey
from tests.awx.test_awx_style_runs import awx_project, controller_inventory  # noqa: F401 # pylint: disable=unused-import
from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import deployment_objects

pytestmark = [pytest.mark.lab, pytest.mark.gateway]
SERVED = "qwen2-0.5b-instruct"


def test_the_workflow_hands_on_the_cluster_and_the_tenants_key(tf_lab, gateway_factory, awx_project, tmp_path):  # noqa: F811
    project, env = awx_project
    namespace = f"awx-{uuid.uuid4().hex[:6]}"
    state = tmp_path / "state"  # awx_state_dir: outlives every job's private data directory
    state.mkdir(mode=0o700)
    with SyntheticUpstream(model=SERVED, output_tokens=8) as upstream:
        # Shared with nobody: the workflow tenant reaches the model through the grant tenants.yml gives it.
        gateway = gateway_factory(deployment_objects("wf", SERVED, upstream.base_url, tenants=[]))
        kubeconfig = state / "spark.kubeconfig"
        shutil.copy(tf_lab.kubeconfig, kubeconfig)
        inventory = controller_inventory(
            tmp_path / "hosts.yml",
            tf_cluster_name="spark",
            tf_kubeconfig=load(project / "inventories/spark-single/group_vars/all/cluster.yml")["tf_kubeconfig"],
            # The site's serving facts: the engine runs outside the cluster, users reach the gateway directly.
            tf_serve_gateway=False,
            tf_upstream_url=upstream.base_url,
            tf_endpoint_external_url=gateway.url,
            tf_serve_wait_timeout=120,
        )
        # The workflow job's extra vars: its survey's defaults and answers, and a namespace of this test.
        workflow = {q["variable"]: q["default"] for q in survey("workflow.yml")["spec"]}
        workflow.update(tf_namespace=namespace, tf_validate_requests=16, tf_slo_ttft_p95_ms=60000,
                        tf_slo_itl_p95_ms=60000)  # fmt: skip
        template_vars = template_extra_vars(state)  # what configure.yml sets on every template

        provision_template = job_template("Token Factory - provision cluster")
        provision = run_job(
            provision_template, tmp_path / "provision", project, inventory,
            node_extra_vars(provision_template, workflow_vars=workflow, job_extra_vars=template_vars),
            envvars=env, job_tags="handover",
        )  # fmt: skip
        assert provision.runner.status == "successful", provision.stdout[-3000:]
        assert provision.artifacts == {"tf_kubeconfig": str(kubeconfig), "tf_cluster_name": "spark"}

        serve_template = job_template("Token Factory - serve model")
        serve = run_job(
            serve_template, tmp_path / "serve", project, inventory,
            node_extra_vars(serve_template, provision.artifacts, workflow, template_vars),
            credentials=[("Hugging Face token", {"hf_token": "hf_awx_workflow_token"})],
            envvars=env,
        )  # fmt: skip
        assert serve.runner.status == "successful", serve.stdout[-4000:]
        assert serve.artifacts["tf_endpoint_base_url"] == f"{gateway.url}/v1"
        assert "tf_validate_api_key_file" not in serve.artifacts
        deployment = tf_lab.kube.get(kinds.MODEL_DEPLOYMENT, "qwen2-0-5b-instruct", namespace)
        assert deployment["spec"].get("tenants", []) == []
        assert deployment["status"]["phase"] == "Ready"

        tenants_template = job_template("Token Factory - tenants and API keys")
        ancestors = {**provision.artifacts, **serve.artifacts}
        tenants = run_job(
            tenants_template, tmp_path / "tenants", project, inventory,
            node_extra_vars(tenants_template, ancestors, workflow, template_vars),
            credentials=[
                ("Token Factory gateway admin", {"gateway_url": gateway.admin_url, "admin_token": gateway.admin_token}),
            ],
            envvars=env,
        )  # fmt: skip
        assert tenants.runner.status == "successful", tenants.stdout[-4000:]
        key_file = state / "api-keys/workflow/qwen2-0-5b-instruct.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert gateway.admin("GET", "/tenants/workflow")[1]["models"] == [SERVED]

        validate_template = job_template("Token Factory - validate deployment")
        ancestors.update(tenants.artifacts)
        validate = run_job(
            validate_template, tmp_path / "validate", project, inventory,
            node_extra_vars(validate_template, ancestors, workflow, template_vars), envvars=env,
        )  # fmt: skip
        assert validate.runner.status == "successful", validate.stdout[-4000:]
        result = validate.artifacts["tf_validation"]
        assert result["deployment"] == "qwen2-0-5b-instruct" and result["passed"] is True, result
        assert "16/16 ok" in validate.stdout, validate.stdout[-3000:]
        for job in (provision, serve, tenants, validate):
            for path in job.private_data_dir.rglob("*"):
                assert not path.is_file() or key.encode() not in path.read_bytes(), f"the API key is in {path}"
    tf_lab.ok("model_deployment", name="qwen2-0-5b-instruct", namespace=namespace, state="absent")
