"""The tiny model generator: naming (unit) and byte-identical output across runs (engine tier)."""

import filecmp
import json
import subprocess

import pytest

from lab.engine import install, tiny_model


def test_model_dir_is_keyed_by_generator_source(tmp_path):
    target = tiny_model.model_dir(tmp_path)
    assert target.parent == tmp_path
    assert target.name == f"tiny-qwen2-{tiny_model.generator_hash()}"
    assert len(tiny_model.generator_hash()) == 12


@pytest.mark.engine
def test_generation_is_deterministic_and_loadable(tmp_path, tiny_model_dir):
    again = tmp_path / "again"
    script = tiny_model.__file__
    subprocess.run([install.vllm_python(), script, "--out", again], check=True, capture_output=True)
    files = sorted(p.name for p in tiny_model_dir.iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(files)
    _same, mismatch, errors = filecmp.cmpfiles(tiny_model_dir, again, files, shallow=False)
    assert (mismatch, errors) == ([], [])
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert config["hidden_size"] // config["num_attention_heads"] >= 32
    assert config["tie_word_embeddings"] is True
