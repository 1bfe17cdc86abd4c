"""lab.api_poller: the records it writes and the upgrade window molecule/default's verifier reads from them."""

import json

import pytest

from lab import api_poller

OLD, NEW = "v1.36.2", "v1.36.3"


def answered(t, *, cordoned=False, ready=True, kubelet=OLD):
    return {"t": t, "ms": 3.0, "ok": True, "cordoned": cordoned, "ready": ready, "kubelet": kubelet}


def failed(t):
    return {"t": t, "ms": 5000.0, "ok": False, "error": "ReadTimeoutError: timed out"}


def upgrade(*, during=(), before=()):
    """Polls every second: the node at OLD, cordoned at 10, not Ready at 12, back on NEW at 20; failures where asked."""
    polls = []
    for t in range(30):
        if t in during or t in before:
            polls.append(failed(t))
        elif t < 10:
            polls.append(answered(t))
        elif t < 20:
            polls.append(answered(t, cordoned=True, ready=t < 12, kubelet=OLD if t < 15 else NEW))
        else:
            polls.append(answered(t, kubelet=NEW))
    return polls


def test_window_spans_the_last_poll_before_the_cordon_to_the_node_back_on_the_new_version():
    found = api_poller.window(upgrade(), NEW)
    assert (found.start, found.end, found.seconds) == (9, 20, 11)
    assert found.polls == 12 and found.failures == [] and found.longest_gap_s == 1


def test_failures_inside_the_window_are_counted_and_widen_the_gap():
    found = api_poller.window(upgrade(during=(13, 14, 15)), NEW)
    assert [p["t"] for p in found.failures] == [13, 14, 15]
    assert found.longest_gap_s == 4
    assert found.failures_before == 0


def test_failures_before_the_window_are_reported_apart():
    """The control-plane node's upgrade restarts the API server before the second node's starts."""
    found = api_poller.window(upgrade(before=(3, 4)), NEW)
    assert found.failures == [] and found.failures_before == 2


def test_a_failure_right_after_the_last_uncordoned_poll_counts_for_the_window():
    found = api_poller.window(upgrade(during=(10,)), NEW)
    assert found.start == 9 and [p["t"] for p in found.failures] == [10]


def test_no_window_when_the_node_never_came_back_or_was_never_cordoned():
    assert api_poller.window(upgrade(), "v1.36.4") is None
    assert api_poller.window([answered(t) for t in range(5)], NEW) is None
    assert api_poller.window([], NEW) is None


def test_poll_once_records_the_node_state_or_the_error():
    node = {
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "False"}], "nodeInfo": {"kubeletVersion": NEW}},
    }
    record = api_poller.poll_once(lambda: node)
    assert record["ok"] and (record["cordoned"], record["ready"], record["kubelet"]) == (True, False, NEW)

    def refuse():
        raise ConnectionRefusedError("connection refused")

    record = api_poller.poll_once(refuse)
    assert not record["ok"] and record["error"] == "ConnectionRefusedError: connection refused"


def test_records_written_are_read_back_in_time_order(tmp_path):
    out = tmp_path / "polls.jsonl"
    out.write_text("".join(json.dumps(p) + "\n" for p in reversed(upgrade())))
    assert [p["t"] for p in api_poller.read_polls(out)] == list(range(30))


def test_interval_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        api_poller.main(["--kubeconfig", "k", "--node", "n", "--out", "o", "--interval", "0"])
    assert "--interval must be a positive number of seconds; got 0.0" in capsys.readouterr().err
