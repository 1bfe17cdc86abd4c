"""The one progress line of every long wait, and the newest event about what is waited for."""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.progress import (
    LINE_CHARS,
    last_event,
    progress_line,
)


def test_line_names_phase_replicas_reason_and_event():
    line = progress_line(
        "ModelDeployment tf/qwen",
        "Progressing",
        0,
        2,
        "0 of 2 updated replicas available",
        "Pod/qwen-1 Pulling: Pulling image x",
    )
    assert line == (
        "ModelDeployment tf/qwen: Progressing, 0/2 ready - 0 of 2 updated replicas available"
        " (last event: Pod/qwen-1 Pulling: Pulling image x)"
    )


def test_line_without_replicas_or_detail():
    assert progress_line("GPU nodes", "Ready") == "GPU nodes: Ready"
    assert progress_line("Deployment a/b", "Pending", None, 1) == "Deployment a/b: Pending, 0/1 ready"


def test_long_line_is_cut():
    line = progress_line("x", "Failed", 0, 1, "log " * 500)
    assert len(line) == LINE_CHARS and line.endswith("...")


class Events:
    def __init__(self, events=None, error=None):
        self.events, self.error = events or [], error

    def list(self, rtype, namespace=None, label_selector=None):
        assert rtype.kind == "Event"
        if self.error:
            raise self.error
        return self.events


def event(name, reason, message, when, kind="Pod", key="lastTimestamp"):
    return {
        "metadata": {"name": f"{name}.{when}"},
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "message": message,
        key: when,
    }


def test_newest_event_about_the_named_objects_wins():
    client = Events(
        [
            event("qwen-1", "Scheduled", "assigned tf/qwen-1 to spark-01", "2026-12-04T10:00:00Z"),
            event("qwen-1", "BackOff", "Back-off pulling image", "2026-12-04T10:02:00Z"),
            event("other-1", "Killing", "not ours", "2026-12-04T10:05:00Z"),
            event("qwen", "ScalingReplicaSet", "Scaled up", "2026-12-04T10:01:00.000000Z", "Deployment", "eventTime"),
        ]
    )
    assert last_event(client, "tf", ["qwen", "qwen-1"]) == "Pod/qwen-1 BackOff: Back-off pulling image"
    assert last_event(client, "tf", ["nothing"]) == ""


def test_events_are_best_effort():
    assert last_event(Events(error=K8sError(403, "events is forbidden")), "tf", ["qwen"]) == ""
