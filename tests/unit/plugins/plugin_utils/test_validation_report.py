"""Report document: secret scrubbing, summary table, JUnit XML and the self-contained HTML."""

import json
from xml.etree import ElementTree

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import stats
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.loadgen import RequestRecord
from ansible_collections.tokenfactory.spark.plugins.plugin_utils import report_data, report_html

SECRET = "sk-very-secret-0042"


def validation(name, ttft_chunks, slo=None):
    records = []
    for i, first in enumerate(ttft_chunks):
        r = RequestRecord(i, "p")
        r.start, r.chunk_times, r.output_tokens, r.prompt_tokens, r.ok = 0.0, [first, first + 0.01], 2, 5, True
        records.append(r)
    result = stats.summarize(records, 1.0, slo)
    result.update(
        {
            "schema": "tokenfactory.spark/validation/v1",
            "deployment": name,
            "model": name,
            "url": f"http://user:{SECRET}@gw:8080/v1/chat/completions",
            "first_token_at": 1000.0,
            "series": stats.throughput_series(records, 0.0, 1.0),
            "distributions": stats.distributions(records),
            "server": {"scraped": False, "reason": "no metrics_url given"},
            "config": {"api_key": SECRET},
            "token_check": {"match": None},
        }
    )
    return {"host": "localhost", "validation": result}


@pytest.fixture
def doc():
    tasks = [
        {"play": "Roll out", "role": "gateway", "name": "a", "start": 900.0, "end": 930.0},
        {"play": "Roll out", "role": "gateway", "name": "b", "start": 930.0, "end": 940.0},
        {"play": "Validate", "role": None, "name": "c", "start": 940.0, "end": 1010.0},
    ]
    validations = [validation("fast", [0.05, 0.06]), validation("slow", [0.7, 0.8])]
    hosts = {
        "spark1": report_data.host_facts(
            {
                "ansible_hostname": "spark1",
                "ansible_env": {"TOKEN": SECRET},
                "ansible_architecture": "aarch64",
                "nvidia_gpu_product": "GB10",
            }
        )
    }
    return report_data.build_report("site.yml", validations, tasks, hosts, secrets=[SECRET])


def test_no_secret_anywhere(doc):
    outputs = [
        report_data.to_json(doc),
        report_data.junit_xml(doc),
        report_html.render(doc),
        report_data.summary_table(doc),
    ]
    for text in outputs:
        assert SECRET not in text
    assert doc["validations"][0]["validation"]["url"] == "http://gw:8080/v1/chat/completions"
    assert "api_key" not in doc["validations"][0]["validation"]["config"]
    assert doc["hosts"]["spark1"] == {"hostname": "spark1", "architecture": "aarch64", "nvidia_gpu_product": "GB10"}


def test_scrub_keeps_token_counts():
    scrubbed = report_data.scrub(
        {
            "total_output_tokens": 5,
            "token_check": {"match": True},
            "metrics_token": "x",
            "admin_token": "y",
            "Authorization": "Bearer z",
            "pw": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER",
        }
    )
    assert scrubbed == {"total_output_tokens": 5, "token_check": {"match": True}, "pw": "***"}


def test_rollout_timings(doc):
    rollout = doc["rollout"]
    assert rollout["per_role_s"] == {"(play tasks)": 70.0, "gateway": 40.0}
    assert rollout["per_play_s"] == {"Roll out": 40.0, "Validate": 70.0}
    assert rollout["first_task_to_serving_s"] == 100.0 and rollout["total_s"] == 110.0


def test_junit_one_case_per_slo(doc):
    root = ElementTree.fromstring(report_data.junit_xml(doc))  # noqa: S314 - our own output
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["fast@localhost", "slow@localhost"]
    cases = suites[1].findall("testcase")
    assert [c.get("name") for c in cases] == ["TTFT p95 < 500 ms", "ITL p95 < 250 ms", "error rate <= 0"]
    assert cases[0].find("failure") is not None and cases[1].find("failure") is None
    assert root.get("tests") == "6" and root.get("failures") == "1"


def test_summary_table_and_json_keys(doc):
    table = report_data.summary_table(doc)
    assert "fast" in table and "FAIL" in table and "first task -> serving endpoint 100.0 s" in table
    parsed = json.loads(report_data.to_json(doc))
    assert parsed["passed"] is False
    first = parsed["validations"][0]["validation"]
    for key in (
        "p99_ttft_ms",
        "median_itl_ms",
        "mean_tpot_ms",
        "std_e2el_ms",
        "output_throughput",
        "request_goodput",
        "total_input_tokens",
    ):
        assert key in first
    assert parsed["metric_definitions"]["ttft"].startswith("Time to first token")


def test_html_is_self_contained(doc):
    html = report_html.render(doc)
    assert html.count("<svg") >= 2 * 8 + 2
    assert "<script" not in html and "http://gw" in html and "src=" not in html and "href=" not in html
    assert "Metric definitions" in html and "Time per role" in html
