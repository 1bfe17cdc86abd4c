"""validate_deployment + validation_report callback in real ansible-playbook runs against the synthetic upstream."""

import json
import os
import pathlib
import subprocess
import sys
from xml.etree import ElementTree

import pytest
import yaml
from lab.processes import free_port

pytestmark = pytest.mark.slow
ROOT = pathlib.Path(__file__).resolve().parents[2]
SECRET = "sk-tf-never-print-me-7731"


def playbook(tmp_path, upstream, check=False, fail_on_breach=False, itl_ms=250, **options):
    base_url = upstream if isinstance(upstream, str) else upstream.base_url
    task = {
        "name": "Validate synthetic deployment",
        "tokenfactory.spark.validate_deployment": {
            "base_url": base_url + "/v1",
            "model": "tiny-qwen2",
            "deployment": "tiny",
            "api_key": SECRET,
            "metrics_url": base_url + "/metrics",
            "num_requests": 8,
            "concurrency": 2,
            "output_tokens": 8,
            "slo": {"itl_ms": itl_ms},
            "fail_on_slo_breach": fail_on_breach,
            **options,
        },
        "register": "out",
    }
    plays = [
        {
            "name": "Validate",
            "hosts": "localhost",
            "gather_facts": True,
            "tasks": [task, {"name": "Show", "ansible.builtin.debug": {"var": "out"}}],
        }
    ]
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump(plays, sort_keys=False))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".collections"),
        "ANSIBLE_CALLBACKS_ENABLED": "tokenfactory.spark.validation_report",
        "TOKENFACTORY_VALIDATION_REPORT_DIR": str(tmp_path / "reports"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
    }
    command = [
        str(pathlib.Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-v",
        str(path),
    ]
    if check:
        command.append("--check")
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)


def reports(tmp_path):
    return {p.suffix: p.read_text() for p in (tmp_path / "reports").glob("validation-report.*")}


def test_run_writes_reports_without_secrets(tmp_path, synthetic_upstream):
    upstream = synthetic_upstream(ttft_ms=20, itl_ms=3, output_tokens=8)
    run = playbook(tmp_path, upstream)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "VALIDATION REPORT" in run.stdout and "PASS" in run.stdout
    files = reports(tmp_path)
    assert set(files) == {".json", ".xml", ".html"}
    doc = json.loads(files[".json"])
    validation = doc["validations"][0]["validation"]
    assert validation["completed"] == 8 and validation["token_check"]["match"] is True
    assert doc["rollout"]["first_task_to_serving_s"] > 0 and doc["hosts"]["localhost"]["architecture"]
    assert doc["rollout"]["per_play_s"]["Validate"] > 0
    cases = ElementTree.fromstring(files[".xml"]).iter("testcase")  # noqa: S314 - our own output
    assert [c.get("name") for c in cases] == ["TTFT p95 < 500 ms", "ITL p95 < 250 ms", "error rate <= 0"]
    assert "<svg" in files[".html"]
    for text in [run.stdout, run.stderr, *files.values()]:
        assert SECRET not in text


def test_check_mode_sends_no_load(tmp_path, synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=8)
    run = playbook(tmp_path, upstream, check=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "check mode: no load sent" in run.stdout
    assert upstream.generation_requests == 0 and not upstream.received
    assert not (tmp_path / "reports").exists()  # nothing validated, nothing written


def test_slo_breach_fails_the_task_and_is_reported(tmp_path, synthetic_upstream):
    upstream = synthetic_upstream(ttft_ms=5, itl_ms=20, output_tokens=8)
    run = playbook(tmp_path, upstream, fail_on_breach=True, itl_ms=5)
    assert run.returncode == 2, run.stdout
    assert "SLO missed: itl_p95" in run.stdout and SECRET not in run.stdout + run.stderr
    doc = json.loads(reports(tmp_path)[".json"])
    assert doc["passed"] is False
    failed = ElementTree.fromstring(reports(tmp_path)[".xml"]).find(".//failure")  # noqa: S314
    assert failed is not None and "ITL p95 < 5 ms" in failed.get("message")


def failed_task_result(run):
    """The JSON result -v prints for the failed validate task (returned with the failure)."""
    text = run.stdout.split("fatal: [localhost]: FAILED! => ", 1)[1]
    return json.JSONDecoder().raw_decode(text.lstrip())[0]


@pytest.mark.parametrize(
    ("case", "first_error"),
    [
        ("closed-port", "first: connect_error: ConnectionRefusedError"),
        ("http-503", "first: http_503 (HTTP 503): synthetic upstream answers HTTP 503"),
        ("timeout", "first: timeout: request timed out"),
    ],
)
def test_failed_requests_fail_the_task_naming_the_first_error(tmp_path, synthetic_upstream, case, first_error):
    """Loud failures: a dead, failing or hanging endpoint fails the task although fail_on_slo_breach is false."""
    options = {"num_requests": 4, "warmup_requests": 1, "request_timeout": 5}
    if case == "closed-port":
        target = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    elif case == "http-503":
        target = synthetic_upstream(fail_status=503, output_tokens=8)
    else:
        target = synthetic_upstream(ttft_ms=3000, output_tokens=8)
        options["request_timeout"] = 0.5
    run = playbook(tmp_path, target, **options)
    assert run.returncode == 2, run.stdout[-3000:]
    result = failed_task_result(run)
    kind = first_error.split(": ")[1].split(" ")[0]
    assert f"4 of 4 requests failed ({kind}: 4), {first_error}" in result["msg"], result["msg"]
    assert result["validation"]["errors"]["request_errors"] == 4 and result["passed"] is False
    assert SECRET not in run.stdout + run.stderr
    doc = json.loads(reports(tmp_path)[".json"])  # the report still gets the failed run
    assert doc["passed"] is False and doc["validations"][0]["validation"]["failed"] == 4


def test_request_errors_can_be_left_to_the_error_rate_slo(tmp_path):
    """fail_on_request_errors=false: the task passes and reports the miss; fail_on_slo_breach decides."""
    dead = f"http://127.0.0.1:{free_port()}"
    run = playbook(tmp_path, dead, num_requests=2, warmup_requests=0, fail_on_request_errors=False)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "tiny: 0/2 ok" in run.stdout and "SLO missed: ttft_p95, itl_p95, error_rate" in run.stdout
    strict = playbook(tmp_path, dead, fail_on_breach=True, num_requests=2, warmup_requests=0)
    assert strict.returncode == 2
    assert "2 of 2 requests failed (connect_error: 2)" in failed_task_result(strict)["msg"]
