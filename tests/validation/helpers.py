"""Shared helpers of the validation tier tests."""

import contextlib
import os

from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.validation import run_validation


@contextlib.contextmanager
def priority(nice, *pids):
    """Raise the scheduling priority of this process (and `pids`) while timing-sensitive checks run (root only)."""
    targets = [0, *pids]
    before = {pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in targets}
    changed = []
    for pid in targets:
        with contextlib.suppress(PermissionError, ProcessLookupError):
            os.setpriority(os.PRIO_PROCESS, pid, nice)
            changed.append(pid)
    try:
        yield
    finally:
        for pid in changed:
            with contextlib.suppress(PermissionError, ProcessLookupError):
                os.setpriority(os.PRIO_PROCESS, pid, before[pid])


def validate(base_url, **options):
    options.setdefault("model", "tiny-qwen2")
    return run_validation({"base_url": base_url, **options})
