"""The tenants template as AWX runs it: the gateway admin credential injected into the environment (the defaults of
tf_gateway_admin_url/_token read it), the survey's tenant as the one-item tf_gateway_tenants, a real gateway
(PostgreSQL, Redis), the key written once to its file under the state directory's api-keys/ and granted the
served model."""

import stat

import pytest

from tests.awx.awx_runner import job_template, node_extra_vars, run_job, template_extra_vars
from tests.awx.test_awx_style_runs import awx_project, controller_inventory  # noqa: F401 # pylint: disable=unused-import
from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import deployment_objects
from tests.playbooks.ansible_run import changed_count

pytestmark = pytest.mark.gateway


def test_tenants_creates_the_survey_tenants_key_on_the_state_directory(gateway_factory, awx_project, tmp_path):  # noqa: F811
    project, env = awx_project
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with SyntheticUpstream(model="qwen2-0.5b-instruct", output_tokens=4) as upstream:
        # The deployment is shared with nobody: only the tenant's model grant lets its key call it.
        gateway = gateway_factory(deployment_objects("wf", "qwen2-0.5b-instruct", upstream.base_url, tenants=[]))
        inventory = controller_inventory(
            tmp_path / "hosts.yml", tf_cluster_name="spark", tf_kubeconfig=str(state / "spark.kubeconfig")
        )
        template = job_template("Token Factory - tenants and API keys")
        admin = ("Token Factory gateway admin", {"gateway_url": gateway.admin_url, "admin_token": gateway.admin_token})

        def tenants(job_dir):
            return run_job(
                template, tmp_path / job_dir, project, inventory,
                node_extra_vars(template, workflow_vars={"tf_api_key_tenant": "acme"},
                                job_extra_vars=template_extra_vars(state)),
                credentials=[admin], envvars=env,
            )  # fmt: skip

        first = tenants("first")
        assert first.runner.status == "successful", first.stdout[-3000:]
        key_file = state / "api-keys/acme/qwen2-0-5b-instruct.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        status, tenant = gateway.admin("GET", "/tenants/acme")
        assert status == 200 and tenant["models"] == ["qwen2-0.5b-instruct"], tenant
        for path in first.private_data_dir.rglob("*"):
            assert not path.is_file() or key.encode() not in path.read_bytes(), f"the API key is in {path}"
        status, body = gateway.replicas[0].request(
            "POST", "/v1/chat/completions",
            {"model": "qwen2-0.5b-instruct", "messages": [{"role": "user", "content": "hi"}]}, token=key,
        )  # fmt: skip
        assert status == 200, body

        second = tenants("second")
        assert second.runner.status == "successful", second.stdout[-3000:]
        assert key_file.read_text().strip() == key, "a rerun must not replace the key"
        assert changed_count(second.stdout) == 0, second.stdout[-2000:]
