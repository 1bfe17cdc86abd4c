"""The gateway routes a ModelDeployment only once the module reports it Ready (real API server, real gateway).

A deployment queued for GPUs (on_insufficient_gpus=queue, phase Pending) gets no traffic; once the GPU is free and
the module reports it Ready, the gateway picks it up from the API without a restart."""

import time

import openai
import pytest

from lab.wait import wait_until
from tests.engine.synthetic import SyntheticUpstream

pytestmark = [pytest.mark.lab, pytest.mark.gateway]
REFRESH = 0.5


def test_only_ready_deployments_get_traffic(tf_lab, tf_namespace, gateway_factory):
    with SyntheticUpstream(model="first") as upstream:
        common = {"namespace": tf_namespace, "endpoint": "public", "gpu_type": "NVIDIA-GB10", "tenants": ["acme"]}
        common["upstream_url"] = upstream.base_url
        tf_lab.ok("model", name="second", namespace=tf_namespace, provider="hf", source="Qwen/Qwen2-0.5B-Instruct",
                  served_name="second")  # fmt: skip
        first = tf_lab.ok("model_deployment", name="first", model="qwen", **common)
        assert first["status"]["phase"] == "Ready"
        queued = tf_lab.ok("model_deployment", name="second", model="second", on_insufficient_gpus="queue", **common)
        assert queued["status"]["phase"] == "Pending", queued["status"]
        gw = gateway_factory([], routing_source="kubernetes", kubeconfig=str(tf_lab.kubeconfig),
                             routing_namespace=tf_namespace, routing_refresh_seconds=REFRESH)  # fmt: skip
        client = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.create_key("acme"), max_retries=0)
        served = first["served_model_name"]
        assert [m.id for m in client.models.list()] == [served], "the Pending deployment is not routed"
        time.sleep(4 * REFRESH)  # several refreshes of the routing table from the API
        assert [m.id for m in client.models.list()] == [served]
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="second", messages=[{"role": "user", "content": "hi"}])

        tf_lab.ok("model_deployment", name="first", namespace=tf_namespace, state="absent")
        ready = tf_lab.ok("model_deployment", name="second", model="second", on_insufficient_gpus="queue", **common)
        assert ready["status"]["phase"] == "Ready", ready["status"]
        wait_until(lambda: [m.id for m in client.models.list()] == ["second"], 30, "the now Ready deployment routed")
