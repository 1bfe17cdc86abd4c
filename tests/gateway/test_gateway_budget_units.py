"""Pure logic of spend budgets and the wider routes (no processes): periods, reservations, usage shapes."""

import datetime

import pytest

from tokenfactory_gateway.apiroutes import usage_of_route
from tokenfactory_gateway.budget import DEFAULT_COMPLETION_RESERVE, Budget, period_bounds, reservation_tokens
from tokenfactory_gateway.errors import ApiError

pytestmark = pytest.mark.gateway
UTC = datetime.UTC


@pytest.mark.parametrize(
    ("period", "now", "start", "end"),
    [
        ("day", "2026-12-31T23:59:59+00:00", "2026-12-31T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
        ("month", "2026-12-06T12:00:00+00:00", "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
        ("month", "2027-01-31T23:00:00-05:00", "2027-02-01T00:00:00+00:00", "2027-03-01T00:00:00+00:00"),
    ],
)
def test_periods_are_calendar_periods_in_utc(period, now, start, end):
    bounds = period_bounds(period, datetime.datetime.fromisoformat(now))
    assert tuple(b.isoformat() for b in bounds) == (start, end)


def test_a_reservation_is_the_prompt_estimate_plus_the_completion_bound():
    chat = {"messages": [{"role": "user", "content": "say four words"}], "max_tokens": 8, "n": 2}
    assert reservation_tokens(chat, "/v1/chat/completions") == (4, 16)
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "12345678"}]}]}
    assert reservation_tokens(parts, "/v1/chat/completions") == (2, DEFAULT_COMPLETION_RESERVE)
    assert reservation_tokens({"prompt": [1, 2, 3], "max_tokens": 1}, "/v1/completions") == (3, 1)
    assert reservation_tokens({"input": ["abcd", "efgh"]}, "/v1/embeddings") == (2, 0)
    assert reservation_tokens({"input": "abcd", "max_output_tokens": 5}, "/v1/responses") == (1, 5)


def test_budget_amounts_keep_their_value_and_bad_ones_name_the_field():
    assert Budget.checked({"amount": "25.00"}).view() == {"period": "month", "amount": "25", "tokens": 0}
    assert Budget.checked({"amount": 1e-3, "period": "day"}).view()["amount"] == "0.001"
    assert not Budget.checked(None) and Budget.checked({"tokens": 1})
    for bad in ({"amount": "NaN"}, {"amount": "1e30"}, {"amount": None}, {"period": "year"}, {"tokens": 1.5}):
        with pytest.raises(ApiError) as caught:
            Budget.checked(bad)
        assert caught.value.param.startswith("budget."), bad


def test_embeddings_and_responses_usage_shapes():
    assert usage_of_route("/v1/embeddings", b'{"usage":{"prompt_tokens":5,"total_tokens":5}}') == (5, 0)
    assert usage_of_route("/v1/responses", b'{"usage":{"input_tokens":3,"output_tokens":4}}') == (3, 4)
    assert usage_of_route("/v1/responses", b'{"usage":{"input_tokens":3,"output_tokens":true}}') is None
    assert usage_of_route("/v1/embeddings", b'{"data":[]}') is None
    assert usage_of_route("/v1/chat/completions", b'{"usage":{"prompt_tokens":1,"completion_tokens":2}}') == (1, 2)
