"""Report charts with data on short runs, and the decode rate next to the memory-bandwidth limit.

The cadence test runs a real validation (the module's code) against the synthetic upstream in this process:
a run of well under a second still gets several KV-cache / queue samples and one after the load."""

import math

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import memory_bound
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.validation import run_validation
from ansible_collections.tokenfactory.spark.plugins.modules.validate_deployment import bandwidth
from ansible_collections.tokenfactory.spark.plugins.plugin_utils import report_data, report_html

from tests.engine.synthetic import SyntheticUpstream

QWEN2_05B = {"weights_bytes": 988_000_000, "kv_bytes_per_token": 12288}  # bf16: 2 x 24 layers x 2 heads x 64 x 2


def test_bound_is_bandwidth_over_bytes_read_per_token():
    # One stream, no context: every token reads all weights -> 273e9 / 988e6 = 276 tok/s on GB10.
    bound, per_token = memory_bound.decode_bound(273e9, 988e6, 12288, 0, 1)
    assert per_token == 988e6 and bound == pytest.approx(276.3, abs=0.1)
    # 8 streams at 1000 tokens of context: weights shared by the batch, KV read per stream.
    bound, per_token = memory_bound.decode_bound(273e9, 988e6, 12288, 1000, 8)
    assert per_token == pytest.approx(988e6 / 8 + 1000 * 12288)
    assert bound == pytest.approx(273e9 / per_token)
    # Tensor parallel over 2 GPUs: each reads half, in parallel.
    assert memory_bound.decode_bound(273e9, 988e6, 12288, 1000, 8, gpus=2)[0] == pytest.approx(2 * bound)


def test_summary_uses_littles_law_and_mean_tpot():
    result = {"completed": 40, "duration": 10.0, "mean_e2el_ms": 1000.0, "mean_tpot_ms": 20.0,
              "total_input_tokens": 40 * 100, "total_output_tokens": 40 * 64}  # fmt: skip
    out = memory_bound.summarize(result, 273, **QWEN2_05B, gpu_type="NVIDIA-GB10")
    assert out["streams"] == pytest.approx(4.0)  # 40 requests x 1 s in flight over 10 s
    assert out["context_tokens"] == pytest.approx(132.0)  # prompt + half the output
    assert out["decode_tokens_per_s"] == pytest.approx(200.0)  # 4 streams x 1000 / 20 ms
    expected = 273e9 / (988e6 / 4 + 132 * 12288)
    assert out["bound_tokens_per_s"] == pytest.approx(expected)
    assert out["fraction_of_bound"] == pytest.approx(200.0 / expected)
    assert memory_bound.summarize({"completed": 0}, 273, **QWEN2_05B)["computed"] is False


def test_bandwidth_from_the_data_sheet_or_explicit():
    assert bandwidth({"gpu_type": "NVIDIA-GB10"}) == 273
    assert bandwidth({"gpu_type": "NVIDIA-GB10", "memory_bandwidth_gbps": 250.0}) == 250.0
    with pytest.raises(ValueError, match="memory_bound: bandwidth of 'NVIDIA-X1' unknown"):
        bandwidth({"gpu_type": "NVIDIA-X1"})


def test_report_prints_the_fraction_next_to_the_decode_rate(short_run):
    """Through the report document (scrubbed of credential-like keys), the summary table and the HTML."""
    result = {"completed": 40, "duration": 10.0, "mean_e2el_ms": 1000.0, "mean_tpot_ms": 20.0,
              "total_input_tokens": 4000, "total_output_tokens": 2560}  # fmt: skip
    validation = {**short_run, "memory_bound": memory_bound.summarize(result, 273, **QWEN2_05B, gpu_type="NVIDIA-GB10")}
    doc = report_data.build_report("validate.yml", [{"host": "localhost", "validation": validation}], [], {})
    kept = doc["validations"][0]["validation"]["memory_bound"]
    assert set(kept) == set(validation["memory_bound"]), "the scrubber dropped memory_bound fields"
    line = report_data.memory_bound_line(doc["validations"][0]["validation"])
    fraction = kept["fraction_of_bound"]
    assert line.startswith(f"decode 200 tok/s is {fraction:.1%} of the memory-bandwidth limit")
    assert "NVIDIA-GB10 273 GB/s" in line and "0.99 GB weights / 4.0 streams + 132 tokens x 12.0 KiB KV" in line
    assert "above the limit" not in line
    assert f"{fraction:.1%}" in report_data.summary_table(doc) and line.replace("&", "&amp;") in report_html.render(doc)
    assert report_data.memory_bound_line({}) is None


def test_a_rate_above_the_limit_is_called_out():
    result = {"completed": 40, "duration": 10.0, "mean_e2el_ms": 1000.0, "mean_tpot_ms": 0.5,
              "total_input_tokens": 4000, "total_output_tokens": 2560}  # fmt: skip
    bound = memory_bound.summarize(result, 273, **QWEN2_05B, gpu_type="NVIDIA-GB10")
    assert bound["above_bound"] and bound["fraction_of_bound"] > 1
    assert "above the limit: the model served is smaller" in report_data.memory_bound_line({"memory_bound": bound})


@pytest.fixture(scope="module")
def short_run():
    # 2 rounds of 4 streams x (10 ms + 40 tokens x 10 ms): at least 0.82 s, well under the 5 s scrape interval.
    with SyntheticUpstream(model="tiny", output_tokens=40, itl_ms=10, ttft_ms=10) as upstream:
        options = {
            "base_url": f"{upstream.base_url}/v1",
            "model": "tiny",
            "metrics_url": f"{upstream.base_url}/metrics",
            "num_requests": 8,
            "concurrency": 4,
            "warmup_requests": 1,
            "output_tokens": 40,
            "prompt_tokens": 16,
            "scrape_interval": 5.0,
        }
        yield run_validation(options)


def test_a_short_run_still_has_engine_samples(short_run):
    duration = short_run["duration"]
    series = short_run["server"]["series"]
    during = [t for t in series["t_s"] if t <= duration]
    assert 0.8 < duration < 5.0, "the point is a run shorter than the scrape interval"
    assert len(during) >= 4, series  # 0, 0.1, 0.3, 0.7 s
    assert series["t_s"][-1] >= duration - 0.05, "one sample when the load ends"
    assert max(v for v in series["running"] if v is not None) >= 1
    kv = [v for v in series["kv_cache_usage"] if v is not None]
    assert len(kv) == len(series["t_s"]) and max(kv) > 0


def test_the_report_charts_those_samples(short_run):
    doc = report_data.build_report("validate.yml", [{"host": "localhost", "validation": short_run}], [], {})
    html = report_html.render(doc)
    for title in ("KV-cache usage over time", "Engine queue over time"):
        chart = html.split(f'aria-label="{title}"')[1].split("</svg>")[0]
        assert "no data" not in chart and "<polyline" in chart, title
        points = chart.split('points="')[1].split('"')[0].split()
        assert len(points) >= 3 and all(math.isfinite(float(c)) for p in points for c in p.split(","))
