"""The images scripts/build-service-images makes without a registry, run as the gateway role's pods run them:
PostgreSQL with the library/postgres environment (password auth, database created once, data kept over a
restart), Redis with a password from its arguments, the gateway's Python package, and (lab) the CPU engine's
`vllm` command. Each archive is loaded into podman, run, and removed again."""

import json
import os
import pathlib
import subprocess
import uuid

import pytest

from lab.versions import pinned
from lab.wait import wait_until
from tests.playbooks.ansible_run import ROOT

pytestmark = [pytest.mark.molecule, pytest.mark.slow]
CACHE = pathlib.Path(os.environ.get("TF_CACHE", pathlib.Path.home() / ".cache/tokenfactory"))


def podman(*args, check=True, timeout=300):
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert not check or proc.returncode == 0, f"podman {' '.join(args)}: {proc.stdout}{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def images():
    """ref -> images.json entry, after a (warm) build: the images the lab and the gateway role load."""
    build = [ROOT / "scripts/build-service-images", "gateway", "postgres", "redis", "prometheus"]
    subprocess.run(build, check=True, timeout=3000)
    listed = json.loads((CACHE / "images/images.json").read_text())
    return {entry["ref"]: entry for entry in listed}


@pytest.fixture
def run(images):
    """Start a container of an image loaded from its archive; everything is removed afterwards."""
    started, loaded = [], []

    def start(ref, *args, env=None, volume=None):
        if ref not in loaded:
            podman("load", "-q", "-i", images[ref]["archive"])
            loaded.append(ref)
        name = f"tf-images-{uuid.uuid4().hex[:8]}"
        options = [f"--env={k}={v}" for k, v in (env or {}).items()] + ([f"--volume={volume}"] if volume else [])
        podman("run", "-d", "--name", name, *options, ref, *args)
        started.append(name)
        return name

    yield start
    for name in started:
        podman("rm", "-f", name, check=False)
    for ref in loaded:
        podman("rmi", "-f", ref, check=False)


def test_every_archive_is_an_oci_archive_with_its_digest(images):
    for ref, entry in images.items():
        index = json.loads(
            subprocess.run(["tar", "-xOf", entry["archive"], "index.json"], capture_output=True, check=True).stdout
        )
        manifest = index["manifests"][0]
        assert manifest["annotations"]["org.opencontainers.image.ref.name"] == ref
        assert manifest["digest"] == entry["digest"]


def test_postgres_speaks_the_library_postgres_environment_and_keeps_its_data(run):
    env = {
        "POSTGRES_USER": "tokenfactory",
        "POSTGRES_PASSWORD": "pw-" + uuid.uuid4().hex,
        "POSTGRES_DB": "ledger",
        "PGDATA": "/var/lib/postgresql/data/pgdata",
    }
    volume = f"tf-images-pg-{uuid.uuid4().hex[:8]}"
    try:
        name = run("localhost/tokenfactory-postgres:15", env=env, volume=f"{volume}:/var/lib/postgresql/data")

        def psql(password, sql, container=name):
            return podman(
                "exec",
                "-e",
                f"PGPASSWORD={password}",
                container,
                "psql",
                "-h",
                "127.0.0.1",
                "-U",
                "tokenfactory",
                "-d",
                "ledger",
                "-tAc",
                sql,
                check=False,
            )

        wait_until(lambda: psql(env["POSTGRES_PASSWORD"], "select 1").stdout.strip() == "1", what="PostgreSQL")
        assert "password authentication failed" in psql("wrong", "select 1").stderr
        assert psql(env["POSTGRES_PASSWORD"], "create table kept (v int); insert into kept values (7)").returncode == 0
        podman("rm", "-f", name)
        again = run("localhost/tokenfactory-postgres:15", env=env, volume=f"{volume}:/var/lib/postgresql/data")
        wait_until(
            lambda: psql(env["POSTGRES_PASSWORD"], "select v from kept", again).stdout.strip() == "7", what="data"
        )
        assert "initialized" not in podman("logs", again).stdout  # initdb ran once
    finally:
        podman("volume", "rm", "-f", volume, check=False)


def test_redis_takes_its_password_from_the_arguments(run):
    name = run("localhost/tokenfactory-redis:7", "--requirepass", "pw-redis-123", "--save", "", "--appendonly", "no")
    wait_until(
        lambda: podman("exec", name, "redis-cli", "-a", "pw-redis-123", "ping", check=False).stdout.strip() == "PONG",
        what="Redis",
    )
    assert "NOAUTH" in podman("exec", name, "redis-cli", "ping", check=False).stdout


def test_the_gateway_image_runs_the_gateway_package_as_a_non_root_user(images):
    podman("load", "-q", "-i", images["localhost/tokenfactory-gateway:0.1.0"]["archive"])
    try:
        proc = podman(
            "run",
            "--rm",
            "--entrypoint",
            "python",
            "localhost/tokenfactory-gateway:0.1.0",
            "-c",
            "import os, tokenfactory_gateway.config, kubernetes; print(os.getuid())",
        )
        assert proc.stdout.strip() == "10001"
        assert "--config CONFIG" in podman("run", "--rm", "localhost/tokenfactory-gateway:0.1.0", "--help").stdout
        # The status keeper's entry point (the gateway role's command): its package and the collection's module_utils
        # are in the image.
        keeper = podman(
            "run",
            "--rm",
            "--entrypoint",
            "python",
            "localhost/tokenfactory-gateway:0.1.0",
            "-m",
            "tokenfactory_status_keeper",
            "--once",
            check=False,
        )
        # No cluster here: it signs in as in a pod (no service account token mounted), then says so and exits 1.
        assert keeper.returncode == 1, keeper.stdout + keeper.stderr
        assert "status keeper: cannot configure the Kubernetes client" in keeper.stderr, keeper.stderr
    finally:
        podman("rmi", "-f", "localhost/tokenfactory-gateway:0.1.0", check=False)


def test_prometheus_has_kubernetes_discovery_and_node_exporter_runs(images, tmp_path):
    """The image the observability role runs: its Prometheus accepts kubernetes_sd jobs (Debian's does not)."""
    tmp_path.chmod(0o755)  # the image runs as nobody, like prom/prometheus
    (tmp_path / "prometheus.yml").write_text(
        "scrape_configs:\n  - job_name: engines\n    kubernetes_sd_configs:\n      - role: pod\n"
    )
    refs = [ref for ref in images if "prometheus" in ref or "node-exporter" in ref]
    assert len(refs) == 2, images
    for ref in refs:
        podman("load", "-q", "-i", images[ref]["archive"])
    try:
        prometheus = next(ref for ref in refs if "prometheus" in ref)
        checked = podman(
            "run",
            "--rm",
            "-v",
            f"{tmp_path}:/cfg:ro",
            "--entrypoint",
            "/bin/promtool",
            prometheus,
            "check",
            "config",
            "/cfg/prometheus.yml",
        )
        assert "SUCCESS" in checked.stdout + checked.stderr
        assert f"prometheus, version {pinned('prometheus')}" in podman("run", "--rm", prometheus, "--version").stdout
        exporter = next(ref for ref in refs if "node-exporter" in ref)
        assert (
            f"node_exporter, version {pinned('node_exporter')}"
            in podman("run", "--rm", exporter, "--version").stdout + podman("run", "--rm", exporter, "--version").stderr
        )
    finally:
        for ref in refs:
            podman("rmi", "-f", ref, check=False)
