"""Long-running lab processes, started detached once and reused: the stand-in Hugging Face hub (SIMULATION of the
internet) that lab/hosts.yml serves the lab's pods from. The tests start their own real processes (lab.datastores,
lab.engine, the gateway fixtures) per session.

    python -m lab.services ensure hub --port 18900 --root DIR   # prints {"status": "started"|"running", "url": ...}
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
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


from lab.paths import REPO_ROOT, lab_root
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


def hub_launch(port, args):
    # SIMULATION of the public internet: the stand-in Hugging Face hub, on an address the lab's pods reach.
    host = args.host or "127.0.0.1"
    root = pathlib.Path(args.root).resolve()
    argv = [sys.executable, "-m", "lab.hub", "--root", str(root), "--listen", f"{host}:{port}"]
    fingerprint = [*argv, digest(pathlib.Path(__file__).with_name("hub.py"))]
    return Launch(argv, http_ready(f"http://{host}:{port}/health"), fingerprint, env={"PYTHONPATH": str(REPO_ROOT)})


SERVICES = {"hub": hub_launch}


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
        "url": f"{launch.scheme}://{getattr(args, 'host', None) or '127.0.0.1'}:{port}",
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
    parser.add_argument("--root", help="hub: directory of <org>/<name> model repositories")
    parser.add_argument("--host", help="hub: address to listen on (default 127.0.0.1)")
    args = parser.parse_args(argv)
    if args.action == "stop-all":
        paths = sorted(state_dir(args.cluster).glob("*.json"))
        stopped = [p.stem for p in paths if stop(p) is None]
        print(json.dumps({"stopped": stopped}))
        return 0
    status, state = ensure(args.name, args.port, args)
    print(json.dumps({"status": status, "url": state["url"], "log": state["log"], "pid": state["pid"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
