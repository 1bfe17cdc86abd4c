"""claim_storage_class: a pvc is made only where a StorageClass will provision it; else the error names the
variables."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.tokenfactory.spark.plugins.filter.storage import claim_storage_class


def storage_class(name, default=None):
    annotations = {default: "true"} if default else {}
    return {"metadata": {"name": name, "annotations": annotations}}


DEFAULT = "storageclass.kubernetes.io/is-default-class"


def test_the_named_class_when_it_exists():
    assert claim_storage_class([storage_class("fast"), storage_class("slow", DEFAULT)], "fast") == "fast"


def test_the_default_class_when_none_is_named():
    classes = [storage_class("fast"), storage_class("local-path", DEFAULT)]
    assert claim_storage_class(classes, "") == "local-path"
    assert claim_storage_class([storage_class("old", "storageclass.beta.kubernetes.io/is-default-class")]) == "old"


def test_a_bare_cluster_fails_naming_both_variables():
    with pytest.raises(AnsibleFilterError) as failed:
        claim_storage_class([], "", "gateway_postgres_storage_class", "gateway_postgres_storage_mode")
    message = str(failed.value)
    assert message.startswith("gateway_postgres_storage_mode=pvc needs a StorageClass")
    assert "(StorageClasses: none)" in message and "gateway_postgres_storage_mode=host_path" in message


def test_classes_without_a_default_are_listed():
    with pytest.raises(AnsibleFilterError, match=r"no default one \(StorageClasses: a, b\)\. Set x_class"):
        claim_storage_class([storage_class("b"), storage_class("a", None)], "", "x_class", "x_mode")


def test_a_missing_named_class_fails_naming_it():
    with pytest.raises(AnsibleFilterError, match=r"^x_class='gone': no such StorageClass in the cluster \(it has: a\)"):
        claim_storage_class([storage_class("a", DEFAULT)], "gone", "x_class", "x_mode")
