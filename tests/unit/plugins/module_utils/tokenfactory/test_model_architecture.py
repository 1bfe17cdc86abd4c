"""Which facts a Model gets (model_architecture.resolve): option, status cache, derived, built-in fallback."""

import base64
import json
import threading

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import model_architecture as ma
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError

from lab.hub import Hub
from lab.processes import free_port

TOKEN = "hf_resolve_unit_token"
CONFIG = {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512, "max_position_embeddings": 4096}
INDEX = {"metadata": {"total_size": 2_000_000_000}}


class FakeTfm:
    """The parts of TokenFactoryModule resolve uses; the Secret comes from a dict."""

    def __init__(self, secrets):
        self.secrets, self.warnings, self.notes = secrets, [], []
        self.client = self
        self.module = self
        self.no_log_values = set()

    def get(self, rtype, name, namespace):
        return self.secrets.get(name)

    def warn(self, message):
        self.warnings.append(message)

    def note(self, message):
        self.notes.append(message)


def provider(url, secret=True):
    spec = {"type": "huggingface", "url": url}
    if secret:
        spec["credentialsSecret"] = {"name": "hf-credentials", "key": "token"}
    return {"metadata": {"name": "hf", "namespace": "tf"}, "spec": spec}


@pytest.fixture
def hub(tmp_path):
    repo = tmp_path / "org" / "m"
    repo.mkdir(parents=True)
    (repo / "config.json").write_text(json.dumps({**CONFIG, "torch_dtype": "float16"}))
    (repo / "model.safetensors.index.json").write_text(json.dumps(INDEX))
    server = Hub(("127.0.0.1", 0), tmp_path, token=TOKEN)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def tfm_with_token():
    return FakeTfm({"hf-credentials": {"data": {"token": base64.b64encode(TOKEN.encode()).decode()}}})


def test_derived_facts_and_their_origin_go_to_status_and_the_token_is_masked(hub):
    tfm = tfm_with_token()
    facts, status = ma.resolve(tfm, None, provider(hub), "org/m", None, None)
    assert facts == {
        "parametersBillions": "1",
        "numLayers": 4,
        "numKVHeads": 8,
        "headDim": 64,
        "maxContextLength": 4096,
        "dtype": "float16",
    }
    assert status == {
        "architecture": facts,
        "architectureFrom": {
            "provider": "hf",
            "source": "org/m",
            "providerURL": hub,
            "origin": f"{hub}/org/m/resolve/main/config.json",
        },
    }
    assert TOKEN in tfm.no_log_values
    assert TOKEN not in json.dumps([status, tfm.notes, tfm.warnings])
    # The same provider, source and revision reuse the status; another revision reads again.
    assert ma.resolve(tfm, None, provider(hub), "org/m", None, {"status": status}) == (facts, None)
    assert len(tfm.notes) == 1
    _facts, again = ma.resolve(tfm, None, provider(hub), "org/m", "v2", {"status": status})
    assert again["architectureFrom"]["origin"] == f"{hub}/org/m/resolve/v2/config.json" and len(tfm.notes) == 2


def test_an_option_wins_and_is_checked():
    given = dict.fromkeys(("num_layers", "num_kv_heads", "head_dim", "max_context_length"), 8)
    facts, status = ma.resolve(
        FakeTfm({}), {**given, "parameters_billions": "2", "dtype": "fp8"}, None, "x/y", None, None
    )
    assert (facts["numLayers"], facts["dtype"], status) == (8, "fp8", None)
    with pytest.raises(ValidationError, match=r"architecture\.parameters_billions: must be greater than 0"):
        ma.resolve(FakeTfm({}), {**given, "parameters_billions": "0", "dtype": "fp8"}, None, "x/y", None, None)


def test_the_built_in_table_only_when_the_files_cannot_be_reached(hub):
    closed = f"http://127.0.0.1:{free_port()}"
    tfm = FakeTfm({})
    facts, status = ma.resolve(tfm, None, provider(closed, secret=False), "Qwen/Qwen2-0.5B-Instruct", None, None)
    assert facts["numLayers"] == 24 and status["architectureFrom"]["origin"] == "built-in"
    assert "using the built-in facts" in tfm.warnings[0]
    with pytest.raises(ValidationError, match="no built-in facts either"):
        ma.resolve(FakeTfm({}), None, provider(closed, secret=False), "org/unknown", None, None)
    # A refusal is an answer: a known name served by a hub that says 401 fails instead of falling back.
    with pytest.raises(ValidationError, match=r"^source: .* HTTP 401 GatedRepo: the Provider's token is missing"):
        ma.resolve(FakeTfm({}), None, provider(hub, secret=False), "org/m", None, None)


def test_a_missing_secret_key_is_named():
    with pytest.raises(ValidationError, match="refers to Secret hf-credentials key token, which is missing"):
        ma.resolve(FakeTfm({}), None, provider("http://127.0.0.1:9"), "org/m", None, None)
