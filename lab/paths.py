"""Where the lab finds things: the checkout, the build cache, the state of running lab components."""

import os
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
GATEWAY_DIR = REPO_ROOT / "services" / "gateway"
SCRIPTS = REPO_ROOT / "scripts"


def tf_cache() -> pathlib.Path:
    """Cache of built pieces (Go binaries, vLLM venv, tiny model): $TF_CACHE or $XDG_CACHE_HOME/tokenfactory."""
    if os.environ.get("TF_CACHE"):
        return pathlib.Path(os.environ["TF_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(xdg) / "tokenfactory"


def lab_root() -> pathlib.Path:
    """State of running lab clusters and services: $TF_LAB_ROOT (default /tmp/tokenfactory-lab)."""
    return pathlib.Path(os.environ.get("TF_LAB_ROOT", "/tmp/tokenfactory-lab"))  # noqa: S108 - lab state
