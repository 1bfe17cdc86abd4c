# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Aggregate callback: validation results + rollout timings -> summary table, JSON, JUnit XML and HTML."""

from __future__ import annotations

DOCUMENTATION = r"""
name: validation_report
type: aggregate
short_description: Reports of deployment validations and rollout timings (table, JSON, JUnit XML, HTML)
version_added: 0.1.0
description:
  - Collects every result of M(tokenfactory.spark.validate_deployment) (also when the task failed on an SLO
    breach), the time spent per role and per play, the total time from the first task to the first token
    served by a validated endpoint, and host/GPU facts gathered during the run.
  - At the end of the playbook prints a compact summary table and writes C(<name>.json) (validation results
    with C(vllm bench serve) key names and the metric definitions), C(<name>.xml) (JUnit, one test suite per
    deployment and one test case per SLO) and C(<name>.html) (self-contained, inline SVG charts).
  - An aggregate callback, so it runs next to whatever stdout callback is set (AWX sets its own). Enable it with
    C(callbacks_enabled = tokenfactory.spark.validation_report) in C(ansible.cfg) or
    E(ANSIBLE_CALLBACKS_ENABLED).
  - No secrets are written; keys named like credentials are dropped, URL credentials removed and no_log
    placeholders masked. Only whitelisted host facts and GPU-related facts are kept.
requirements:
  - enable in configuration (callbacks_enabled)
options:
  report_dir:
    description: Directory for the report files (created when missing; relative paths start at the working directory).
    type: path
    default: reports
    env:
      - name: TOKENFACTORY_VALIDATION_REPORT_DIR
    ini:
      - section: callback_validation_report
        key: report_dir
  report_name:
    description: Base name of the report files.
    type: str
    default: validation-report
    env:
      - name: TOKENFACTORY_VALIDATION_REPORT_NAME
    ini:
      - section: callback_validation_report
        key: report_name
  formats:
    description: Files to write.
    type: list
    elements: str
    default: [json, junit, html]
    env:
      - name: TOKENFACTORY_VALIDATION_REPORT_FORMATS
    ini:
      - section: callback_validation_report
        key: formats
  write_without_validations:
    description: Also write reports (rollout timings only) for playbooks that ran no validation.
    type: bool
    default: false
    env:
      - name: TOKENFACTORY_VALIDATION_REPORT_ALWAYS
    ini:
      - section: callback_validation_report
        key: write_without_validations
  print_summary:
    description: Print the summary table at the end of the playbook.
    type: bool
    default: true
    env:
      - name: TOKENFACTORY_VALIDATION_REPORT_SUMMARY
    ini:
      - section: callback_validation_report
        key: print_summary
"""

import os
import time

from ansible.plugins.callback import CallbackBase

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.validation import SCHEMA
from ansible_collections.tokenfactory.spark.plugins.plugin_utils import report_data, report_html

FORMATS = {"json": ".json", "junit": ".xml", "html": ".html"}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "tokenfactory.spark.validation_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.playbook = None
        self.play = None
        self.tasks = {}
        self.validations = []
        self.hosts = {}

    # -- collection ---------------------------------------------------------------------------
    def v2_playbook_on_start(self, playbook):
        self.playbook = os.path.basename(getattr(playbook, "_file_name", "") or "") or None

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name().strip() or "(unnamed play)"

    def v2_playbook_on_task_start(self, task, is_conditional):
        role = task._role.get_name() if getattr(task, "_role", None) else None
        self.tasks[task._uuid] = {
            "play": self.play,
            "role": role,
            "name": task.get_name(),
            "start": time.time(),
            "end": None,
        }

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def _result(self, result):
        entry = self.tasks.get(result._task._uuid)
        if entry is not None:
            entry["end"] = time.time()
        data = result._result or {}
        host = result._host.get_name()
        self._collect(host, data)
        for item in data.get("results") or []:  # loops: the per-item results
            if isinstance(item, dict):
                self._collect(host, item)

    def _collect(self, host, data):
        validation = data.get("validation")
        if isinstance(validation, dict) and validation.get("schema") == SCHEMA:
            self.validations.append({"host": host, "validation": validation})
        facts = data.get("ansible_facts")
        if isinstance(facts, dict) and facts:
            self.hosts.setdefault(host, {}).update(report_data.host_facts(facts))

    v2_runner_on_ok = _result
    v2_runner_on_skipped = _result
    v2_runner_on_unreachable = _result

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result)

    # -- output -------------------------------------------------------------------------------
    def v2_playbook_on_stats(self, stats):
        if not self.validations and not self.get_option("write_without_validations"):
            return
        doc = report_data.build_report(self.playbook, self.validations, list(self.tasks.values()), self.hosts)
        if self.get_option("print_summary"):
            self._display.banner("VALIDATION REPORT")
            self._display.display(report_data.summary_table(doc))
        written = self._write(doc)
        if written:
            self._display.display("reports: " + ", ".join(written))

    def _write(self, doc):
        directory = self.get_option("report_dir")
        name = self.get_option("report_name")
        formats = [f.strip().lower() for f in self.get_option("formats") or []]
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            self._display.warning(f"validation_report: unknown formats {unknown}; allowed: {', '.join(FORMATS)}")
        render = {"json": report_data.to_json, "junit": report_data.junit_xml, "html": report_html.render}
        written = []
        try:
            os.makedirs(directory, exist_ok=True)
            for fmt in formats:
                if fmt not in FORMATS:
                    continue
                path = os.path.join(directory, name + FORMATS[fmt])
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(render[fmt](doc))
                written.append(path)
        except OSError as exc:
            self._display.warning(f"validation_report: cannot write reports to {directory}: {exc}")
        return written
