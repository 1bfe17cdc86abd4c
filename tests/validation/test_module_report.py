"""validate_deployment + validation_report callback in real ansible-playbook runs against the synthetic upstream."""

import json
import os
import pathlib
import subprocess
import sys
from xml.etree import ElementTree

import pytest
import yaml

pytestmark = pytest.mark.slow
ROOT = pathlib.Path(__file__).resolve().parents[2]
SECRET = "sk-tf-never-print-me-7731"


def playbook(tmp_path, upstream, check=False, fail_on_breach=False, itl_ms=250):
    task = {
        "name": "Validate synthetic deployment",
        "tokenfactory.spark.validate_deployment": {
            "base_url": upstream.base_url + "/v1",
            "model": "tiny-qwen2",
            "deployment": "tiny",
            "api_key": SECRET,
            "metrics_url": upstream.base_url + "/metrics",
            "num_requests": 8,
            "concurrency": 2,
            "output_tokens": 8,
            "slo": {"itl_ms": itl_ms},
            "fail_on_slo_breach": fail_on_breach,
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
