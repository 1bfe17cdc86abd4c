"""The A/B bench's verdict rules on crafted rounds (no engine: pure statistics)."""

import math

from tests.bench import ab_verdict as v


def test_row_agrees_within_the_aa_spread():
    row = v.latency_row([10.0, 11.0, 12.0, 10.5], [11.5, 11.8, 10.2, 12.4])
    assert row["verdict"] == v.AGREE and row["a_spread"] == 2.0 and not row["separated"]


def test_row_differs_only_when_outside_the_spread_and_fully_separated():
    a = [10.0, 10.2, 10.1, 10.3]
    assert v.latency_row(a, [11.0, 11.1, 11.2, 11.3])["verdict"] == v.DIFFER
    assert v.latency_row(a, [9.0, 9.1, 9.2, 9.3])["verdict"] == v.DIFFER  # either side
    # median outside the spread, but one B round lies among the A rounds: cannot tell
    assert v.latency_row(a, [11.0, 11.1, 11.2, 10.15])["verdict"] == v.UNRESOLVED


def test_one_disturbed_round_does_not_decide():
    a = [2.9, 2.92, 2.95, 2.91, 2.93, 2.94, 2.9, 2.92]
    b = [2.91, 4.17, 2.93, 2.9, 2.94, 2.92, 2.95, 2.9]  # one noisy B round (the 4.17 ms)
    assert v.latency_row(a, b)["verdict"] == v.AGREE


def test_separation_chance():
    assert v.separated_by_chance(8, 8) == 2 / math.comb(16, 8)
    assert v.separated_by_chance(3, 3) == 0.1  # why three rounds could never show a real difference


def test_combine():
    assert v.combine([v.AGREE, v.PASS]) == v.PASS
    assert v.combine([v.AGREE, v.UNRESOLVED]) == v.UNRESOLVED_VERDICT
    assert v.combine([v.UNRESOLVED, v.DIFFER]) == v.FAIL
    assert v.combine([v.PASS, v.FAIL]) == v.FAIL


def test_sign_test_bound_is_the_5_percent_tail():
    for n in range(1, 16):
        k = v.sign_test_bound(n)
        tail = sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n
        assert tail <= 0.05
        assert k == 0 or k > n or sum(math.comb(n, i) for i in range(k - 1, n + 1)) / 2**n > 0.05
    assert v.sign_test_bound(8) == 7 and v.sign_test_bound(4) == 5  # 4 rounds can never pass


def test_ratio_verdict():
    assert v.ratio_verdict([0.40, 0.41, 0.39, 0.43, 0.42, 0.40, 0.44, 0.41], 0.5) == (v.PASS, 8, 7)
    assert v.ratio_verdict([0.40, 0.41, 0.52, 0.43, 0.42, 0.40, 0.44, 0.41], 0.5) == (v.PASS, 7, 7)
    assert v.ratio_verdict([0.40, 0.55, 0.52, 0.43, 0.42, 0.40, 0.44, 0.41], 0.5)[0] == v.UNRESOLVED_VERDICT
    assert v.ratio_verdict([0.57, 0.58, 0.59, 0.57, 0.56, 0.58, 0.57, 0.49], 0.5)[0] == v.FAIL
