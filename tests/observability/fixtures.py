"""Observability fixtures: the role rendered once per session (configuration, rules, dashboards)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.playbooks.ansible_run import render_role

ROLE = "tokenfactory.spark.observability"
RENDERED = ["observability_dashboards", "observability_prometheus_config", "observability_alert_rules"]
STATIC_VARS = {
    "observability_static_engine_targets": [{"deployment": "qwen2-0-5b", "targets": ["127.0.0.1:8000"]}],
    "observability_static_dcgm_targets": [{"node": "spark-01", "targets": ["127.0.0.1:19400"]}],
    "observability_static_node_targets": [
        {"node": "spark-01", "gpu_product": "NVIDIA-GB10", "targets": ["127.0.0.1:19100"]}
    ],
}


class Rendered:
    def __init__(self, facts):
        self.dashboards = {uid: json.loads(text) for uid, text in facts["observability_dashboards"].items()}
        self.config_text = facts["observability_prometheus_config"]
        self.config = yaml.safe_load(self.config_text)
        self.rules_text = facts["observability_alert_rules"]
        self.rules = yaml.safe_load(self.rules_text)

    def alert_names(self):
        return [rule["alert"] for group in self.rules["groups"] for rule in group["rules"] if "alert" in rule]

    def exprs(self):
        """(dashboard uid, panel title, expr) of every panel query."""
        return [
            (uid, panel["title"], target["expr"])
            for uid, dashboard in self.dashboards.items()
            for panel in dashboard["panels"]
            for target in panel["targets"]
        ]


def render(tmp_path, role_vars=None):
    return Rendered(render_role(tmp_path, ROLE, "render", RENDERED, {**STATIC_VARS, **(role_vars or {})}))


@pytest.fixture(scope="session")
def observability_rendered(tmp_path_factory):
    return render(tmp_path_factory.mktemp("observability"))
