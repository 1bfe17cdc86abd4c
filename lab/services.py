"""Long-running lab processes (real vLLM, Prometheus, node-exporter, PostgreSQL, Redis, gateway, and the SIMULATED
DCGM exporter): started detached once, reused.

    python -m lab.services ensure vllm --port 18800      # prints {"status": "started"|"running", "url": ...}
    python -m lab.services stop-all
State (pid, port, log) lives in $TF_LAB_ROOT/<cluster>-services/<name>.json; a service is restarted only when
its command or configuration (fingerprint) changed or it stopped answering.
"""

import argparse
import contextlib
import dataclasses
import hashlib
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

from lab.datastores import PostgresServer, RedisServer
from lab.engine import install
from lab.engine.vllm import ENGINE_ENV, VllmServer
from lab.paths import GATEWAY_DIR, REPO_ROOT, lab_root
from lab.processes import log_tail
from lab.wait import ProcessDied, wait_until


@dataclasses.dataclass
class Launch:
    argv: list
    ready: object  # callable -> bool
    fingerprint: list
    env: dict = dataclasses.field(default_factory=dict)
    popen: dict = dataclasses.field(default_factory=dict)  # extra Popen arguments (user, group)
    stop_signal: int = signal.SIGTERM
    scheme: str = "http"


def state_dir(cluster):
    path = lab_root() / f"{cluster}-services"
    path.mkdir(parents=True, exist_ok=True)
    return path


def digest(*paths):
    sha = hashlib.sha256()
    for path in paths:
        sha.update(pathlib.Path(path).read_bytes())
    return sha.hexdigest()


def http_ready(url):
    def check():
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback http
                return response.status == 200
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError):
            return False

    return check


def quietly(check):
    def wrapped():
        try:
            return check()
        except (subprocess.SubprocessError, OSError):
            return False

    return wrapped


def vllm_launch(port, args):
    server = VllmServer(model_dir=install.tiny_model_dir(), served_name=args.served_name, port=port)
    argv = server.command(install.vllm_python())
    return Launch(argv, http_ready(f"http://127.0.0.1:{port}/health"), argv, env=dict(ENGINE_ENV))


def prometheus_launch(port, args):
    config = pathlib.Path(args.config).resolve()
    argv = [
        str(pathlib.Path(args.bin_dir) / "prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={state_dir(args.cluster) / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
    ]
    return Launch(argv, http_ready(f"http://127.0.0.1:{port}/-/ready"), [*argv, digest(config)])


def node_exporter_launch(port, args):
    # This machine's real memory and CPU; the lab labels it as the simulated GB10 node (unified memory).
    argv = [
        str(pathlib.Path(args.bin_dir) / "node_exporter"),
        f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults",
        "--collector.meminfo",
        "--collector.loadavg",
        "--collector.cpu",
    ]
    return Launch(argv, http_ready(f"http://127.0.0.1:{port}/metrics"), argv)


def dcgm_exporter_launch(port, args):
    argv = [sys.executable, "-m", "lab.simulated_dcgm_exporter", "--port", str(port), "--file", str(args.file)]
    return Launch(argv, http_ready(f"http://127.0.0.1:{port}/metrics"), argv, env={"PYTHONPATH": str(REPO_ROOT)})


def postgres_server(port, args):
    return PostgresServer(directory=state_dir(args.cluster) / "postgres", port=port)


def postgres_launch(port, args):
    server = postgres_server(port, args)
    argv, as_user = server.initdb()
    ready = quietly(server.ready)
    # SIGINT = "fast" shutdown: does not wait for the gateway's pooled connections to leave.
    return Launch(argv, ready, argv, popen=as_user, stop_signal=signal.SIGINT, scheme="postgresql")


def redis_launch(port, args):
    server = RedisServer(directory=state_dir(args.cluster) / "redis", port=port)
    argv = server.command()
    return Launch(argv, quietly(server.ready), argv, scheme="redis")


def gateway_launch(port, args):
    config = pathlib.Path(args.config).resolve()
    argv = [sys.executable, "-m", "tokenfactory_gateway", "--config", str(config)]
    package = GATEWAY_DIR / "tokenfactory_gateway"
    sources = [*sorted(package.glob("*.py")), package / "domain.json"]
    # Restarted when its configuration, its credentials or its code change.
    fingerprint = [*argv, port, digest(config, *args.secret_file), digest(*sources)]
    # Probes are on the internal listener (admin API, metrics, /ready), not on the public port.
    internal = yaml.safe_load(config.read_text()).get("internal_listen") or "127.0.0.1:8081"
    ready = http_ready(f"http://127.0.0.1:{internal.rsplit(':', 1)[1]}/ready")
    return Launch(argv, ready, fingerprint, env={"PYTHONPATH": str(GATEWAY_DIR)})


SERVICES = {
    "dcgm-exporter": dcgm_exporter_launch,
    "gateway": gateway_launch,
    "node-exporter": node_exporter_launch,
    "postgres": postgres_launch,
    "prometheus": prometheus_launch,
    "redis": redis_launch,
    "vllm": vllm_launch,
}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def port_in_use(port):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def ensure(name, port, args):
    path = state_dir(args.cluster) / f"{name}.json"
    launch = SERVICES[name](port, args)
    fingerprint = json.loads(json.dumps(launch.fingerprint))
    if path.is_file():
        state = json.loads(path.read_text())
        if state["fingerprint"] == fingerprint and alive(state["pid"]) and launch.ready():
            return "running", state
        stop(path)
    if port_in_use(port):
        raise SystemExit(f"{name}: port {port} is used by another process; free it or choose another port")
    log = state_dir(args.cluster) / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(launch.env)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tempfile.gettempdir(),
            start_new_session=True,
            **launch.popen,
        )
    state = {
        "pid": proc.pid,
        "fingerprint": fingerprint,
        "port": port,
        "url": f"{launch.scheme}://127.0.0.1:{port}",
        "log": str(log),
        "stop_signal": int(launch.stop_signal),
    }
    path.write_text(json.dumps(state))

    def ready():
        if proc.poll() is not None:
            raise ProcessDied(f"{name} exited with {proc.returncode}")
        return launch.ready()

    try:
        wait_until(ready, args.timeout, f"{name} to become ready", interval=0.5)
    except (ProcessDied, TimeoutError) as exc:
        stop(path)
        raise SystemExit(f"{exc}; log {log}:\n{log_tail(log, 40)}") from None
    return "started", state


def sql_name(value):
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
        raise argparse.ArgumentTypeError(f"{value!r}: use lower-case letters, digits and _ (a PostgreSQL name)")
    return value


def ensure_database(port, args):
    """The gateway's role and database in the lab PostgreSQL (trust auth on loopback); True when created."""
    server = postgres_server(port, args)
    user, database = args.user, args.database  # checked by sql_name: safe to place in SQL
    created = False
    if server.psql("postgres", f"SELECT 1 FROM pg_roles WHERE rolname = '{user}'") != "1":  # noqa: S608
        server.psql("postgres", f"CREATE ROLE {user} LOGIN")
        created = True
    if server.psql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{database}'") != "1":  # noqa: S608
        server.psql("postgres", f"CREATE DATABASE {database} OWNER {user}")
        created = True
    return created


def stop(path):
    state = json.loads(path.read_text())
    for sig in (state.get("stop_signal", signal.SIGTERM), signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(state["pid"], sig)
        for _attempt in range(80):
            if not alive(state["pid"]):
                break
            with contextlib.suppress(ChildProcessError):
                os.waitpid(state["pid"], os.WNOHANG)
            time.sleep(0.25)
    path.unlink()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lab.services")
    parser.add_argument("action", choices=("ensure", "stop-all"))
    parser.add_argument("name", nargs="?", choices=sorted(SERVICES))
    parser.add_argument("--cluster", default="tf-lab")
    parser.add_argument("--port", type=int)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--served-name", default="tiny-qwen2")
    parser.add_argument("--config", help="prometheus, gateway: configuration file")
    parser.add_argument("--bin-dir", help="prometheus, node-exporter: directory with the binaries")
    parser.add_argument("--file", help="dcgm-exporter: DCGM exposition text to serve (re-read on every scrape)")
    parser.add_argument("--secret-file", action="append", default=[], help="gateway: credential file it reads")
    parser.add_argument("--database", type=sql_name, default="tokenfactory", help="postgres: database to create")
    parser.add_argument("--user", type=sql_name, default="tokenfactory", help="postgres: owner role to create")
    args = parser.parse_args(argv)
    if args.action == "stop-all":
        # The gateway first: it holds connections to PostgreSQL and Redis.
        order = {"gateway": 0}
        paths = sorted(state_dir(args.cluster).glob("*.json"), key=lambda p: (order.get(p.stem, 1), p.stem))
        stopped = [p.stem for p in paths if stop(p) is None]
        print(json.dumps({"stopped": stopped}))
        return 0
    status, state = ensure(args.name, args.port, args)
    if args.name == "postgres" and ensure_database(args.port, args):
        status = "started" if status == "started" else "changed"
    print(json.dumps({"status": status, "url": state["url"], "log": state["log"], "pid": state["pid"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
