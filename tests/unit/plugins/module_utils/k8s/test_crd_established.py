"""k8s.waiter.crd_established: the wait for a CRD, including the moment after create when conditions are null."""

import pytest

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import CRD
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import crd_established


class OneObject:
    """Stands in for KubeClient.get only: the check's input is one API object (the lab tests use the real API)."""

    def __init__(self, obj):
        self.obj = obj

    def get(self, rtype, name):
        assert rtype is CRD and name == "widgets.example.com"
        return self.obj


@pytest.mark.parametrize(
    "obj",
    [
        None,  # not created yet
        {"metadata": {}},  # no status
        {"status": None},
        {"status": {"conditions": None}},  # what the API server returns right after create
        {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]}},
        {"status": {"conditions": [{"type": "Established", "status": "False"}]}},
    ],
)
def test_not_established_yet(obj):
    done, message = crd_established(OneObject(obj), "widgets.example.com")()
    assert not done
    assert message == "waiting for CRD widgets.example.com to be Established"


def test_established():
    obj = {
        "status": {
            "conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]
        }
    }
    assert crd_established(OneObject(obj), "widgets.example.com")() == (True, None)
