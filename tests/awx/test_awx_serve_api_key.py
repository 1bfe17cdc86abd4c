"""The serve template's API key step as AWX runs it: the gateway admin credential injected into the environment
(the tenant and api_key modules read it), a real gateway (PostgreSQL, Redis), the key written once to the key
file on the state directory and its path handed on as an artifact."""

import stat

import pytest

from tests.awx.awx_runner import job_template, node_extra_vars, run_job
from tests.awx.test_awx_style_runs import awx_project, controller_inventory  # noqa: F401 # pylint: disable=unused-import
from tests.engine.synthetic import SyntheticUpstream
from tests.gateway.gateway import deployment_objects

pytestmark = pytest.mark.gateway


def test_serve_creates_the_tenants_key_and_hands_its_file_on(gateway_factory, awx_project, tmp_path):  # noqa: F811
    project, env = awx_project
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with SyntheticUpstream(model="qwen2-0.5b-instruct", output_tokens=4) as upstream:
        gateway = gateway_factory(deployment_objects("wf", "qwen2-0.5b-instruct", upstream.base_url, tenants=["acme"]))
        inventory = controller_inventory(
            tmp_path / "hosts.yml", tf_cluster_name="spark", tf_kubeconfig=str(state / "spark.kubeconfig")
        )
        template = job_template("Token Factory - serve model")
        admin = ("Token Factory gateway admin", {"gateway_url": gateway.admin_url, "admin_token": gateway.admin_token})

        def serve(job_dir):
            return run_job(
                template, tmp_path / job_dir, project, inventory,
                node_extra_vars(template, workflow_vars={"tf_api_key_tenant": "acme"}),
                credentials=[admin], envvars=env, job_tags="api_key",
            )  # fmt: skip

        first = serve("first")
        assert first.runner.status == "successful", first.stdout[-3000:]
        key_file = state / "acme.qwen2-0-5b-instruct.key"
        assert first.artifacts["tf_validate_api_key_file"] == str(key_file)
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert gateway.admin("GET", "/tenants/acme")[0] == 200
        for path in first.private_data_dir.rglob("*"):
            assert not path.is_file() or key.encode() not in path.read_bytes(), f"the API key is in {path}"
        # The key works on the gateway's public API for the deployment shared with the tenant.
        status, body = gateway.replicas[0].request(
            "POST", "/v1/chat/completions",
            {"model": "qwen2-0.5b-instruct", "messages": [{"role": "user", "content": "hi"}]}, token=key,
        )  # fmt: skip
        assert status == 200, body

        second = serve("second")
        assert second.runner.status == "successful", second.stdout[-3000:]
        assert key_file.read_text().strip() == key, "a rerun must not replace the key"
        assert "changed=0" in second.stdout.split("PLAY RECAP")[-1], second.stdout[-2000:]
