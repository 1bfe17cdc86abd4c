"""k8s.retries.with_retries: which answers are retried, how often, and how long it pauses (no sleeping here)."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.retries import (
    ATTEMPTS,
    MAX_DELAY,
    RetryableError,
    with_retries,
)


def answers(*statuses, retry_after=None):
    """A call that fails with each status in turn (as KubeClient does), then returns 'ok'."""
    pending = list(statuses)

    def call():
        if pending:
            error = K8sError(pending.pop(0), "boom")
            raise RetryableError(error, retry_after) if error.transient else error
        return "ok"

    return call


def test_transient_answers_are_retried_and_reported():
    pauses, notes = [], []
    call = answers(409, 429, 500, 502)
    assert with_retries(call, "GET /x", notes.append, sleep=pauses.append) == "ok"
    assert len(pauses) == 4 and all(0 <= p <= MAX_DELAY for p in pauses)
    assert [n.split(":")[1].split()[0] for n in notes] == ["409", "429", "500", "502"]


def test_gives_up_after_the_attempts_with_the_last_error():
    pauses = []
    with pytest.raises(K8sError) as err:
        with_retries(answers(*[503] * ATTEMPTS), "GET /x", sleep=pauses.append)
    assert err.value.status == 503 and len(pauses) == ATTEMPTS - 1


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_other_errors_are_not_retried(status):
    pauses = []
    with pytest.raises(K8sError):
        with_retries(answers(status), "GET /x", sleep=pauses.append)
    assert pauses == []


def test_the_servers_retry_after_is_a_floor_and_the_cap_a_ceiling():
    pauses = []
    with_retries(answers(429, retry_after="3"), "GET /x", sleep=pauses.append)
    assert pauses[0] >= 3
    pauses = []
    with_retries(answers(429, retry_after="3600"), "GET /x", sleep=pauses.append)
    assert pauses == [MAX_DELAY]
