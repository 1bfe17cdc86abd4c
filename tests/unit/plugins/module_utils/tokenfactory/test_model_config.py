"""Architecture facts from config.json variants and weight indexes (model_config)."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import model_config as mc
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.model_files import FetchError

WHERE = "http://hub/org/m/resolve/main/config.json"
# The fields of meta-llama/Llama-3.1-8B-Instruct's config.json that matter here.
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def test_llama_style_config_gives_the_builtin_facts():
    assert mc.architecture_from_config(LLAMA_31_8B, WHERE) == {
        "num_layers": 32,
        "num_kv_heads": 8,
        "head_dim": 128,
        "max_context_length": 131072,
        "dtype": "bfloat16",
    }


def test_missing_kv_heads_means_one_per_attention_head_and_explicit_head_dim_wins():
    config = {**LLAMA_31_8B, "head_dim": 256}
    del config["num_key_value_heads"]
    facts = mc.architecture_from_config(config, WHERE)
    assert (facts["num_kv_heads"], facts["head_dim"]) == (32, 256)


def test_newer_dtype_key_and_gpt2_style_names():
    gpt2 = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024, "dtype": "float32"}
    assert mc.architecture_from_config(gpt2, WHERE) == {
        "num_layers": 12,
        "num_kv_heads": 12,
        "head_dim": 64,
        "max_context_length": 1024,
        "dtype": "float32",
    }


def test_multimodal_text_config_is_read():
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "vision_config": {"hidden_size": 1152}}
    config["text_config"] = {
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2560,
        "max_position_embeddings": 131072,
    }
    config["torch_dtype"] = "bfloat16"
    facts = mc.architecture_from_config(config, WHERE)
    assert facts == {
        "num_layers": 34,
        "num_kv_heads": 4,
        "head_dim": 256,
        "max_context_length": 131072,
        "dtype": "bfloat16",
    }


@pytest.mark.parametrize(
    ("quantization", "dtype"),
    [
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
        ({"quant_method": "awq", "bits": 4}, "int4"),
    ],
)
def test_quantized_weights_take_the_quantization_dtype(quantization, dtype):
    assert mc.dtype_of({**LLAMA_31_8B, "quantization_config": quantization}, WHERE) == dtype


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_hidden_layers": None}, "none of num_hidden_layers, n_layer, num_layers is set"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers is '32'; expected a positive integer"),
        ({"torch_dtype": None}, "neither torch_dtype nor dtype is set"),
        ({"torch_dtype": "float8_e4m3"}, "torch_dtype 'float8_e4m3' is not one of"),
        ({"head_dim": None, "hidden_size": 4000, "num_attention_heads": 48}, "hidden_size 4000 is not a multiple"),
        ({"quantization_config": {"quant_method": "bitsandbytes"}}, "quantization_config bitsandbytes is not one of"),
    ],
)
def test_unreadable_configs_name_the_file_and_the_key(change, message):
    config = {key: value for key, value in {**LLAMA_31_8B, **change}.items() if value is not None}
    with pytest.raises(mc.ConfigError, match=message) as caught:
        mc.architecture_from_config(config, WHERE)
    assert str(caught.value).startswith(WHERE)


def test_parameter_counts_in_billions():
    header = {"__metadata__": {"format": "pt"}, "a": {"shape": [1000, 128]}, "b": {"shape": [128]}, "c": {"shape": []}}
    assert mc.safetensors_parameters(header) == 128_129
    assert mc.billions(128_129) == "0.000128"
    assert mc.billions(8_030_261_248) == "8.030261"
    assert mc.billions(70_000_000_000) == "70"
    assert mc.billions(12) == "0.000001"  # never 0: the capacity check needs a positive count


class Files:
    """The ModelFiles interface over a dict of file name -> parsed JSON (headers for .safetensors)."""

    def __init__(self, files):
        self.files = files

    def url(self, name):
        return f"http://hub/org/m/resolve/main/{name}"

    def json(self, name):
        if name not in self.files:
            raise FetchError(self.url(name), "HTTP 404", answered=True, status=404)
        return self.files[name]

    safetensors_header = json


def test_derive_uses_the_index_total_size_over_bytes_per_parameter():
    index = {"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}
    facts = mc.derive(Files({"config.json": LLAMA_31_8B, "model.safetensors.index.json": index}))
    assert facts["parameters_billions"] == "8.030261"


def test_derive_falls_back_to_the_single_file_header_and_names_both_when_neither_exists():
    header = {"w": {"shape": [4096, 4096]}}
    facts = mc.derive(Files({"config.json": LLAMA_31_8B, "model.safetensors": header}))
    assert facts["parameters_billions"] == "0.016777"
    with pytest.raises(FetchError, match=r"neither this nor model\.safetensors exists"):
        mc.derive(Files({"config.json": LLAMA_31_8B}))
    with pytest.raises(mc.ConfigError, match=r"metadata\.total_size is None"):
        mc.derive(Files({"config.json": LLAMA_31_8B, "model.safetensors.index.json": {"weight_map": {}}}))
