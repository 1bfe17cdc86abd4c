"""Statistics of the validation core on crafted request timelines (no network)."""

import math
import random
import statistics

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import stats
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.loadgen import RequestRecord


def record(index, start, chunks, out, ok=True, kind=None, status=200, prompt_tokens=10):
    r = RequestRecord(index, "p")
    r.start, r.chunk_times, r.output_tokens, r.ok = start, list(chunks), out, ok
    r.end = chunks[-1] + 0.001 if chunks else start + 0.01
    r.error_kind, r.status, r.prompt_tokens = kind, status, prompt_tokens if ok else 0
    return r


@pytest.fixture
def timeline():
    return [
        record(0, 0.0, [0.10, 0.15, 0.25], 3),  # TTFT 100, ITL 50/100, TPOT 75, E2E 250
        record(1, 1.0, [1.20, 1.30], 5),  # 5 tokens in 2 chunks: TTFT 200, ITL 100, TPOT 25, E2E 300
        record(2, 1.5, [], 0, ok=False, kind="rate_limited", status=429),
        record(3, 2.0, [2.05], 1),  # one token: no ITL, no TPOT
    ]


def test_percentile_matches_numpy_linear_definition():
    rng = random.Random(3)
    for n in (2, 3, 7, 50, 101):
        values = sorted(rng.uniform(0, 100) for _i in range(n))
        reference = statistics.quantiles(values, n=100, method="inclusive")  # same linear interpolation
        for p in range(1, 100):
            assert stats.percentile(values, p) == pytest.approx(reference[p - 1], abs=1e-9)
    assert stats.percentile([4.0], 99) == 4.0
    assert stats.percentile([], 50) is None


def test_summary_on_crafted_timeline(timeline):
    result = stats.summarize(timeline, duration=2.5, slo={"ttft_ms": 150, "itl_ms": 60})
    assert result["completed"] == 3 and result["failed"] == 1
    assert result["total_output_tokens"] == 9 and result["total_input_tokens"] == 30
    assert result["output_throughput"] == pytest.approx(9 / 2.5)
    assert result["request_throughput"] == pytest.approx(3 / 2.5)
    # TTFT [50, 100, 200]
    assert result["median_ttft_ms"] == pytest.approx(100)
    assert result["p90_ttft_ms"] == pytest.approx(180)
    assert result["p99_ttft_ms"] == pytest.approx(198)
    assert result["mean_ttft_ms"] == pytest.approx(350 / 3)
    assert result["std_ttft_ms"] == pytest.approx(
        math.sqrt(((50 - 350 / 3) ** 2 + (100 - 350 / 3) ** 2 + (200 - 350 / 3) ** 2) / 3)
    )
    # ITL pooled per chunk [50, 100, 100]
    assert result["count_itl"] == 3
    assert result["median_itl_ms"] == pytest.approx(100)
    assert result["mean_itl_ms"] == pytest.approx(250 / 3)
    # TPOT only for out > 1: [75, 25]
    assert result["count_tpot"] == 2
    assert result["p50_tpot_ms"] == pytest.approx(50)
    assert result["p90_tpot_ms"] == pytest.approx(70)
    # E2E [50, 250, 300]
    assert result["median_e2el_ms"] == pytest.approx(250)
    assert result["p95_e2el_ms"] == pytest.approx(295)
    # goodput: only request 3 has TTFT <= 150 and TPOT <= 60
    assert result["request_goodput"] == pytest.approx(1 / 2.5)
    assert result["errors"]["by_kind"] == {"rate_limited": 1}
    assert result["errors"]["rate_limited"] == 1


def test_slo_checks(timeline):
    result = stats.summarize(
        timeline, duration=2.5, slo={"ttft_ms": 195, "itl_ms": 250, "e2e_ms": 290, "max_error_rate": 0.3}
    )
    checks = {c["name"]: c for c in result["slo"]["checks"]}
    assert checks["ttft_p95"]["value_ms"] == pytest.approx(190) and checks["ttft_p95"]["passed"]
    assert checks["itl_p95"]["passed"]
    assert checks["e2el_p95"]["value_ms"] == pytest.approx(295) and not checks["e2el_p95"]["passed"]
    assert checks["error_rate"]["value"] == pytest.approx(0.25) and checks["error_rate"]["passed"]
    assert result["slo"]["passed"] is False
    strict = stats.summarize(timeline, 2.5)  # default max_error_rate 0 -> the 429 fails it
    assert [c["name"] for c in strict["slo"]["checks"] if not c["passed"]] == ["error_rate"]


def test_slo_percentile_is_added_and_validated(timeline):
    result = stats.summarize(timeline, 2.5, slo={"percentile": 75})
    assert result["p75_ttft_ms"] == pytest.approx(150)
    with pytest.raises(ValueError, match="percentile"):
        stats.summarize(timeline, 2.5, slo={"percentile": 100})
    with pytest.raises(ValueError, match="unknown SLO field 'ttft'"):
        stats.summarize(timeline, 2.5, slo={"ttft": 1})


def test_all_failed_has_no_latency_and_fails():
    records = [record(i, 0.0, [], 0, ok=False, kind="rate_limited", status=429) for i in range(3)]
    result = stats.summarize(records, 1.0)
    assert result["p95_ttft_ms"] is None and result["completed"] == 0
    assert result["errors"]["rate_limited"] == 3
    assert not result["slo"]["passed"]
    assert all(not c["passed"] for c in result["slo"]["checks"])


def test_request_errors_are_every_failure_but_429_and_the_first_is_named():
    records = [
        record(0, 0.0, [], 0, ok=False, kind="rate_limited", status=429),
        record(1, 0.1, [0.2], 1),
        record(2, 0.2, [], 0, ok=False, kind="http_503", status=503),
        record(3, 0.3, [], 0, ok=False, kind="timeout", status=None),
    ]
    records[2].error = "HTTP 503 from upstream"
    errors = stats.summarize(records, 1.0)["errors"]
    assert errors["request_errors"] == 2 and errors["rate_limited"] == 1
    assert errors["first_error"] == {
        "index": 2,
        "kind": "http_503",
        "status": 503,
        "message": "HTTP 503 from upstream",
        "retry_after": None,
    }
    only_limited = stats.summarize(records[:2], 1.0)["errors"]
    assert only_limited["request_errors"] == 0 and only_limited["first_error"] is None


def test_percentile_key_spelling():
    assert stats.percentile_key(99) == "p99" and stats.percentile_key(99.9) == "p99.9"
    assert stats.percentile_key(95.0) == "p95"


def test_peak_rates_and_series(timeline):
    peaks = stats.peak_rates(timeline)
    assert peaks["max_concurrent_requests"] == 1
    assert peaks["max_output_tokens_per_s"] == pytest.approx(5)
    series = stats.throughput_series(timeline, 0.0, 2.5)
    assert series["bin_s"] == 0.25 and len(series["t_s"]) == 10
    tokens = sum(v * series["bin_s"] for v in series["output_tokens_per_s"])
    assert tokens == pytest.approx(9)  # every output token lands in some bin
    # in flight at bin midpoints: request 0 at 0.125 s, request 1 at 1.125 s; the others end before one
    assert series["active_requests"] == [1, 0, 0, 0, 1, 0, 0, 0, 0, 0]


def test_histogram_and_rows(timeline):
    hist = stats.histogram([1.0, 2.0, 2.0, 3.0], bins=2)
    assert hist["counts"] == [1, 3] and hist["edges"] == [1.0, 2.0, 3.0]
    rows = stats.request_rows(timeline, 0.0, with_chunks=True)
    assert rows[1]["ttft_ms"] == pytest.approx(200) and rows[1]["chunk_ms"] == [200.0, 300.0]
    assert rows[2]["ok"] is False and rows[2]["error_kind"] == "rate_limited"
