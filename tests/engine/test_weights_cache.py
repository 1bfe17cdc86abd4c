"""The weights cache the engine pods mount (ModelDeployment weights_cache, HF_HOME under it), measured with the real
CPU vLLM downloading from the stand-in hub (lab/hub.py, its request log): the first start downloads every file,
a second start on the same cache (a restarted or rescheduled pod on that node) downloads none, and with
HF_HUB_OFFLINE=1 (weights_cache.offline, after serve.yml's pre-pull) it does not ask the hub at all.
The start times of the uncached and the cached engine are printed (pytest -s) for the record."""

import shutil
import threading
import time

import pytest

from lab.engine import install
from lab.engine.vllm import VllmServer
from lab.hub import Hub

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.timeout(1200)]
REPO = "tokenfactory/tiny-qwen2"


@pytest.fixture
def hub(tmp_path):
    shutil.copytree(install.tiny_model_dir(), tmp_path / "hub" / REPO)
    server = Hub(("127.0.0.1", 0), tmp_path / "hub")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def start_engine(cache, env):
    began = time.monotonic()
    with VllmServer(model_dir=REPO, served_name="tiny-qwen2", env={"HF_HOME": str(cache), **env}):
        return time.monotonic() - began


def test_a_second_start_on_the_same_cache_downloads_nothing(hub, tmp_path):
    cache = tmp_path / "node-cache" / "huggingface"
    online = {
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_ENDPOINT": f"http://127.0.0.1:{hub.server_address[1]}",
    }
    uncached = start_engine(cache, online)
    first = hub.downloads()
    files = {p.relative_to(hub.root / REPO).as_posix() for p in (hub.root / REPO).rglob("*") if p.is_file()}
    assert any(path.endswith("/model.safetensors") for path in first), first
    assert {path.split("/resolve/", 1)[1].split("/", 1)[1] for path in first} <= files

    del hub.requests[:]
    cached = start_engine(cache, online)
    assert hub.downloads() == [], hub.requests

    del hub.requests[:]
    offline = start_engine(cache, {**online, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert hub.requests == []
    print(
        f"\nengine start: uncached {uncached:.1f} s ({len(first)} downloads), cached {cached:.1f} s (0),"
        f" cached+HF_HUB_OFFLINE {offline:.1f} s (no request)"
    )
