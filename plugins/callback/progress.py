# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Notification callback: the progress line of each retry of an `until` loop (long waits you can watch)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: progress
type: notification
short_description: Prints the state of long waits on each retry (rollouts, GPU and gateway readiness)
version_added: 0.3.0
description:
  - While an C(until) loop polls, Ansible prints only C(FAILED - RETRYING) and the retries left. When a retried
    task's result carries C(progress_line) (the Token Factory C(_info) modules return one, for example
    M(tokenfactory.spark.model_deployment_info) with C(observe=true) and M(tokenfactory.spark.rollout_info)), this
    callback prints it with the attempt and the seconds waited, so the phase, ready replicas and the last event
    show as they change; the last attempt's line is printed too, whether it ended the loop or failed.
  - A notification callback, so it runs next to whatever stdout callback is set (AWX sets its own). The
    collection's C(ansible.cfg) enables it; elsewhere set C(callbacks_enabled = tokenfactory.spark.progress) or
    E(ANSIBLE_CALLBACKS_ENABLED).
requirements:
  - enable in configuration (callbacks_enabled)
"""

import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "tokenfactory.spark.progress"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started, self._looks = {}, {}

    def v2_runner_on_start(self, host, task):
        key = (host.get_name(), task._uuid)
        self._started[key], self._looks[key] = time.monotonic(), 0

    def _show(self, result, final):
        line = result._result.get("progress_line")
        # Only tasks that loop with `until` (ansible-core sets attempts on each of their results).
        if not isinstance(line, str) or not line or "attempts" not in result._result:
            return
        key = (result._host.get_name(), result._task._uuid)
        # Counted here: ansible-core's own attempts/retries numbers differ by one between retries and the end.
        self._looks[key] = looks = self._looks.get(key, 0) + 1
        waited = time.monotonic() - self._started.get(key, time.monotonic())
        limit = result._result.get("retries")
        of = f"/{limit}" if limit and not final else ""
        mark = "done" if final else "waiting"
        self._display.display(
            f"  [{result._host.get_name()}] {mark} {looks}{of}, {waited:.0f}s: {line}",
            color=None if final else "cyan",
        )

    def v2_runner_retry(self, result):
        self._show(result, final=False)

    def v2_runner_on_ok(self, result):
        self._show(result, final=True)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._show(result, final=True)
