"""Generate a tiny Qwen2 chat model with a byte-level BPE tokenizer, deterministically and offline.

Runs inside the vLLM venv (torch, transformers, tokenizers):
    python lab/engine/tiny_model.py --cache ~/.cache/tokenfactory/models   # prints the model dir
The directory name carries a hash of this file, so editing the generator makes a new model.
Only the path helpers are importable without torch (the project venv uses them).
"""

import argparse
import hashlib
import os
import pathlib
import random
import shutil
import sys
import tempfile

NAME = "tiny-qwen2"
SEED = 1234
VOCAB_TARGET = 1000
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def generator_hash() -> str:
    return hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:12]


def model_dir(cache: os.PathLike | str) -> pathlib.Path:
    """Where the model for this generator version lives under `cache` (the models folder)."""
    return pathlib.Path(cache) / f"{NAME}-{generator_hash()}"


def corpus(rng: random.Random, lines: int = 4000) -> list[str]:
    """Pseudo-English sentences over a fixed syllable set, plus digits and punctuation."""
    syllables = ["ka", "to", "ri", "ne", "sa", "mo", "lu", "pe", "di", "va", "qu", "zen", "tor", "gal", "ix"]
    words = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 3))) for _word in range(600)})
    words += ["the", "a", "token", "factory", "spark", "model", "serve", "hello", "world", "GPU", "fast"]
    text = []
    for _line in range(lines):
        sentence = " ".join(rng.choices(words, k=rng.randint(4, 14)))
        text.append(f"{sentence.capitalize()}{rng.choice(['.', '!', '?', ','])} {rng.randint(0, 9999)}")
    return text


def build_tokenizer(rng: random.Random):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(rng), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=2048,
    )


def build_model(tokenizer):
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(SEED)
    special_ids = [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,  # the CPU attention backend needs >= 32
        intermediate_size=256,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=special_ids[0],
        eos_token_id=special_ids[2],
        pad_token_id=special_ids[0],
    )
    model = Qwen2ForCausalLM(config).to(torch.float32).eval()
    with torch.no_grad():
        # Wide embeddings give peaked logits; zero rows for special tokens keep their logit at 0
        # while ordinary tokens reach about +30, so sampling practically never stops early and
        # `max_tokens` decides the output length.
        embed = model.get_input_embeddings().weight
        embed.normal_(0.0, 1.0)
        embed[special_ids] = 0.0
    model.generation_config = GenerationConfig(
        bos_token_id=special_ids[0], eos_token_id=[special_ids[2], special_ids[0]], pad_token_id=special_ids[0]
    )
    return model


def generate(target: pathlib.Path) -> pathlib.Path:
    if (target / "config.json").exists():
        return target
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # deterministic BPE training
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    staging.chmod(0o755)
    try:
        tokenizer = build_tokenizer(random.Random(SEED))
        build_model(tokenizer).save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--cache", help="models folder; the model goes to CACHE/tiny-qwen2-<generator hash>")
    where.add_argument("--out", help="exact output directory (e.g. a stand-in for a hub model)")
    args = parser.parse_args(argv)
    target = pathlib.Path(args.out) if args.out else model_dir(args.cache)
    print(generate(target.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
