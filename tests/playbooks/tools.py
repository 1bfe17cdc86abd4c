"""Reference tools the tests use for real: promtool/prometheus unpacked from Debian (scripts/ensure-prometheus)."""

import functools
import pathlib
import subprocess

from tests.playbooks.ansible_run import ROOT


@functools.cache
def prometheus_bin_dir():
    out = subprocess.run([str(ROOT / "scripts/ensure-prometheus")], capture_output=True, text=True, check=True)
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def promtool(*args, cwd=None):
    return subprocess.run(
        [str(prometheus_bin_dir() / "promtool"), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )
