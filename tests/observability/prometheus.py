"""Real Prometheus for the tests: promtool/prometheus/node_exporter built by scripts/ensure-prometheus, and a
Prometheus process with its own data directory that tests stop, kill and restart."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from lab.paths import REPO_ROOT
from lab.processes import free_port
from lab.wait import wait_until

DCGM_TEXTS = REPO_ROOT / "lab/fixtures/dcgm"

ROOT = pathlib.Path(__file__).resolve().parents[2]


@functools.cache
def bin_dir():
    out = subprocess.run([str(ROOT / "scripts/ensure-prometheus")], capture_output=True, text=True, check=True)
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def promtool(*args, cwd=None):
    return subprocess.run(
        [str(bin_dir() / "promtool"), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def http_json(url, data=None, timeout=10):
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=timeout) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


class Process:
    """A child process with a log file; stop() sends a signal and waits, kill() is SIGKILL."""

    def __init__(self, argv, log, env=None):
        self.argv, self.log_path, self.env = argv, pathlib.Path(log), env
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        env = {**os.environ, **(self.env or {})}
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        log.close()
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if not self.running():
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def kill(self):
        self.stop(signal.SIGKILL)

    def log_tail(self, lines=40):
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class Prometheus(Process):
    """prometheus --config.file CONFIG --storage.tsdb.path DATA on a free loopback port."""

    def __init__(self, workdir, config_text, rules_text=None, port=None, extra_args=()):
        self.workdir = pathlib.Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data = self.workdir / "data"
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.write_config(config_text, rules_text)
        argv = [
            str(bin_dir() / "prometheus"),
            f"--config.file={self.workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            *extra_args,
        ]
        super().__init__(argv, self.workdir / "prometheus.log")

    def write_config(self, config_text, rules_text=None):
        (self.workdir / "prometheus.yml").write_text(config_text)
        if rules_text is not None:
            (self.workdir / "rules").mkdir(exist_ok=True)
            (self.workdir / "rules" / "tokenfactory.rules.yml").write_text(rules_text)

    def start(self, timeout=60):
        super().start()
        deadline = time.monotonic() + timeout
        while True:
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response,  # noqa: S310 - loopback
            ):
                if response.status == 200:
                    return self
            if not self.running() or time.monotonic() > deadline:
                raise RuntimeError(f"Prometheus did not become ready:\n{self.log_tail()}")
            time.sleep(0.25)

    def reload(self):
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/-/reload", method="POST"), timeout=10)  # noqa: S310

    def query(self, expr, at=None):
        data = {"query": expr}
        if at is not None:
            data["time"] = f"{at:.3f}"
        return http_json(f"{self.url}/api/v1/query", data)["data"]["result"]

    def query_range(self, expr, start, end, step):
        data = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step}
        return http_json(f"{self.url}/api/v1/query_range", data)["data"]["result"]

    def alerts(self):
        return http_json(f"{self.url}/api/v1/alerts")["data"]["alerts"]

    def targets(self):
        return http_json(f"{self.url}/api/v1/targets")["data"]

    def until(self, what, check, timeout=60):
        try:
            return wait_until(check, timeout, what, interval=0.5)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.log_tail(20)}") from exc


def simulated_dcgm_exporter(workdir, case, name="dcgm"):
    """The SIMULATED DCGM exporter serving a copy of lab/fixtures/dcgm/CASE.prom: (process, port, served file)."""
    served = pathlib.Path(workdir) / f"{name}.prom"
    served.write_bytes((DCGM_TEXTS / f"{case}.prom").read_bytes())
    port = free_port()
    argv = [sys.executable, "-m", "lab.simulated_dcgm_exporter", "--port", str(port), "--file", str(served)]
    proc = Process(argv, pathlib.Path(workdir) / f"{name}.log", env={"PYTHONPATH": str(REPO_ROOT)}).start()
    wait_until(lambda: _answers(f"http://127.0.0.1:{port}/metrics"), 30, "the simulated DCGM exporter")
    return proc, port, served


def set_gpu_state(served, case):
    """Swap what the simulated exporter serves (atomically: a scrape never reads half a file)."""
    tmp = served.with_suffix(".tmp")
    tmp.write_bytes((DCGM_TEXTS / f"{case}.prom").read_bytes())
    tmp.replace(served)


def node_exporter(workdir):
    """The real node_exporter (memory only) on a free port: (process, port)."""
    port = free_port()
    argv = [str(bin_dir() / "node_exporter"), f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults", "--collector.meminfo"]  # fmt: skip
    proc = Process(argv, pathlib.Path(workdir) / "node-exporter.log").start()
    wait_until(lambda: _answers(f"http://127.0.0.1:{port}/metrics"), 30, "node_exporter")
    return proc, port


def _answers(url):
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
        return response.status == 200
