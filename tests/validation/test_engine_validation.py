"""Validation against the real CPU vLLM engine serving the tiny model (tier test-validation, marker engine)."""

import threading
import time
import warnings
from itertools import pairwise

import pytest

from lab.engine.vllm import VllmServer
from tests.validation.helpers import validate

pytestmark = pytest.mark.engine

MAX_SAMPLE_GAP_S = 0.75


def test_closed_loop_against_vllm(vllm_engine):
    result = validate(
        vllm_engine.base_url,
        api="completions",
        concurrency=4,
        num_requests=24,
        warmup_requests=2,
        prompt_tokens=64,
        output_tokens=160,  # a run of seconds: /metrics on a loaded 2-core machine can stall for 1-2 s
        metrics_url=vllm_engine.metrics_url,
        scrape_interval=0.25,
        return_requests=True,
        # Loose SLOs: this checks the evaluation on a real engine, not a shared 2-core CPU's speed (whose
        # API server can stall for a second under load); the SLO logic itself is unit-tested.
        slo={"percentile": 95, "ttft_ms": 5000.0, "itl_ms": 2000.0},
    )
    assert result["completed"] == 24 and result["failed"] == 0, result["errors"]
    assert {r["output_tokens"] for r in result["requests"]} == {160}  # ignore_eos: exactly max_tokens each
    assert not result["tokens_estimated"]
    server = result["server"]
    assert server["scraped"] and server["kv_cache_usage"]["samples"] >= 2
    assert result["token_check"]["match"] is True, result["token_check"]
    assert server["prompt_tokens_delta"] == result["total_input_tokens"]
    assert server["server_ttft"]["count"] == 24 and server["server_e2el"]["count"] == 24
    assert 48 <= result["total_input_tokens"] / 24 <= 80  # ~64 prompt tokens after calibration
    assert server["num_requests_running_max"] >= 1 and server["kv_cache_usage"]["samples"] >= 1
    assert 0 < result["p50_ttft_ms"] < result["p50_e2el_ms"]
    assert result["slo"]["passed"], result["slo"]


def test_chat_stream_against_vllm(vllm_engine):
    result = validate(
        vllm_engine.base_url,
        api="chat",
        concurrency=2,
        num_requests=6,
        output_tokens=16,
        metrics_url=vllm_engine.metrics_url,
        return_requests=True,
    )
    assert result["completed"] == 6 and result["total_output_tokens"] == 96
    assert result["token_check"]["match"] is True
    # One content chunk per token, or fewer when vLLM's API server falls behind and merges tokens into one
    # chunk (seen on a loaded machine); the role preamble is never one (it would make 17).
    chunks = [r["chunks"] for r in result["requests"]]
    assert all(1 <= c <= 16 for c in chunks), chunks
    assert result["count_itl"] == sum(c - 1 for c in chunks)


def test_kv_pressure_then_engine_dies_mid_run(tiny_model_dir):
    with VllmServer(model_dir=tiny_model_dir, extra_args=["--num-gpu-blocks-override", "16"]) as engine:
        # ~500 tokens = 4 of the 16 blocks per request: 8 in flight need twice the cache, full for ~2 s of a
        # quiet run. On a starved 2-core machine the API server falls behind, so the engine sees little
        # pressure, and /metrics answers a few times in the whole run (CI: peak 0.53, avg 0.11). So pressure
        # is judged on the first of up to 3 runs sampled without a gap over MAX_SAMPLE_GAP_S.
        attempts = []
        for _attempt in range(3):
            pressure = validate(
                engine.base_url,
                api="completions",
                concurrency=8,
                num_requests=16,
                warmup_requests=1,
                prompt_tokens=96,
                output_tokens=400,
                metrics_url=engine.metrics_url,
                scrape_interval=0.25,
            )
            assert pressure["completed"] == 16, pressure["errors"]
            assert pressure["token_check"]["match"] is True
            server = pressure["server"]
            gap = max(b - a for a, b in pairwise(server["series"]["t_s"]))
            attempts.append(
                {"largest_sample_gap_s": gap, "preemptions": server["preemptions_delta"], **server["kv_cache_usage"]}
            )
            if gap <= MAX_SAMPLE_GAP_S:
                # the cache ran out: the engine's own counter, and the sampled gauge at the top
                assert server["preemptions_delta"] > 0 and server["kv_cache_usage"]["peak"] >= 0.9, attempts
                break
        else:
            warnings.warn(f"KV peak not judged: /metrics starved in all 3 runs: {attempts}", stacklevel=1)
        # The engine's own counter is exact, sampled or not: the cache ran out in at least one run.
        assert any(attempt["preemptions"] > 0 for attempt in attempts), attempts

        outcome = {}

        def run():
            outcome["result"] = validate(
                engine.base_url,
                api="completions",
                concurrency=4,
                num_requests=40,
                warmup_requests=0,
                prompt_tokens=32,
                output_tokens=400,  # long enough that a quiet machine cannot finish half the run in 2 s
                request_timeout=20,
                max_duration=60,
            )

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(2)
        killed_at = time.monotonic()
        engine.stop(timeout=5)
        worker.join(60)
        assert not worker.is_alive(), "the load generator hung after the engine died"
        assert time.monotonic() - killed_at < 30
    result = outcome["result"]
    kinds = result["errors"]["by_kind"]
    assert result["failed"] >= 20 and result["completed"] + result["failed"] == 40
    # the engine core dies first (500 / error event inside the stream), then the server (dropped, refused)
    expected = {"connection_lost", "connect_error", "incomplete_stream", "stream_error", "http_500"}
    assert set(kinds) <= expected, result["errors"]
    assert kinds.get("connect_error", 0) >= 1 and not result["slo"]["passed"]
