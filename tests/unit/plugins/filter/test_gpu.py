import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.tokenfactory.spark.plugins.filter.gpu import compute_capability_to_sm


@pytest.mark.parametrize(
    ("value", "expected"),
    [("12.1", "sm_121"), ("9.0", "sm_90"), ([12, 1], "sm_121"), (" 8.9 ", "sm_89"), ("10.0", "sm_100")],
)
def test_compute_capability_to_sm(value, expected):
    assert compute_capability_to_sm(value) == expected


@pytest.mark.parametrize("value", ["121", "x.y", "", "12.10", "0.5", None])
def test_compute_capability_rejects_garbage(value):
    with pytest.raises(AnsibleFilterError, match="compute capability"):
        compute_capability_to_sm(value)
