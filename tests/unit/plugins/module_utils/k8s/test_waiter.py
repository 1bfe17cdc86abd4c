"""k8s.waiter.rollout: done only when every replica runs the current spec and is available (kubectl rollout
status and kubernetes.core's waiter); status snapshots as the controllers write them during a rollout."""

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import rollout


def deployment(desired=2, generation=2, **status):
    return {
        "kind": "Deployment",
        "metadata": {"generation": generation},
        "spec": {"replicas": desired},
        "status": status,
    }


@pytest.mark.parametrize(
    ("status", "waiting_for"),
    [
        ({}, "observe the new spec"),  # just created: the controller has written no status yet
        (  # the old replicas are ready, the new spec is not observed yet (ready counts alone say "done")
            {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2},
            "observe the new spec",
        ),
        (  # rolling update: one new replica, two old ones still serving
            {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3},
            "1 of 2 replicas updated",
        ),
        (  # every replica updated, one old one still terminating
            {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2},
            "1 old replica(s) pending termination",
        ),
        (  # new replicas exist but are not available yet
            {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1,
             "unavailableReplicas": 1},
            "1 of 2 updated replicas available",
        ),
    ],
)  # fmt: skip
def test_deployment_rollout_in_progress(status, waiting_for):
    state = rollout(deployment(**status))
    assert not state.done and not state.failed
    assert waiting_for in state.message


def test_deployment_rollout_done():
    status = {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}
    state = rollout(deployment(**status))
    assert state.done and state.message == "2/2 updated and available"


def test_deployment_past_its_progress_deadline_failed():
    status = {
        "observedGeneration": 2,
        "replicas": 2,
        "updatedReplicas": 1,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
    }
    state = rollout(deployment(**status))
    assert state.failed and not state.done


def statefulset(**status):
    return {"kind": "StatefulSet", "metadata": {"generation": 3}, "spec": {"replicas": 2}, "status": status}


@pytest.mark.parametrize(
    ("status", "done"),
    [
        ({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2, "replicas": 2}, False),
        (  # all ready, but one rank still runs the old revision
            {"observedGeneration": 3, "readyReplicas": 2, "updatedReplicas": 1, "replicas": 2,
             "currentRevision": "r1", "updateRevision": "r2"},
            False,
        ),
        (
            {"observedGeneration": 3, "readyReplicas": 2, "updatedReplicas": 2, "replicas": 2,
             "currentRevision": "r2", "updateRevision": "r2"},
            True,
        ),
    ],
)  # fmt: skip
def test_statefulset_rollout(status, done):
    assert rollout(statefulset(**status)).done is done
