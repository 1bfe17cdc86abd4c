"""The real CPU vLLM serving the tiny local model (tier `engine`: `make test-engine`)."""

import re
import socket
import threading
import urllib.request

import openai
import pytest

from lab.engine.vllm import VllmServer
from lab.processes import group_members

pytestmark = pytest.mark.engine

CHAT = [{"role": "user", "content": "hello token factory"}]


def scrape(url: str) -> dict[str, float]:
    """Unlabelled view of /metrics: `name` -> value summed over label sets."""
    values: dict[str, float] = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():  # noqa: S310
        match = re.match(r"^(vllm:[a-z0-9_]+)(?:\{[^}]*\})? (\S+)$", line)
        if match:
            values[match.group(1)] = values.get(match.group(1), 0.0) + float(match.group(2))
    return values


def api(engine: VllmServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{engine.base_url}/v1", api_key="unused", max_retries=0, timeout=120)


def test_chat_and_completions(vllm_engine):
    client = api(vllm_engine)
    assert [m.id for m in client.models.list()] == ["tiny-qwen2"]
    chat = client.chat.completions.create(model="tiny-qwen2", messages=CHAT, max_tokens=12)
    assert chat.choices[0].finish_reason == "length"
    assert chat.usage.completion_tokens == 12
    assert chat.usage.prompt_tokens > 3  # the chat template adds its own tokens
    text = client.completions.create(model="tiny-qwen2", prompt="hello world", max_tokens=5)
    assert text.usage.completion_tokens == 5
    assert text.choices[0].text


def test_streaming_usage_and_token_counters(vllm_engine):
    before = scrape(vllm_engine.metrics_url)
    chunks = list(
        api(vllm_engine).chat.completions.create(
            model="tiny-qwen2", messages=CHAT, max_tokens=20, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == []
    usage = chunks[-1].usage
    assert usage.completion_tokens == 20
    assert sum(1 for c in chunks if c.choices and c.choices[0].finish_reason == "length") == 1
    after = scrape(vllm_engine.metrics_url)
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 20
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == usage.prompt_tokens


def test_metrics_expose_vllm_names(vllm_engine):
    api(vllm_engine).completions.create(model="tiny-qwen2", prompt="warm up", max_tokens=2)
    names = scrape(vllm_engine.metrics_url)
    for name in (
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
    ):
        assert name in names, name
    assert 0.0 <= names["vllm:kv_cache_usage_perc"] <= 1.0
    assert names["vllm:time_to_first_token_seconds_count"] >= 1


def test_small_kv_cache_shows_pressure():
    """16 KV blocks of 128 tokens hold 5 of 32 sequences of ~400 tokens: the cache fills, sequences queue or get
    preempted.

    One request with n=32 hands the engine all sequences at once (however slowly a loaded API server forwards
    separate requests), and `ignore_eos` makes each one generate all its tokens, so the cache stays full for most of
    a burst of seconds. On two loaded cores /metrics can still stall while tokens flow, so up to six bursts run;
    all assertions must hold for one and the same burst.
    """
    with VllmServer(extra_args=["--num-gpu-blocks-override", "16"]) as engine:
        client = api(engine)
        for attempt in range(6):
            peaks = kv_pressure_burst(engine, client, burst=attempt, sequences=32)
            queued = peaks["vllm:num_requests_waiting"] + peaks["vllm:num_preemptions_total"] > 0
            if queued and peaks["vllm:kv_cache_usage_perc"] >= 0.5:
                break
        # Sampling every 50 ms can miss the instant the cache is full; queueing or preemption cannot be missed.
        assert peaks["vllm:num_requests_waiting"] + peaks["vllm:num_preemptions_total"] > 0, peaks
        assert peaks["vllm:kv_cache_usage_perc"] >= 0.5, peaks
    assert group_members(engine.pgid) == []  # stop() left nothing of the server's process group behind


def kv_pressure_burst(engine, client, burst, sequences, max_tokens=300):
    """One request of `sequences` long completions (prompt distinct per burst: no prefix-cache reuse); peaks."""
    before = scrape(engine.metrics_url).get("vllm:num_preemptions_total", 0.0)
    peaks = {"vllm:kv_cache_usage_perc": 0.0, "vllm:num_requests_waiting": 0.0, "vllm:num_preemptions_total": 0.0}
    done = threading.Event()

    def watch():
        while not done.is_set():
            values = scrape(engine.metrics_url)
            for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting"):
                peaks[name] = max(peaks[name], values.get(name, 0.0))
            done.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        reply = client.completions.create(  # not streamed: less per-token work for the API server
            model="tiny-qwen2",
            prompt=" ".join([f"burst {burst} hello world"] * 20),
            n=sequences,
            max_tokens=max_tokens,
            extra_body={"ignore_eos": True},
        )
    finally:
        done.set()
        watcher.join()
    assert reply.usage.completion_tokens == max_tokens * sequences, reply.usage
    # A counter: read after the burst, so a preemption between two samples is never missed.
    peaks["vllm:num_preemptions_total"] = scrape(engine.metrics_url).get("vllm:num_preemptions_total", 0.0) - before
    return peaks


def test_start_failure_raises_with_log_tail(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(RuntimeError, match="vLLM exited") as failure:
        VllmServer(model_dir=tmp_path).start(timeout=120)
    assert "log" in str(failure.value)
    assert len(str(failure.value).splitlines()) > 3


def test_taken_port_fails_with_the_reason():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(RuntimeError, match="Address already in use"):
            VllmServer(port=holder.getsockname()[1]).start(timeout=120)
