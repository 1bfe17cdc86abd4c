"""Throughput of the real CPU vLLM on the tiny model, against references measured in the same run.

    .venv/bin/python -m tests.bench.engine_throughput [--streams 8] [--tokens 64] [--rounds 3]

References: the same engine driven by one stream at a time (what batching buys), and the synthetic
upstream with zero delays in its own process (the client's ceiling: how far the engine is from it).
"""

import argparse
import concurrent.futures
import statistics
import time

import openai

from lab.engine.vllm import VllmServer
from tests.engine.synthetic import SyntheticUpstream

PROMPT = "the token factory serves a tiny model on the cpu for tests"


def one_stream(client: openai.OpenAI, model: str, tokens: int) -> tuple[int, float, float]:
    """Returns (completion tokens from usage, TTFT, time per output token after the first)."""
    start = time.perf_counter()
    stamps, usage = [], 0
    stream = client.completions.create(
        model=model,
        prompt=PROMPT,
        max_tokens=tokens,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    for chunk in stream:
        if chunk.choices:
            stamps.append(time.perf_counter())
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    # Chunks arrive in bursts, so per-chunk gaps say little; TPOT spreads the decode time over tokens.
    return usage, stamps[0] - start, (stamps[-1] - stamps[0]) / max(usage - 1, 1)


def run_load(base_url: str, streams: int, tokens: int, rounds: int) -> dict:
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)
    one_stream(client, "tiny-qwen2", 4)  # warm-up, not counted
    results = []
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        for _round in range(rounds):
            results += pool.map(lambda _i: one_stream(client, "tiny-qwen2", tokens), range(streams))
    wall = time.perf_counter() - start
    total = sum(r[0] for r in results)
    return {
        "tokens_per_s": total / wall,
        "ttft_p50_ms": 1000 * statistics.median(r[1] for r in results),
        "tpot_p50_ms": 1000 * statistics.median(r[2] for r in results),
        "tokens": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = {}
    with SyntheticUpstream(subprocess=True, output_tokens=args.tokens) as upstream:
        rows["synthetic upstream (client ceiling)"] = run_load(
            upstream.base_url, args.streams, args.tokens, args.rounds
        )
    started = time.perf_counter()
    with VllmServer() as engine:
        start_s = time.perf_counter() - started
        rows[f"vLLM CPU, {args.streams} streams"] = run_load(engine.base_url, args.streams, args.tokens, args.rounds)
        rows["vLLM CPU, 1 stream"] = run_load(engine.base_url, 1, args.tokens, args.rounds)
    print(f"engine start to /health: {start_s:.1f} s")
    print(f"{'load':40} {'tok/s':>9} {'TTFT p50 ms':>12} {'TPOT p50 ms':>12} {'tokens':>7}")
    for name, row in rows.items():
        numbers = f"{row['tokens_per_s']:9.0f} {row['ttft_p50_ms']:12.1f} {row['tpot_p50_ms']:12.2f}"
        print(f"{name:40} {numbers} {row['tokens']:7}")
    ceiling = rows["synthetic upstream (client ceiling)"]["tokens_per_s"]
    vllm = rows[f"vLLM CPU, {args.streams} streams"]["tokens_per_s"]
    single = rows["vLLM CPU, 1 stream"]["tokens_per_s"]
    print(f"ratio batched/single-stream: {vllm / single:.2f}x; vLLM/client ceiling: {vllm / ceiling:.2f}")


if __name__ == "__main__":
    main()
