"""The synthetic upstream, checked through the official OpenAI SDK and raw HTTP/1.1."""

import http.client
import json
import re
import subprocess
import sys
import time
import urllib.request

import openai
import pytest

from tests.engine.synthetic import REPO, SyntheticUpstream, completion_text

CHAT = [{"role": "user", "content": "say hello to the token factory"}]  # 6 words + 3 = 9 prompt tokens


def client(upstream: SyntheticUpstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{upstream.base_url}/v1", api_key="unused", max_retries=0, timeout=30)


def metric(upstream: SyntheticUpstream, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(f"{upstream.base_url}/metrics").read().decode()  # noqa: S310
    pattern = rf'^{re.escape(name)}{{engine="0",model_name="tiny-qwen2"{re.escape(labels)}}} (\S+)$'
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"{name}{labels} not in /metrics"
    return float(match.group(1))


def test_chat_stream_with_usage_matches_vllm_shape(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=32, tokens_per_chunk=2)
    stream = client(upstream).chat.completions.create(
        model="tiny-qwen2", messages=CHAT, max_tokens=7, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert [len(c.choices[0].delta.content.split()) for c in content] == [2, 2, 2, 1]
    assert "".join(c.choices[0].delta.content for c in content) == completion_text(7)
    assert content[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage.model_dump(exclude_none=True) == {
        "prompt_tokens": 9,
        "completion_tokens": 7,
        "total_tokens": 16,
    }


def test_stream_without_include_usage_has_no_usage_chunk(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=3)
    chunks = list(client(upstream).completions.create(model="tiny-qwen2", prompt="one two", stream=True))
    assert [c.choices[0].text for c in chunks] == [" alpha", " bravo", " charlie"]
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_continuous_usage_stats_counts_up(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=3)
    chunks = list(
        client(upstream).chat.completions.create(
            model="tiny-qwen2",
            messages=CHAT,
            stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
        )
    )
    assert [c.usage.completion_tokens for c in chunks] == [0, 1, 2, 3, 3]


def test_non_streaming_chat_and_completions(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=5)
    api = client(upstream)
    chat = api.chat.completions.create(model="tiny-qwen2", messages=CHAT)
    assert chat.choices[0].message.content == completion_text(5)
    assert chat.choices[0].finish_reason == "stop"
    assert (chat.usage.prompt_tokens, chat.usage.completion_tokens) == (9, 5)
    text = api.completions.create(model="tiny-qwen2", prompt=[1, 2, 3, 4], max_tokens=2)
    assert text.choices[0].text == completion_text(2)
    assert text.choices[0].finish_reason == "length"
    assert (text.usage.prompt_tokens, text.usage.total_tokens) == (4, 6)
    assert [m.id for m in api.models.list()] == ["tiny-qwen2"]


def test_ttft_and_itl_are_applied(synthetic_upstream):
    # Functional check of the schedule (first chunk not before TTFT, chunks spaced by ITL); no speed claim.
    upstream = synthetic_upstream(ttft_ms=150, itl_ms=40, output_tokens=4, tokens_per_chunk=1)
    start = time.monotonic()
    stamps = []
    for chunk in client(upstream).chat.completions.create(model="tiny-qwen2", messages=CHAT, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.monotonic() - start)
    assert len(stamps) == 4
    # Scheduled offsets from arrival: 0.15, 0.19, 0.23, 0.27 s (client clocks start a bit earlier).
    assert all(stamp >= 0.15 + 0.04 * i - 0.002 for i, stamp in enumerate(stamps)), stamps
    assert stamps[0] < 1.5
    non_stream_start = time.monotonic()
    client(upstream).chat.completions.create(model="tiny-qwen2", messages=CHAT)
    assert time.monotonic() - non_stream_start >= 0.27 - 0.005


def test_error_inside_200_stream(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=10, error_after_chunks=2)
    stream = client(upstream).chat.completions.create(model="tiny-qwen2", messages=CHAT, stream=True)
    assert stream.response.status_code == 200
    received = []
    with pytest.raises(openai.APIError, match="Internal server error"):
        for chunk in stream:
            received.append(chunk)
    assert "".join(c.choices[0].delta.content for c in received) == completion_text(2)
    assert metric(upstream, "vllm:request_success_total", ',finished_reason="error"') == 1


def test_abort_mid_stream_drops_the_connection(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=10, abort_after_chunks=3)
    stream = client(upstream).chat.completions.create(model="tiny-qwen2", messages=CHAT, stream=True)
    with pytest.raises(openai.APIConnectionError):
        list(stream)


def test_die_after_requests(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=2, die_after_requests=2)
    api = client(upstream)
    for _attempt in range(2):
        assert api.chat.completions.create(model="tiny-qwen2", messages=CHAT).usage.completion_tokens == 2
    with pytest.raises(openai.APIConnectionError):
        api.chat.completions.create(model="tiny-qwen2", messages=CHAT)
    assert upstream.died.is_set()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{upstream.base_url}/health", timeout=2)  # noqa: S310


def test_openai_error_statuses(synthetic_upstream):
    api = client(synthetic_upstream())
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        api.chat.completions.create(model="other", messages=CHAT)
    with pytest.raises(openai.BadRequestError, match="messages"):
        api.chat.completions.create(model="tiny-qwen2", messages=[])
    with pytest.raises(openai.BadRequestError, match="max_model_len"):
        api.completions.create(model="tiny-qwen2", prompt="x", max_tokens=5000)


def test_metrics_track_tokens_and_kv_cache(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=4, itl_ms=100, kv_cache_tokens=20)
    stream = client(upstream).chat.completions.create(model="tiny-qwen2", messages=CHAT, stream=True)
    next(stream)  # role preamble; the request is running now
    assert metric(upstream, "vllm:num_requests_running") == 1
    assert metric(upstream, "vllm:kv_cache_usage_perc") >= 9 / 20
    list(stream)
    assert metric(upstream, "vllm:num_requests_running") == 0
    assert metric(upstream, "vllm:kv_cache_usage_perc") == 0
    assert metric(upstream, "vllm:prompt_tokens_total") == 9
    assert metric(upstream, "vllm:generation_tokens_total") == 4
    assert metric(upstream, "vllm:request_success_total", ',finished_reason="stop"') == 1
    assert metric(upstream, "vllm:time_to_first_token_seconds_count") == 1
    assert metric(upstream, "vllm:inter_token_latency_seconds_count") == 3
    assert metric(upstream, "vllm:inter_token_latency_seconds_sum") >= 0.15  # 3 gaps scheduled 0.1 s apart


def test_keep_alive_and_chunked_request_body(synthetic_upstream):
    upstream = synthetic_upstream(output_tokens=1)
    conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=10)
    body = json.dumps({"model": "tiny-qwen2", "prompt": "a b c"}).encode()
    for _attempt in range(2):
        conn.request("POST", "/v1/completions", body=iter([body[:5], body[5:]]), encode_chunked=True)
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["usage"]["prompt_tokens"] == 3
    conn.request("GET", "/nope")
    assert conn.getresponse().status == 404
    conn.close()
    assert sum(1 for method, *_rest in upstream.received if method == "POST") == 2


def test_subprocess_mode_serves_and_stops():
    with SyntheticUpstream(subprocess=True, output_tokens=3, ttft_ms=10) as upstream:
        reply = client(upstream).chat.completions.create(model="tiny-qwen2", messages=CHAT)
        assert reply.choices[0].message.content == completion_text(3)
        assert metric(upstream, "vllm:generation_tokens_total") == 3
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{upstream.base_url}/health", timeout=2)  # noqa: S310


def test_cli_exits_nonzero_when_it_dies():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.engine.synthetic", "--die-after-requests", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    base_url = proc.stdout.readline().split()[1]
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0).completions.create(
            model="tiny-qwen2", prompt="x"
        )
    assert proc.wait(10) == 1
    proc.stdout.close()
