"""Every dashboard query against live series from real processes: the real gateway (PostgreSQL, Redis) in front
of three synthetic upstreams that name their metrics as vLLM, NVIDIA NIM (served at /v1/metrics) and NVIDIA
Dynamo do, the simulated DCGM exporter for a GB10 and for an H100 server, and the real node-exporter, all
scraped by a real Prometheus with the role's configuration. Each engine panel must answer for each of the
three deployments, so the NIM and Dynamo names the panels use are proven (the real NIM and Dynamo need GPUs:
their names come from NVIDIA's documentation, named as such in tests/engine/synthetic_metrics.py)."""

import json

import pytest
import yaml

from lab import dashboard_check
from tests.engine.synthetic import SyntheticUpstream
from tests.engine.synthetic_metrics import METRIC_NAMES
from tests.gateway.gateway import deployment_objects
from tests.observability.fixtures import render
from tests.observability.prometheus import Prometheus, node_exporter, simulated_dcgm_exporter

pytestmark = [pytest.mark.observability, pytest.mark.gateway]
ENGINES = ("vllm", "nim", "dynamo")


@pytest.fixture
def stack(gateway_factory, tmp_path):
    upstreams = {}
    for engine in ENGINES:
        upstreams[engine] = SyntheticUpstream(model=f"{engine}-model", output_tokens=12, itl_ms=2, metric_names=engine)
        upstreams[engine].start()
    objects = [
        obj
        for engine, upstream in upstreams.items()
        for obj in deployment_objects(f"{engine}-deployment", f"{engine}-model", upstream.base_url, tenants=["acme"])
    ]
    gw = gateway_factory(objects)
    keys = tmp_path / "key", tmp_path / "limited-key"
    keys[0].write_text(gw.create_key("acme", "k1"))
    keys[1].write_text(gw.create_key("acme", "burst", key_limits={"requests_per_minute": 2}))
    budget = {"budget": {"period": "day", "tokens": 10**9}}  # the budget panel's series: spent / limit
    assert gw.admin("PUT", "/tenants/acme", budget)[0] == 200
    processes, exporters = [], {}
    for node, case in (("spark-01", "gb10-healthy"), ("gpu-server-01", "h100-healthy")):
        proc, exporters[node], _served = simulated_dcgm_exporter(tmp_path, case, name=node)
        processes.append(proc)
    proc, node_port = node_exporter(tmp_path)
    processes.append(proc)
    rendered = render(
        tmp_path,
        {
            "observability_scrape_interval": "1s",
            "observability_static_engine_targets": [
                {
                    "deployment": f"{engine}-deployment",
                    "targets": [upstream.base_url.removeprefix("http://")],
                    "metrics_path": METRIC_NAMES[engine]["path"],
                }
                for engine, upstream in upstreams.items()
            ],
            "observability_static_gateway_targets": [gw.replicas[0].internal_url.removeprefix("http://")],
            "observability_static_dcgm_targets": [
                {"node": node, "targets": [f"127.0.0.1:{port}"]} for node, port in exporters.items()
            ],
            "observability_static_node_targets": [
                {"node": "spark-01", "gpu_product": "NVIDIA-GB10", "targets": [f"127.0.0.1:{node_port}"]}
            ],
            "observability_rule_files_dir": str(tmp_path / "prom" / "rules"),
        },
    )
    config = dict(rendered.config)  # no cluster here: only the static jobs
    config["scrape_configs"] = [job for job in config["scrape_configs"] if "kubernetes_sd_configs" not in job]
    prom = Prometheus(tmp_path / "prom", yaml.safe_dump(config), rendered.rules_text).start()
    dashboards = []
    for uid, dashboard in rendered.dashboards.items():
        path = tmp_path / f"{uid}.json"
        path.write_text(json.dumps(dashboard))
        dashboards.append(path)
    yield {"prom": prom, "gateway": gw, "keys": keys, "dashboards": dashboards, "rendered": rendered}
    prom.stop()
    for process in processes:
        process.stop()
    for upstream in upstreams.values():
        upstream.stop()


def test_every_query_answers_for_each_engine(stack, capsys):
    argv = ["--prometheus", stack["prom"].url, "--gateway", stack["gateway"].url]
    argv += ["--api-key-file", str(stack["keys"][0]), "--limited-key-file", str(stack["keys"][1])]
    argv += ["--scrape-interval", "1", "--requests", "6"]
    for path in stack["dashboards"]:
        argv += ["--dashboard", str(path)]
    for engine in ENGINES:
        argv += ["--target", f"{engine}-deployment={engine}-model"]
    rc = dashboard_check.main(argv)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and report["without_data"] == [], "\n".join(report["without_data"])
    assert report["not_on_this_hardware"] == []
    assert report["statuses"].get("429", 0) >= 1 and report["statuses"].get("400", 0) == 2, report["statuses"]
    engine_panels = sum(1 for _uid, _title, expr in stack["rendered"].exprs() if "$deployment" in expr)
    print(
        f"{report['queries']} queries and variables answered, {engine_panels} engine queries x {len(ENGINES)} engines"
    )


def test_each_engine_answers_under_its_own_names(stack):
    """The `or` chains pick each deployment's own series: a NIM deployment's TTFT comes from NIM's histogram."""
    prom = stack["prom"]
    prom.until("engine scrapes", lambda: len(prom.query('up{job=~"tokenfactory-engine-.*"} == 1')) == 3)
    for engine in ENGINES:
        names = METRIC_NAMES[engine]
        assert prom.query(f'{names["running"]}{{deployment="{engine}-deployment"}}'), engine
        others = [e for e in ENGINES if e != engine]
        for other in others:
            assert not prom.query(f'{METRIC_NAMES[other]["running"]}{{deployment="{engine}-deployment"}}')
