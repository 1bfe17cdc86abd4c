"""Engine fixtures: the real CPU vLLM (marker `engine`), its tiny model, and synthetic upstreams."""

import pytest

from lab.engine import install
from lab.engine.vllm import VllmServer
from tests.engine.synthetic import SyntheticUpstream


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # Any test that needs the real engine belongs to the engine tier, wherever it lives.
    for item in items:
        if "vllm_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.engine)


@pytest.fixture(scope="session")
def tiny_model_dir():
    """Path of the generated tiny Qwen2 model (builds the vLLM venv and model on first use)."""
    return install.tiny_model_dir()


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_dir):
    """A started VllmServer serving `tiny-qwen2`; `.base_url` (OpenAI routes under /v1), `.metrics_url`."""
    with VllmServer(model_dir=tiny_model_dir) as engine:
        yield engine


@pytest.fixture
def synthetic_upstream():
    """Factory: `synthetic_upstream(ttft_ms=.., itl_ms=.., ...)` -> started SyntheticUpstream, stopped after."""
    started = []

    def factory(**options) -> SyntheticUpstream:
        upstream = SyntheticUpstream(**options)
        upstream.start()
        started.append(upstream)
        return upstream

    yield factory
    for upstream in reversed(started):
        upstream.stop()
