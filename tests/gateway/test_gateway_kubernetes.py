"""Routing from real ModelDeployment objects in the lab's API server (markers lab + gateway).

The ModelDeployment is created by the collection's own module; `upstream_url` points it at a synthetic
engine outside the simulated cluster (kwok nodes run no containers)."""

import openai
import pytest

from tests.engine.synthetic import SyntheticUpstream
from lab.wait import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.gateway]
SERVED = "Qwen/Qwen2-0.5B-Instruct"  # the lab Model's source, its default served name


def test_gateway_follows_model_deployments_without_restart(tf_lab, tf_namespace, gateway_factory):
    with SyntheticUpstream(model=SERVED) as upstream:
        deployment = {"name": "qwen-chat", "namespace": tf_namespace, "model": "qwen", "endpoint": "public",
                      "tenants": ["acme"], "upstream_url": upstream.base_url, "gpu_type": "NVIDIA-GB10",
                      "pricing": {"currency": "EUR", "input_per_1m": "1", "output_per_1m": "2"},
                      "rate_limits": {"per_key": {"requests_per_minute": 1000}}}  # fmt: skip
        tf_lab.ok("model_deployment", **deployment)
        gw = gateway_factory([], routing_source="kubernetes", kubeconfig=str(tf_lab.kubeconfig),
                             routing_namespace=tf_namespace, routing_refresh_seconds=0.5)  # fmt: skip
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
        assert [m.id for m in client.models.list()] == [SERVED]
        assert client.chat.completions.create(
            model=SERVED, messages=[{"role": "user", "content": "hi"}], max_tokens=4
        ).choices
        status, table = gw.admin("GET", "/models")
        assert status == 200 and table["data"][0]["rate_limits"]["per_key"]["requests_per_minute"] == 1000
        tf_lab.ok("model_deployment", **{**deployment, "tenants": ["globex"]})
        wait_until(lambda: client.models.list().data == [], 30, "unsharing picked up from the API")
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model=SERVED, messages=[{"role": "user", "content": "hi"}])
        wait_until(lambda: gw.sql("SELECT count(*) FROM usage_records") == "1", 10, "ledger row")
        row = gw.sql("SELECT deployment, currency, cost * 1000000 = prompt_tokens * 1 + completion_tokens * 2"
                     " FROM usage_records")  # fmt: skip
        assert row == f"{tf_namespace}/qwen-chat|EUR|t"
