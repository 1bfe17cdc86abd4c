"""A real vLLM OpenAI server on the CPU, serving a local model on a free loopback port."""

import atexit
import contextlib
import os
import pathlib
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from lab.engine import install
from lab.processes import free_port, group_members, log_tail

ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
PORT_ATTEMPTS = 3


class VllmServer:
    """`with VllmServer() as engine:` starts vLLM on the tiny model; `.stop()` ends its process group."""

    def __init__(
        self,
        model_dir: os.PathLike | str | None = None,
        served_name: str = "tiny-qwen2",
        port: int | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ):
        self.model_dir = pathlib.Path(model_dir) if model_dir else None
        self.served_name = served_name
        self.port = port
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.log_path: pathlib.Path | None = None
        self.pgid: int | None = None  # process group of the server and its engine core
        self._proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.base_url}/metrics"

    def command(self, python: os.PathLike | str) -> list[str]:
        return [
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--max-model-len",
            "512",
            "--enforce-eager",
            *self.extra_args,
        ]

    def start(self, timeout: float = 180) -> str:
        """Start the server and wait for /health; returns base_url. Raises with the log tail on failure."""
        python = install.vllm_python()
        self.model_dir = self.model_dir or install.tiny_model_dir()
        chosen_port = self.port
        for attempt in range(PORT_ATTEMPTS):
            self.port = chosen_port or free_port()
            self._launch(python)
            try:
                self._wait_healthy(timeout)
            except RuntimeError as exc:
                self.stop()
                # A free port can be taken between probing and binding; only then try another one.
                if chosen_port or "Address already in use" not in str(exc) or attempt == PORT_ATTEMPTS - 1:
                    raise
            except BaseException:
                self.stop()
                raise
            else:
                atexit.register(self.stop)
                return self.base_url
        raise AssertionError("unreachable")

    def _launch(self, python: os.PathLike | str) -> None:
        fd, log = tempfile.mkstemp(prefix=f"tf-vllm-{self.port}-", suffix=".log")
        self.log_path = pathlib.Path(log)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(ENGINE_ENV)
        env.update(self.env)
        with os.fdopen(fd, "wb") as log_file:
            self._proc = subprocess.Popen(
                self.command(python),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tempfile.gettempdir(),
                start_new_session=True,  # own process group: stop() reaches the engine core too
            )
        self.pgid = self._proc.pid

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with {self._proc.returncode} before /health answered; "
                    f"log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/health", timeout=2) as response:  # noqa: S310 (http URL)
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"vLLM not healthy after {timeout} s; log {self.log_path}:\n{log_tail(self.log_path)}")

    def stop(self, timeout: float = 30) -> None:
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # Children (the engine core) share the group; make sure none outlives the leader.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def __enter__(self) -> "VllmServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
