"""Routing from real ModelDeployment objects in the lab's API server (markers lab + gateway).

The ModelDeployment is created by the collection's own module; `upstream_url` points it at a synthetic
engine outside the simulated cluster (kwok nodes run no containers)."""

import re
import socket
import time

import openai
import pytest
import yaml

from lab.proxies import FaultProxy
from lab.wait import ProcessDied, wait_until
from tests.engine.synthetic import SyntheticUpstream

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


def kubeconfig_for(server, path):
    """A kubeconfig naming only a server (plain HTTP: the lab's FaultProxy authenticates as its admin)."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "s", "cluster": {"server": server}}], "users": [{"name": "u", "user": {}}],
              "contexts": [{"name": "c", "context": {"cluster": "s", "user": "u"}}]}  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_throttling_and_server_errors_are_retried_like_the_modules(tf_lab, tf_namespace, gateway_factory, tmp_path):
    with FaultProxy(tf_lab.cluster, faults=[429, 503]) as front:
        gw = gateway_factory([], routing_source="kubernetes", kubeconfig=kubeconfig_for(front.url, tmp_path / "kc"),
                             routing_namespace=tf_namespace, routing_refresh_seconds=0.5)  # fmt: skip
        assert front.seen[:3] == [429, 503, 200], "the first load retried, then listed"
        front.inject(500)
        wait_until(lambda: front.seen.count(500) == 1 and front.seen[-1] == 200, 30, "a refresh past a 500")
    log = gw.replicas[0].log_path.read_text()
    assert log.count("retrying in") == 3, log[-2000:]
    assert "routing refresh failed" not in log, "a retried answer is no failed refresh"


def test_a_missing_kubeconfig_stops_the_gateway_naming_it_before_it_waits_for_the_datastores(gateway_factory, tmp_path):
    """A setting to fix, said at once: not after the start-up wait for a Redis that does not answer (port 9 refuses)."""
    missing = tmp_path / "no" / "kubeconfig"
    started = time.monotonic()
    with pytest.raises(ProcessDied, match=re.escape(f"option kubeconfig: {missing}: no such file")):
        gateway_factory([], routing_source="kubernetes", kubeconfig=str(missing), redis_url="redis://127.0.0.1:9",
                        startup_wait_seconds=300)  # fmt: skip
    assert time.monotonic() - started < 60


def test_a_silent_api_server_fails_the_first_load_after_the_request_timeout(gateway_factory, tmp_path):
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (backlog), never answers
    try:
        kubeconfig = kubeconfig_for(f"http://127.0.0.1:{silent.getsockname()[1]}", tmp_path / "kc")
        started = time.monotonic()
        with pytest.raises(ProcessDied, match=r"cannot reach the API server.*timed out"):
            gateway_factory([], routing_source="kubernetes", kubeconfig=kubeconfig, routing_request_timeout=1)
        assert time.monotonic() - started < 30, "one request timeout (status 0 is not retried), then the exit"
    finally:
        silent.close()
