"""The model module derives architecture facts through the Provider from a stand-in for the Hugging Face hub
(lab/hub.py, SIMULATION of the public internet): the tiny model the CPU engine serves and a made-up architecture
the built-in table does not know; the token goes to the hub and nowhere else; 401/404 fail clearly; the facts are
cached in the Model's status; the built-in table is used only when the hub cannot be reached."""

import json
import shutil
import threading

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import kinds

from lab.hub import Hub
from lab.processes import free_port
from tests.modules.lab_helpers import snapshot

pytestmark = pytest.mark.lab

TOKEN = "hf_lab_hub_secret_7c1e"
TINY = "tokenfactory/tiny-qwen2"
MADE_UP = "made-up/vision-moe-9b"
# A multimodal config in the shape Gemma 3 / Llava publish: the language model's facts under text_config, no
# num_key_value_heads (one KV head per attention head), no head_dim (hidden_size / heads), the newer `dtype` key.
MADE_UP_CONFIG = {
    "architectures": ["MadeUpForConditionalGeneration"],
    "model_type": "made_up_vlm",
    "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
    "text_config": {"num_hidden_layers": 36, "num_attention_heads": 20, "hidden_size": 2560},
    "max_position_embeddings": 65536,
    "dtype": "bfloat16",
}
MADE_UP_TOTAL_SIZE = 18_123_456_789  # bytes of bf16 weights: 9.061728 billion parameters


def qwen2_parameters(config):
    """Parameters of a Qwen2 with tied embeddings, from its config (independent of the module's counting)."""
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    q = config["num_attention_heads"] * config["head_dim"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    attention = hidden * q + q + 2 * (hidden * kv + kv) + q * hidden
    per_layer = attention + 3 * hidden * config["intermediate_size"] + 2 * hidden
    return config["vocab_size"] * hidden + layers * per_layer + hidden


@pytest.fixture(scope="module")
def hub(tmp_path_factory, tiny_model_dir):
    """The stand-in hub with the tiny engine model and the made-up one; every repository needs the token."""
    root = tmp_path_factory.mktemp("hub")
    shutil.copytree(tiny_model_dir, root / TINY)
    made_up = root / MADE_UP
    made_up.mkdir(parents=True)
    (made_up / "config.json").write_text(json.dumps(MADE_UP_CONFIG))
    index = {"metadata": {"total_size": MADE_UP_TOTAL_SIZE}, "weight_map": {"lm.weight": "model-1.safetensors"}}
    (made_up / "model.safetensors.index.json").write_text(json.dumps(index))
    server = Hub(("127.0.0.1", 0), root, token=TOKEN)
    server.requests = []
    handler_log = server.RequestHandlerClass.log_message

    def record(handler, fmt, *args):
        server.requests.append(handler.path)
        handler_log(handler, fmt, *args)

    server.RequestHandlerClass = type("RecordingHandler", (server.RequestHandlerClass,), {"log_message": record})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()


@pytest.fixture
def namespace(tf_lab, hub):
    namespace = tf_lab.namespace()
    tf_lab.ok("provider", name="mirror", namespace=namespace, type="huggingface", url=hub.url, token=TOKEN)
    return namespace


def model(tf_lab, namespace, source, check_mode=False, provider="mirror", **args):
    return tf_lab.run(
        "model", check_mode=check_mode, name="m", namespace=namespace, provider=provider, source=source, **args
    )


def test_the_tiny_engine_model_is_derived_once_and_cached_in_status(tf_lab, hub, namespace, tiny_model_dir, capsys):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    expected = {
        "numLayers": config["num_hidden_layers"],
        "numKVHeads": config["num_key_value_heads"],
        "headDim": config["head_dim"],
        "maxContextLength": config["max_position_embeddings"],
        "dtype": "float32",
        "parametersBillions": f"{qwen2_parameters(config) / 1e9:.6f}".rstrip("0"),
    }
    config_url = f"{hub.url}/{TINY}/resolve/main/config.json"

    before, fetched = snapshot(tf_lab.kube, namespace), len(hub.requests)
    planned = model(tf_lab, namespace, TINY, check_mode=True)
    assert not planned.get("failed"), planned["msg"]
    assert planned["changed"] is True and planned["architecture"] == expected
    assert len(hub.requests) > fetched, "check mode did not read the model's files"
    assert snapshot(tf_lab.kube, namespace) == before, "check mode wrote something"

    created = model(tf_lab, namespace, TINY)
    assert created["changed"] is True
    stored = tf_lab.kube.get(kinds.MODEL, "m", namespace)
    assert stored["spec"]["architecture"] == expected
    assert stored["status"]["architecture"] == expected
    assert stored["status"]["architectureFrom"] == {
        "provider": "mirror",
        "source": TINY,
        "providerURL": hub.url,
        "origin": config_url,
    }

    fetched = len(hub.requests)
    again = model(tf_lab, namespace, TINY)
    assert again["changed"] is False and again["architecture"] == expected
    assert len(hub.requests) == fetched, "a re-run fetched again instead of reading the Model's status"

    outputs = json.dumps([planned, created, again]) + "".join(capsys.readouterr())
    assert TOKEN not in outputs


def test_a_made_up_architecture_is_derived_from_text_config_and_the_weight_index(tf_lab, namespace):
    result = model(tf_lab, namespace, MADE_UP, revision="main")
    assert not result.get("failed"), result["msg"]
    assert result["architecture"] == {
        "numLayers": 36,
        "numKVHeads": 20,
        "headDim": 128,
        "maxContextLength": 65536,
        "dtype": "bfloat16",
        "parametersBillions": "9.061728",
    }
    assert TOKEN not in json.dumps(result)


def test_an_explicit_architecture_wins_without_fetching(tf_lab, hub, namespace):
    given = {
        "parameters_billions": "1.5",
        "num_layers": 4,
        "num_kv_heads": 1,
        "head_dim": 64,
        "max_context_length": 4096,
        "dtype": "float16",
    }
    fetched = len(hub.requests)
    result = model(tf_lab, namespace, MADE_UP, architecture=given)
    assert result["architecture"]["numLayers"] == 4
    assert len(hub.requests) == fetched


@pytest.mark.parametrize(
    ("source", "provider", "message"),
    [
        (
            "made-up/missing",
            "mirror",
            "source: cannot derive the architecture of 'made-up/missing': {hub}/made-up/missing/resolve/main/"
            "config.json: HTTP 404 RepoNotFound: not found (check source and revision); pass architecture",
        ),
        (
            MADE_UP,
            "anonymous",
            "source: cannot derive the architecture of 'made-up/vision-moe-9b': {hub}/made-up/vision-moe-9b/resolve/"
            "main/config.json: HTTP 401 GatedRepo: the Provider's token is missing (the Provider has no credential)",
        ),
    ],
)
def test_refusals_fail_naming_the_url_and_change_nothing(tf_lab, hub, namespace, source, provider, message):
    tf_lab.ok("provider", name="anonymous", namespace=namespace, type="huggingface", url=hub.url)
    before = snapshot(tf_lab.kube, namespace)
    result = model(tf_lab, namespace, source, provider=provider)
    assert result["failed"] is True
    assert result["msg"].startswith(message.format(hub=hub.url)), result["msg"]
    assert snapshot(tf_lab.kube, namespace) == before
    assert TOKEN not in json.dumps(result)


def test_an_unreachable_provider_falls_back_to_the_built_in_table_only_for_known_models(tf_lab):
    namespace = tf_lab.namespace()
    closed = f"http://127.0.0.1:{free_port()}"
    tf_lab.ok("provider", name="offline", namespace=namespace, type="huggingface", url=closed)
    known = model(tf_lab, namespace, "Qwen/Qwen2-0.5B-Instruct", provider="offline")
    assert known["changed"] is True and known["architecture"]["numLayers"] == 24
    assert "using the built-in facts" in json.dumps(known["warnings"])
    assert tf_lab.kube.get(kinds.MODEL, "m", namespace)["status"]["architectureFrom"]["origin"] == "built-in"

    unknown = tf_lab.run("model", name="other", namespace=namespace, provider="offline", source="my-org/my-model")
    assert unknown["failed"] is True
    assert unknown["msg"].startswith(
        f"architecture: cannot derive the architecture of 'my-org/my-model': {closed}/my-org/my-model/resolve/main/"
        "config.json: not reachable"
    )
    assert "no built-in facts either; pass architecture" in unknown["msg"]
    assert tf_lab.kube.get(kinds.MODEL, "other", namespace) is None
