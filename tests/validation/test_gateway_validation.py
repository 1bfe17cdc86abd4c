"""Validation through the real gateway (PostgreSQL + Redis): API key use and HTTP 429 accounting."""

import json

import pytest

from tests.gateway.gateway import deployment_objects
from tests.validation.helpers import validate

pytestmark = pytest.mark.gateway
MODEL = "tiny-qwen2"


def test_api_key_and_rate_limits_through_gateway(gateway_factory, synthetic_upstream):
    upstream = synthetic_upstream(model=MODEL, ttft_ms=20, itl_ms=2, output_tokens=8)
    limits = {"perKey": {"requestsPerMinute": 6}}
    gw = gateway_factory(deployment_objects("tiny", MODEL, upstream.base_url, rate_limits=limits))
    key = gw.create_key("acme", "k1")

    anonymous = validate(gw.url, num_requests=2, warmup_requests=0, output_tokens=8)
    assert anonymous["completed"] == 0 and set(anonymous["errors"]["by_kind"]) == {"http_401"}

    result = validate(
        gw.url,
        api_key=key,
        concurrency=2,
        num_requests=12,
        warmup_requests=0,
        output_tokens=8,
        slo={"max_error_rate": 0.6},
    )
    assert result["completed"] == 6, result["errors"]  # the bucket holds 6 requests per minute
    assert result["errors"]["rate_limited"] == 6 and result["errors"]["by_kind"] == {"rate_limited": 6}
    assert all(s["status"] == 429 and s["retry_after"] for s in result["errors"]["samples"])
    assert result["count_ttft"] == 6 and result["count_e2el"] == 6  # a 429 is not a latency sample
    assert result["total_output_tokens"] == 48 and result["slo"]["passed"]
    assert key not in json.dumps(result)
    sent = [headers for method, path, headers, body in upstream.received if path.endswith("/completions")]
    assert len(sent) == 6  # only admitted requests reached the engine
