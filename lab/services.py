"""Long-running lab processes (real vLLM, real Prometheus): started detached once, reused by later runs.

    python -m lab.services ensure vllm --port 58000      # prints "started URL" or "running URL"
    python -m lab.services stop-all
State (pid, port, log) lives in $TF_LAB_ROOT/<cluster>/services/<name>.json.
"""

import argparse
import contextlib
import http.client
import hashlib
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

LAB_ROOT = pathlib.Path(os.environ.get("TF_LAB_ROOT", "/tmp/tokenfactory-lab"))  # noqa: S108 - lab state


def state_dir(cluster):
    path = LAB_ROOT / f"{cluster}-services"
    path.mkdir(parents=True, exist_ok=True)
    return path


def vllm_command(port, args):
    from tests.engine import install
    from tests.engine.server import ENGINE_ENV, VllmServer

    server = VllmServer(model_dir=install.tiny_model_dir(), served_name=args.served_name, port=port)
    argv = server.command(install.vllm_python())
    return argv, dict(ENGINE_ENV), f"http://127.0.0.1:{port}/health", argv


def prometheus_command(port, args):
    config = pathlib.Path(args.config).resolve()
    data = state_dir(args.cluster) / "prometheus-data"
    argv = [
        str(pathlib.Path(args.bin_dir) / "prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
    ]
    fingerprint = [*argv, hashlib.sha256(config.read_bytes()).hexdigest()]
    return argv, {}, f"http://127.0.0.1:{port}/-/ready", fingerprint


SERVICES = {"vllm": vllm_command, "prometheus": prometheus_command}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def port_in_use(port):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def healthy(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback http
            return response.status == 200
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError):
        return False


def ensure(name, port, args):
    path = state_dir(args.cluster) / f"{name}.json"
    argv, extra_env, health, fingerprint = SERVICES[name](port, args)
    if path.is_file():
        state = json.loads(path.read_text())
        if state["fingerprint"] == fingerprint and alive(state["pid"]) and healthy(health):
            return "running", state
        stop(path)
    if port_in_use(port):
        raise SystemExit(f"{name}: port {port} is used by another process; free it or choose another port")
    log = state_dir(args.cluster) / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra_env)
    with open(log, "ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - argv built above
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tempfile.gettempdir(),
            start_new_session=True,
        )
    state = {
        "pid": proc.pid,
        "fingerprint": fingerprint,
        "port": port,
        "url": f"http://127.0.0.1:{port}",
        "log": str(log),
    }
    path.write_text(json.dumps(state))
    deadline = time.monotonic() + args.timeout
    while not healthy(health):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            stop(path)
            raise SystemExit(f"{name} did not become healthy at {health}; log {log}:\n{tail}")
        time.sleep(0.5)
    return "started", state


def stop(path):
    state = json.loads(path.read_text())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(state["pid"], sig)
        for _attempt in range(40):
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
    parser.add_argument("--config", help="prometheus: configuration file")
    parser.add_argument("--bin-dir", help="prometheus: directory with the prometheus binary")
    args = parser.parse_args(argv)
    if args.action == "stop-all":
        stopped = [p.stem for p in sorted(state_dir(args.cluster).glob("*.json")) if stop(p) is None]
        print(json.dumps({"stopped": stopped}))
        return 0
    status, state = ensure(args.name, args.port, args)
    print(json.dumps({"status": status, "url": state["url"], "log": state["log"], "pid": state["pid"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
