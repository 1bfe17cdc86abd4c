# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""A model's architecture facts from its own files: config.json and the weight index (or safetensors header).

Returns the `architecture` option of the model module (parameters_billions, num_layers, num_kv_heads, head_dim,
max_context_length, dtype), which goes through the same checks as a value the user writes.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import DTYPES
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.model_files import FetchError

CONFIG = "config.json"
WEIGHT_INDEX = "model.safetensors.index.json"
SINGLE_WEIGHTS = "model.safetensors"
# Multimodal configs nest the language model's facts.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")
# Config keys per fact, in the order they are tried (Llama/Qwen/Mistral names first, then GPT-2 style).
KEYS = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "max_context_length": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
}
# Weight storage types as configs spell them -> the domain's dtypes.
CONFIG_DTYPES = {
    "float32": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "float": "float32",
}
QUANT_ALGOS = {"fp8": "fp8", "nvfp4": "nvfp4", "w4a16_awq": "int4", "int4_awq": "int4"}
BILLION = Decimal(10**9)
SIX_PLACES = Decimal("0.000001")


class ConfigError(Exception):
    """config.json lacks a fact or has one this collection cannot read; names the file's URL and the key."""


def language_config(config):
    nested = next((config[key] for key in TEXT_CONFIG_KEYS if isinstance(config.get(key), dict)), {})
    return {**config, **nested}


def _integer(config, fact, where):
    for key in KEYS[fact]:
        value = config.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{where}: {key} is {value!r}; expected a positive integer")
            return value
    raise ConfigError(f"{where}: none of {', '.join(KEYS[fact])} is set")


def dtype_of(config, where):
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    if method:
        algo = str(quant.get("quant_algo", "")).lower()
        if method == "fp8" or algo in QUANT_ALGOS:
            return QUANT_ALGOS.get(algo, "fp8")
        if method in ("awq", "gptq") and quant.get("bits") == 4:
            return "int4"
        raise ConfigError(
            f"{where}: quantization_config {method}{' ' + algo if algo else ''} is not one of the dtypes "
            f"{', '.join(DTYPES)}; pass architecture"
        )
    value = config.get("torch_dtype") or config.get("dtype")
    if value is None:
        raise ConfigError(f"{where}: neither torch_dtype nor dtype is set")
    dtype = CONFIG_DTYPES.get(str(value).lower().replace("torch.", ""))
    if dtype is None:
        raise ConfigError(f"{where}: torch_dtype {value!r} is not one of {', '.join(CONFIG_DTYPES)}")
    return dtype


def architecture_from_config(config, where):
    """Every fact but the parameter count, from a parsed config.json (`where` names it in errors)."""
    text = language_config(config)
    heads = _integer(text, "num_attention_heads", where)
    kv_heads = text.get("num_key_value_heads")
    kv_heads = heads if kv_heads is None else kv_heads
    head_dim = text.get("head_dim")
    if head_dim is None:
        hidden = _integer(text, "hidden_size", where)
        if hidden % heads:
            raise ConfigError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
        head_dim = hidden // heads
    return {
        "num_layers": _integer(text, "num_layers", where),
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "max_context_length": _integer(text, "max_context_length", where),
        "dtype": dtype_of(text, where),
    }


def safetensors_parameters(header):
    """Elements of every tensor a safetensors header lists (the exact parameter count of that file)."""
    count = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        elements = 1
        for size in tensor["shape"]:
            elements *= size
        count += elements
    return count


def billions(count):
    """A parameter count as the decimal string spec.architecture.parametersBillions holds (at least 0.000001)."""
    value = (Decimal(count) / BILLION).quantize(SIX_PLACES, rounding=ROUND_HALF_UP)
    return format(max(value, SIX_PLACES).normalize(), "f")


def parameter_count(files, dtype):
    """From the weight index's total size (bytes / bytes per parameter of dtype), or a single file's header."""
    try:
        index = files.json(WEIGHT_INDEX)
    except FetchError as exc:
        if exc.status != 404:
            raise
    else:
        total = (index.get("metadata") or {}).get("total_size")
        if not isinstance(total, int) or total <= 0:
            raise ConfigError(f"{files.url(WEIGHT_INDEX)}: metadata.total_size is {total!r}; expected bytes")
        return int(Decimal(total) / Decimal(DTYPES[dtype]))
    try:
        header = files.safetensors_header(SINGLE_WEIGHTS)
    except FetchError as exc:
        if exc.status != 404:
            raise
        raise FetchError(
            files.url(WEIGHT_INDEX), f"no weights found: neither this nor {SINGLE_WEIGHTS} exists", answered=True
        ) from None
    try:
        return safetensors_parameters(header)
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{files.url(SINGLE_WEIGHTS)}: unreadable tensor entry in the header ({exc})") from None


def derive(files):
    """The architecture option of a model from its files (model_files.ModelFiles or the same interface)."""
    facts = architecture_from_config(files.json(CONFIG), files.url(CONFIG))
    facts["parameters_billions"] = billions(parameter_count(files, facts["dtype"]))
    return facts
