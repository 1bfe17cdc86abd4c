"""promtool on the rendered role (marker observability): the alert rules' unit tests, the configuration with its
kubernetes_sd jobs as shipped, every dashboard query parsed."""

import pathlib
import shutil

import pytest
import yaml

from tests.observability.prometheus import promtool

pytestmark = pytest.mark.observability
RULE_TESTS = sorted((pathlib.Path(__file__).parent / "rules").glob("*.test.yml"))
GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "1h", "$deployment": ".*", "$tenant": ".*", "$node": ".*"}


@pytest.fixture(scope="module")
def rules_dir(observability_rendered, tmp_path_factory):
    path = tmp_path_factory.mktemp("rules")
    (path / "tokenfactory.rules.yml").write_text(observability_rendered.rules_text)
    return path


def test_rule_file_is_valid(rules_dir, observability_rendered):
    proc = promtool("check", "rules", rules_dir / "tokenfactory.rules.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(observability_rendered.alert_names())} rules found" in proc.stdout


@pytest.mark.parametrize("test_file", RULE_TESTS, ids=lambda p: p.stem)
def test_alert_rules_unit_tests(rules_dir, test_file):
    shutil.copy(test_file, rules_dir / test_file.name)
    proc = promtool("test", "rules", test_file.name, cwd=rules_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_wrong_threshold_fails_the_unit_tests(tmp_path, observability_rendered):
    """The unit tests are not vacuous: the thermal rule firing on any clock event reason is caught."""
    broken = observability_rendered.rules_text.replace(
        "(floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 4) > 0", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS >= 0"
    )
    assert broken != observability_rendered.rules_text
    (tmp_path / "tokenfactory.rules.yml").write_text(broken)
    shutil.copy(pathlib.Path(__file__).parent / "rules/gpu.test.yml", tmp_path)
    proc = promtool("test", "rules", "gpu.test.yml", cwd=tmp_path)
    assert proc.returncode != 0 and "TokenFactoryGPUThermalThrottling" in proc.stdout + proc.stderr


def test_configuration_is_valid_with_its_kubernetes_sd_jobs(observability_rendered, tmp_path):
    """This Prometheus is built with every service discovery (Debian's package lacks kubernetes_sd)."""
    config = yaml.safe_load(observability_rendered.config_text)
    assert sum(1 for job in config["scrape_configs"] if "kubernetes_sd_configs" in job) == 4
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules/tokenfactory.rules.yml").write_text(observability_rendered.rules_text)
    config["rule_files"] = [str(tmp_path / "rules/*.yml")]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = promtool("check", "config", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_dashboard_query_parses(observability_rendered, tmp_path):
    rules = []
    for i, (_uid, _title, expr) in enumerate(observability_rendered.exprs()):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        rules.append({"record": f"tokenfactory:dashboard_query:{i}", "expr": expr})
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    proc = promtool("check", "rules", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


def test_promtool_catches_a_broken_query(tmp_path):
    path = tmp_path / "rules.yml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "a:b", "expr": "sum(rate(x[5m]) by"}]}]})
    )
    assert promtool("check", "rules", path).returncode != 0
