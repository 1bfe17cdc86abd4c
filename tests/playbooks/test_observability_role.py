"""observability role: the dashboard (as code) and the scrape configuration, checked with Debian's promtool."""

import json

import pytest
import yaml

from tests.playbooks.ansible_run import render_role
from tests.playbooks.tools import promtool

ROLE = "tokenfactory.spark.observability"
QUANTILES = ("0.5", "0.9", "0.95", "0.99")
# Grafana's variables, replaced by values they take at query time.
GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "1h", "$deployment": ".*"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    facts = render_role(
        tmp_path_factory.mktemp("obs"),
        ROLE,
        "render",
        ["observability_dashboard", "observability_prometheus_config"],
        {"observability_static_engine_targets": [{"deployment": "qwen2-0-5b", "targets": ["127.0.0.1:8000"]}]},
    )
    return json.loads(facts["observability_dashboard"]), facts["observability_prometheus_config"]


def exprs(dashboard):
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_dashboard_structure(rendered):
    dashboard = rendered[0]
    assert dashboard["uid"] == "tokenfactory-serving" and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells = {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"]}
    assert len(cells) == len(ids), "panels overlap"
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert names == {"datasource", "deployment"}


@pytest.mark.parametrize(
    "metric",
    [
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
    ],
)
def test_latency_percentiles_per_deployment(rendered, metric):
    dashboard = rendered[0]
    got = {e.split(",")[0].removeprefix("histogram_quantile(") for e in exprs(dashboard) if metric in e}
    assert got == set(QUANTILES)
    assert all("by (le, deployment)" in e for e in exprs(dashboard) if metric in e)


def test_throughput_and_kv_cache_avg_peak(rendered):
    dashboard = rendered[0]
    joined = "\n".join(exprs(dashboard))
    assert "rate(vllm:generation_tokens_total" in joined and "rate(vllm:prompt_tokens_total" in joined
    assert "avg_over_time(vllm:kv_cache_usage_perc" in joined and "max_over_time(vllm:kv_cache_usage_perc" in joined


def test_every_query_parses_with_promtool(rendered, tmp_path):
    dashboard = rendered[0]
    rules = []
    for i, expr in enumerate(exprs(dashboard)):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        rules.append({"record": f"tokenfactory:dashboard_query:{i}", "expr": expr})
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = promtool("check", "rules", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


def test_promtool_catches_a_broken_query(tmp_path):
    path = tmp_path / "rules.yml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "a:b", "expr": "sum(rate(x[5m]) by"}]}]})
    )
    assert promtool("check", "rules", path).returncode != 0


def test_scrape_config_is_valid(rendered, tmp_path):
    """Debian's promtool is built without Kubernetes service discovery, so each kubernetes_sd_configs block is
    swapped for an empty static one; everything else (relabel regexes, actions, static targets) is checked as is."""
    config_text = rendered[1]
    config = yaml.safe_load(config_text)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert {"tokenfactory-engines", "tokenfactory-gateway", "tokenfactory-engine-qwen2-0-5b"} <= set(jobs)
    static = jobs["tokenfactory-engine-qwen2-0-5b"]["static_configs"][0]
    assert static == {"targets": ["127.0.0.1:8000"], "labels": {"deployment": "qwen2-0-5b"}}
    relabels = jobs["tokenfactory-engines"]["relabel_configs"]
    assert {
        "source_labels": ["__meta_kubernetes_pod_label_tokenfactory_io_model_deployment"],
        "target_label": "deployment",
    } in relabels
    for job in config["scrape_configs"]:
        if job.pop("kubernetes_sd_configs", None) is not None:
            job["static_configs"] = [{"targets": []}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = promtool("check", "config", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
