"""Validation through the real gateway (PostgreSQL + Redis): API key use, HTTP 429 accounting, and validate.yml's wait
for the gateway to route a deployment that has just become Ready."""

import json
import subprocess
import time

import pytest

from tests.gateway.gateway import deployment_objects
from tests.playbooks.ansible_run import BIN, ROOT, ansible_env
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


def wait_for_model(tmp_path, base_url, model, key, timeout_s):
    """Start playbooks/tasks/wait_for_model.yml (validate.yml's wait before its load) on the controller."""
    playbook = tmp_path / "wait.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.import_tasks": str(ROOT / "playbooks/tasks/wait_for_model.yml")}]}]))  # fmt: skip
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"tf_validate_base_url": f"{base_url}/v1", "tf_validate_model": model,
                                  "tf_validate_bearer": key, "tf_validate_route_timeout": timeout_s}))  # fmt: skip
    cmd = [BIN / "ansible-playbook", playbook, "-i", "localhost,", "-c", "local", "-e", f"@{inputs}"]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_validation_waits_until_the_gateway_routes_a_ready_deployment(gateway_factory, synthetic_upstream, tmp_path):
    """The lab's CI failure: the ModelDeployment turned Ready 6 s before validate.yml's load, the gateway had not
    refreshed its routes yet, and all 32 requests got 404 model_not_found. The load now waits for the model to be
    listed for its key; one that never is fails the run naming the URL and what was listed."""
    upstream = synthetic_upstream(model=MODEL, ttft_ms=5, itl_ms=1, output_tokens=4)
    objects = deployment_objects("tiny", MODEL, upstream.base_url)
    objects[1]["status"]["phase"] = "Progressing"
    gw = gateway_factory(objects)
    key = gw.create_key("acme", "k1")
    assert validate(gw.url, api_key=key, num_requests=1, warmup_requests=0)["errors"]["by_kind"] == {"http_404": 1}

    started = time.monotonic()
    waiting = wait_for_model(tmp_path, gw.url, MODEL, key, timeout_s=60)
    time.sleep(4)
    assert waiting.poll() is None, waiting.communicate()[0]  # still waiting: not routed yet
    objects[1]["status"]["phase"] = "Ready"
    gw.set_routing(objects)
    out = waiting.communicate(timeout=60)[0]
    assert waiting.returncode == 0 and time.monotonic() - started >= 4, out
    assert key not in out
    assert validate(gw.url, api_key=key, num_requests=2, warmup_requests=0)["completed"] == 2

    absent = wait_for_model(tmp_path, gw.url, "not-deployed", key, timeout_s=2)
    out = absent.communicate(timeout=60)[0]
    assert absent.returncode != 0, out
    assert f"{gw.url}/v1/models did not list not-deployed within 2 s" in out and f"listed ['{MODEL}']" in out, out
    assert key not in out
