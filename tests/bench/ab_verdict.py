"""Verdicts of an interleaved A/B benchmark (A = the reference tool, B = ours), honest about its own noise.

Latency rows (one metric, e.g. p90 TTFT, measured once per round by each tool):
  - agree:      |median(B) - median(A)| <= A/A spread (max - min of A over the rounds);
  - differ:     outside the A/A spread AND every B round lies on the same side of every A round. With n
                rounds each and no real difference that happens by chance with probability
                2 / C(2n, n) (n=8: 0.016 %), so "differ" is not noise;
  - unresolved: neither: the run cannot tell (more rounds, or a quieter machine).
CPU criterion (B/A per round, the two runs of a round being adjacent in time): a sign test of the per-round
ratios against the limit; pass when at least `sign_test_bound(n)` rounds are within it (chance <= 5 % if
the true median ratio were at the limit), fail when at most n - that many are, unresolved otherwise.
Overall: FAIL if anything fails, PASS if everything passes, otherwise UNRESOLVED.
"""

import math
import statistics

AGREE, DIFFER, UNRESOLVED = "agree", "differ", "unresolved"
ROW_VERDICTS = (AGREE, UNRESOLVED, DIFFER)
PASS, FAIL, UNRESOLVED_VERDICT = "PASS", "FAIL", "UNRESOLVED"


def separated_by_chance(n_a, n_b):
    """Probability that n_a A values and n_b B values from one distribution fall fully apart (either way)."""
    return 2 / math.comb(n_a + n_b, n_a)


def latency_row(a, b):
    """Row verdict for one metric: dict with medians, spreads, difference and verdict."""
    spread_a, spread_b = max(a) - min(a), max(b) - min(b)
    diff = statistics.median(b) - statistics.median(a)
    separated = min(b) > max(a) or max(b) < min(a)
    if abs(diff) <= spread_a:
        verdict = AGREE
    elif separated:
        verdict = DIFFER
    else:
        verdict = UNRESOLVED
    return {
        "a_median": statistics.median(a),
        "a_spread": spread_a,
        "b_median": statistics.median(b),
        "b_spread": spread_b,
        "diff": diff,
        "separated": separated,
        "verdict": verdict,
    }


def combine(verdicts):
    """FAIL if any fails/differs, PASS if all pass/agree, else UNRESOLVED."""
    verdicts = list(verdicts)
    if any(v in (FAIL, DIFFER) for v in verdicts):
        return FAIL
    if all(v in (PASS, AGREE) for v in verdicts):
        return PASS
    return UNRESOLVED_VERDICT


def sign_test_bound(n, alpha=0.05):
    """Smallest k with P(X >= k) <= alpha for X ~ Binomial(n, 1/2) (n + 1 when no k qualifies)."""
    tail = 0.0
    for k in range(n, -1, -1):
        tail += math.comb(n, k) / 2**n
        if tail > alpha:
            return k + 1
    return 0  # pragma: no cover - alpha >= 1


def ratio_verdict(ratios, limit):
    """Sign test of per-round ratios against `limit`: (verdict, rounds within the limit, bound)."""
    n = len(ratios)
    within = sum(r <= limit for r in ratios)
    bound = sign_test_bound(n)
    if within >= bound:
        return PASS, within, bound
    if n - within >= bound:
        return FAIL, within, bound
    return UNRESOLVED_VERDICT, within, bound
