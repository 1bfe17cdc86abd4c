"""validate_deployment with metrics_via=api_server against the lab's real API server: the engine's metrics are read
at /api/v1/namespaces/NS/services/NAME:PORT/proxy/metrics, as a controller outside the cluster does. A Service
the API server cannot proxy is a scrape failure naming the proxy path and the API server's answer (the run goes
on); a metrics URL that names no Service fails at once, naming the option."""

import pytest

from tests.engine.synthetic import SyntheticUpstream
from tests.modules.lab_helpers import run_module

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def upstream():
    with SyntheticUpstream(model="tiny", output_tokens=8) as engine:
        yield engine


def validate(tf_lab, upstream, metrics_url, via="api_server"):
    return run_module(
        "validate_deployment",
        None,
        base_url=f"{upstream.base_url}/v1",
        model="tiny",
        metrics_url=metrics_url,
        metrics_via=via,
        metrics_kubeconfig=str(tf_lab.kubeconfig),
        num_requests=4,
        concurrency=2,
        warmup_requests=1,
        output_tokens=8,
        prompt_tokens=16,
    )


def test_a_service_that_does_not_exist_is_a_named_scrape_failure(tf_lab, tf_namespace, upstream):
    result = validate(tf_lab, upstream, f"http://missing.{tf_namespace}.svc:8000/metrics")
    assert not result.get("failed"), result.get("msg")  # metrics never fail the run
    server = result["validation"]["server"]
    assert not server["scraped"] and server["reason"] == "scrape failed"
    path = f"/api/v1/namespaces/{tf_namespace}/services/missing:8000/proxy/metrics"
    assert server["errors"][0] == f'API server service proxy {path}: HTTP 404 services "missing" not found'


def test_a_url_that_is_no_service_fails_naming_the_option(tf_lab, upstream):
    result = validate(tf_lab, upstream, f"{upstream.base_url}/metrics")
    assert result["failed"] and result["msg"].startswith("metrics_via=api_server:")
    assert "is not a cluster Service URL" in result["msg"]


def test_auto_reads_a_service_url_through_the_api_server(tf_lab, tf_namespace, upstream):
    result = validate(tf_lab, upstream, f"http://missing.{tf_namespace}.svc:8000/metrics", via="auto")
    assert result["validation"]["server"]["errors"][0].startswith("API server service proxy /api/v1/namespaces/")


def test_auto_dials_any_other_url_itself(tf_lab, upstream):
    result = validate(tf_lab, upstream, f"{upstream.base_url}/metrics", via="auto")
    assert not result.get("failed"), result.get("msg")
    server = result["validation"]["server"]
    assert server["scraped"], server
