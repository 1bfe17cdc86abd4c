"""Prometheus text parsing, engine metric aliases and histogram-delta quantiles."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import prom_scrape

VLLM_BEFORE = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny-qwen2"} 0.0
vllm:num_requests_running{engine="0",model_name="tiny-qwen2"} 0.0
vllm:num_requests_waiting{engine="0",model_name="tiny-qwen2"} 0.0
vllm:generation_tokens_total{engine="0",model_name="tiny-qwen2"} 100.0
vllm:generation_tokens_total{engine="0",model_name="other"} 5000.0
vllm:num_preemptions_total{engine="0",model_name="tiny-qwen2"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="tiny-qwen2"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny-qwen2"} 100.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="tiny-qwen2"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.05",model_name="tiny-qwen2"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny-qwen2"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny-qwen2"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny-qwen2"} 0.06
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny-qwen2"} 2.0
"""
VLLM_AFTER = """vllm:kv_cache_usage_perc{engine="0",model_name="tiny-qwen2"} 0.0
vllm:generation_tokens_total{engine="0",model_name="tiny-qwen2"} 740.0
vllm:generation_tokens_total{engine="0",model_name="other"} 9000.0
vllm:num_preemptions_total{engine="0",model_name="tiny-qwen2"} 4.0
vllm:prefix_cache_queries_total{engine="0",model_name="tiny-qwen2"} 3000.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny-qwen2"} 600.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="tiny-qwen2"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.05",model_name="tiny-qwen2"} 6.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny-qwen2"} 10.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny-qwen2"} 12.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny-qwen2"} 1.06
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny-qwen2"} 12.0
"""


def test_parse_labels_and_escapes():
    families = prom_scrape.parse('m{a="x\\"y",b="1"} 2.5 1700000000\n# c\nbad line\nn 3\n')
    assert families["m"] == [({"a": 'x"y', "b": "1"}, 2.5)] and families["n"] == [({}, 3.0)]


def test_server_summary_from_deltas_filters_model():
    before = prom_scrape.snapshot(prom_scrape.parse(VLLM_BEFORE), "tiny-qwen2")
    after = prom_scrape.snapshot(prom_scrape.parse(VLLM_AFTER), "tiny-qwen2")
    samples = [
        {"kv_cache_usage": 0.5, "running": 3.0, "waiting": 0.0},
        {"kv_cache_usage": 1.0, "running": 8.0, "waiting": 2.0},
    ]
    out = prom_scrape.server_summary(before, after, samples)
    assert out["generation_tokens_delta"] == 640  # the other model's series is ignored
    assert out["preemptions_delta"] == 3
    assert out["prefix_cache_hit_rate"] == pytest.approx(500 / 2000)
    assert out["kv_cache_usage"]["avg"] == 0.75 and out["kv_cache_usage"]["peak"] == 1.0
    assert out["num_requests_running_max"] == 8 and out["num_requests_waiting_max"] == 2
    ttft = out["server_ttft"]  # delta buckets: 0.05 -> 4, 0.1 -> 8, +Inf -> 10
    assert ttft["count"] == 10 and ttft["mean_ms"] == pytest.approx(100)
    assert ttft["p50_ms"] == pytest.approx(50 + 50 * (5 - 4) / 4)
    assert ttft["p99_ms"] == pytest.approx(100)  # in the +Inf bucket: its lower bound


def test_histogram_quantile_interpolates_like_prometheus():
    buckets = {0.1: 10.0, 0.2: 30.0, float("inf"): 30.0}
    assert prom_scrape.histogram_quantile(buckets, 0.5) == pytest.approx(0.125)
    assert prom_scrape.histogram_quantile(buckets, 0.1) == pytest.approx(0.03)
    assert prom_scrape.histogram_quantile({float("inf"): 0.0}, 0.5) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu_cache_usage_perc 0.42\nnum_requests_running 3\nnum_requests_waiting 1\n", 0.42),  # NIM
        ('dynamo_component_kvstats_gpu_cache_usage_percent{worker="a"} 37.5\n', 0.375),  # Dynamo, percent
        ('vllm:gpu_cache_usage_perc{model_name="m"} 0.2\n', 0.2),  # older vLLM
    ],
)
def test_kv_cache_aliases_and_sampling(text, expected):
    assert prom_scrape.sample_gauges(text.encode())["kv_cache_usage"] == pytest.approx(expected)


def test_sample_gauges_matches_full_parse():
    full = prom_scrape.snapshot(prom_scrape.parse(VLLM_BEFORE), "tiny-qwen2")["gauges"]
    assert prom_scrape.sample_gauges(VLLM_BEFORE.encode(), "tiny-qwen2") == full
