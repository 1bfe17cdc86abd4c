"""observability role, rendered (no Prometheus needed): dashboard structure, engine name coverage, scrape jobs,
alert rule coverage by the promtool tests, facts shared with the rest of the collection."""

import pathlib
import re

import pytest
import yaml

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import prom_scrape
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import UNIFIED_MEMORY_PRODUCTS

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles/observability"
QUANTILES = ("0.5", "0.9", "0.95", "0.99")
RULE_TESTS = sorted((pathlib.Path(__file__).parent / "rules").glob("*.test.yml"))


def role_vars():
    return yaml.safe_load((ROLE / "vars/main.yml").read_text())


def role_defaults():
    return yaml.safe_load((ROLE / "defaults/main.yml").read_text())


def test_dashboards_are_well_formed(observability_rendered):
    dashboards = observability_rendered.dashboards
    assert set(dashboards) == {"tokenfactory-serving", "tokenfactory-gateway", "tokenfactory-gpus"}
    for uid, dashboard in dashboards.items():
        assert dashboard["uid"] == uid and dashboard["schemaVersion"] >= 36
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), uid
        cells = {(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"]}
        assert len(cells) == len(ids), f"{uid}: panels overlap"
        variables = {v["name"] for v in dashboard["templating"]["list"]}
        for panel in dashboard["panels"]:
            assert panel["targets"], panel["title"]
            refs = [t["refId"] for t in panel["targets"]]
            assert len(refs) == len(set(refs))
            assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
            used = set(re.findall(r"\$([a-z]+)\b", " ".join(t["expr"] for t in panel["targets"])))
            assert used <= variables, f"{uid} / {panel['title']}: undefined variables {used - variables}"


def test_engine_panels_cover_vllm_nim_and_dynamo_names(observability_rendered):
    """Each engine quantity is queried under all three engines' names, vLLM first (a Dynamo worker re-exporting
    vLLM's metrics is then read once), and the validation module knows the same names."""
    engine_metrics = role_vars()["observability_engine_metrics"]
    serving = "\n".join(e for uid, _t, e in observability_rendered.exprs() if uid == "tokenfactory-serving")
    for quantity, names in engine_metrics.items():
        assert len(names) == 3 and names[0].startswith("vllm:"), quantity
        assert names[2].startswith("dynamo_"), quantity
        for name in names:
            assert name in serving, f"{quantity}: {name} not queried"
    scraper_names = {n for table in (prom_scrape.GAUGES, prom_scrape.COUNTERS, prom_scrape.HISTOGRAMS)
                     for names in table.values() for n in names}  # fmt: skip
    for quantity in ("running", "waiting", "kv_cache_usage", "generation_tokens", "prompt_tokens"):
        assert engine_metrics[quantity][:2] == [n for n in engine_metrics[quantity][:2] if n in scraper_names]


def test_alternatives_are_joined_with_or_per_deployment(observability_rendered):
    ttft = [e for _u, title, e in observability_rendered.exprs() if title.startswith("Time to first token (TTFT)")]
    assert {e.split(",")[0].removeprefix("histogram_quantile(") for e in ttft} == set(QUANTILES)
    for expr in ttft:
        parts = expr.split("\nor\n")
        assert len(parts) == 3 and all("by (le, deployment)" in p for p in parts)


def test_slo_thresholds_are_gateway_bucket_bounds(observability_rendered):
    from tokenfactory_gateway import metrics as gateway_metrics

    defaults = role_defaults()
    ttft = float(defaults["observability_slo_ttft_ms"].split("default(")[1].split(")")[0]) / 1000
    itl = float(defaults["observability_slo_itl_ms"].split("default(")[1].split(")")[0]) / 1000
    assert ttft in gateway_metrics.LATENCY_BUCKETS and itl in gateway_metrics.ITL_BUCKETS
    gateway = "\n".join(e for uid, _t, e in observability_rendered.exprs() if uid == "tokenfactory-gateway")
    assert f'le="{ttft}"' in gateway and f'le="{itl}"' in gateway


def test_engine_pod_label_is_the_one_the_renderer_sets():
    from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import workload

    assert role_defaults()["observability_deployment_label"] == workload.MODEL_DEPLOYMENT_LABEL
    assert set(workload.scrape_annotations()) == {"prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path"}


def test_unified_memory_products_match_the_inventory():
    assert set(role_defaults()["observability_unified_memory_products"]) == set(UNIFIED_MEMORY_PRODUCTS)


def test_scrape_jobs(observability_rendered):
    config = observability_rendered.config
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert {
        "tokenfactory-engines",
        "tokenfactory-gateway",
        "tokenfactory-dcgm",
        "tokenfactory-node",
        "tokenfactory-engine-qwen2-0-5b",
        "tokenfactory-dcgm-spark-01",
        "tokenfactory-node-spark-01",
    } <= set(jobs)
    assert jobs["tokenfactory-engine-qwen2-0-5b"]["static_configs"][0] == {
        "targets": ["127.0.0.1:8000"],
        "labels": {"deployment": "qwen2-0-5b"},
    }
    assert jobs["tokenfactory-node-spark-01"]["static_configs"][0]["labels"] == {
        "node": "spark-01",
        "gpu_product": "NVIDIA-GB10",
    }
    engine_relabels = jobs["tokenfactory-engines"]["relabel_configs"]
    assert {
        "source_labels": ["__meta_kubernetes_pod_label_tokenfactory_io_model_deployment"],
        "target_label": "deployment",
    } in engine_relabels
    assert jobs["tokenfactory-dcgm"]["kubernetes_sd_configs"] == [
        {"role": "pod", "namespaces": {"names": ["gpu-operator"]}}
    ]
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]


def rule_test_cases():
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            yield from test["alert_rule_test"]


def test_every_alert_has_a_firing_and_a_silent_promtool_case(observability_rendered):
    cases = list(rule_test_cases())
    for alert in observability_rendered.alert_names():
        mine = [c for c in cases if c["alertname"] == alert]
        assert any(c.get("exp_alerts") for c in mine), f"{alert}: no promtool case where it fires"
        assert any(not c.get("exp_alerts") for c in mine), f"{alert}: no promtool case where it stays silent"
    assert {c["alertname"] for c in cases} <= set(observability_rendered.alert_names())


def test_every_alert_names_severity_and_runbook(observability_rendered):
    docs = (ROOT / "docs/operations.md").read_text()
    # GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", docs, re.M)}
    for group in observability_rendered.rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
            assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), rule["alert"]
            anchor = rule["annotations"]["runbook_url"].split("#")[1]
            assert anchor in anchors, f"{rule['alert']}: docs/operations.md has no anchor {anchor}"


@pytest.mark.parametrize("mode", ["pvc", "host_path"])
def test_prometheus_keeps_its_data_on_a_volume(tmp_path, mode):
    manifests = render_manifests(
        tmp_path, {"observability_storage_mode": mode, "observability_host_path_node": "spark-01"}
    )
    sts = next(m for m in manifests if m["kind"] == "StatefulSet")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert "--storage.tsdb.path=/prometheus" in container["args"]
    assert "--storage.tsdb.retention.time=15d" in container["args"]
    assert "--storage.tsdb.retention.size=16GB" in container["args"]
    assert {"name": "data", "mountPath": "/prometheus"} in container["volumeMounts"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    if mode == "pvc":
        claim = sts["spec"]["volumeClaimTemplates"][0]
        assert claim["metadata"]["name"] == "data" and claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
        assert "data" not in volumes
    else:
        assert volumes["data"]["hostPath"] == {"path": "/var/lib/tokenfactory/prometheus", "type": "DirectoryOrCreate"}
        assert sts["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "spark-01"}
        assert "volumeClaimTemplates" not in sts["spec"]
    rules = next(m for m in manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"].endswith("-rules"))
    assert yaml.safe_load(rules["data"]["tokenfactory.rules.yml"])["groups"]


def render_manifests(tmp_path, role_vars, template="prometheus-manifests.yml.j2"):
    """A role template rendered with the role's defaults and rendered facts (include_role public: true)."""
    import json

    from tests.playbooks.ansible_run import run_playbook

    out = tmp_path / "manifests.json"
    playbook = tmp_path / "manifests.yml"
    lookup = f"lookup('ansible.builtin.template', '{ROLE / 'templates' / template}') | from_yaml_all | list | to_json"
    tasks = [
        {
            "name": "Render",
            "ansible.builtin.include_role": {
                "name": "tokenfactory.spark.observability",
                "tasks_from": "render",
                "public": True,
            },
            "vars": role_vars,
        },
        {
            "name": "Manifests",
            "ansible.builtin.copy": {"content": "{{ " + lookup + " }}", "dest": str(out), "mode": "0600"},
            "vars": role_vars,
        },
    ]
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    run_playbook(playbook, "-i", "localhost,", "-c", "local")
    return json.loads(out.read_text())
