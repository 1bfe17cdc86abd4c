"""Prometheus keeps its history on its data volume: a real Prometheus scrapes the simulated DCGM exporter, is
killed with SIGKILL, and restarted with a changed configuration on the same data directory (what the role's
StatefulSet does on every configuration change); the samples from before are still there. The same restart on an
empty directory (the Deployment of earlier releases had no volume) has lost them."""

import time

import pytest

from tests.observability.prometheus import Prometheus, http_json, simulated_dcgm_exporter

pytestmark = pytest.mark.observability


def config(exporter_port, interval, extra_job=False):
    jobs = [
        f"""  - job_name: tokenfactory-dcgm-spark-01
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"], labels: {{node: spark-01}}}}]
"""
    ]
    if extra_job:
        jobs.append(f"""  - job_name: prometheus
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
""")
    return f"global: {{scrape_interval: {interval}, evaluation_interval: {interval}}}\nscrape_configs:\n" + "".join(
        jobs
    )


@pytest.fixture
def dcgm_exporter(tmp_path):
    proc, port, _served = simulated_dcgm_exporter(tmp_path, "gb10-healthy")
    yield port
    proc.stop()


def samples_before(prom, cutoff):
    """Samples of the GPU temperature series with a timestamp before `cutoff` (epoch s), in the last 10 min."""
    result = prom.query_range("DCGM_FI_DEV_GPU_TEMP", cutoff - 600, cutoff, "1s")
    return sum(1 for series in result for t, _v in series["values"] if t < cutoff)


def test_history_survives_sigkill_and_a_configuration_change(tmp_path, dcgm_exporter):
    prom = Prometheus(tmp_path / "prom", config(dcgm_exporter, "1s")).start()
    try:
        prom.until("10 scraped samples", lambda: samples_before(prom, time.time()) >= 10, timeout=60)
        killed_at = time.time()
        before = samples_before(prom, killed_at)
        prom.kill()
        assert not prom.running()
        prom.write_config(config(dcgm_exporter, "2s", extra_job=True))
        started = time.monotonic()
        prom.start()
        replay_s = time.monotonic() - started
        after = samples_before(prom, killed_at)
        print(f"samples before SIGKILL {before}, read back after restart {after}, ready in {replay_s:.1f} s")
        assert after >= before - 1, (before, after)  # the last scrape may not have reached the WAL
        prom.until("the changed configuration's new job", lambda: prom.query('up{job="prometheus"}'), timeout=30)
    finally:
        prom.stop()

    empty = Prometheus(tmp_path / "empty", config(dcgm_exporter, "1s")).start()
    try:
        assert samples_before(empty, killed_at) == 0
    finally:
        empty.stop()


def test_size_retention_flag_is_accepted_and_reported(tmp_path, dcgm_exporter):
    """The role's retention flags: Prometheus starts with them and reports the limits it enforces."""
    prom = Prometheus(
        tmp_path / "prom",
        config(dcgm_exporter, "1s"),
        extra_args=("--storage.tsdb.retention.time=15d", "--storage.tsdb.retention.size=16GB"),
    ).start()
    try:
        flags = http_json(f"{prom.url}/api/v1/status/flags")["data"]
        assert flags["storage.tsdb.retention.time"] == "15d"
        assert flags["storage.tsdb.retention.size"] == "16GiB"  # base-2 units
        runtime = http_json(f"{prom.url}/api/v1/status/runtimeinfo")["data"]
        assert runtime["storageRetention"] == "15d or 16GiB"
    finally:
        prom.stop()
