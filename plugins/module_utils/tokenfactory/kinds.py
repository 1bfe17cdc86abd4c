# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The Token Factory kinds as REST resource types, and new objects of them (names from domain.py)."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import ResourceType
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import API_VERSION, KINDS


def _kind(kind):
    return ResourceType(API_VERSION, kind, KINDS[kind]["plural"])


COMPUTE_CLUSTER = _kind("ComputeCluster")
ENDPOINT = _kind("Endpoint")
PROVIDER = _kind("Provider")
MODEL = _kind("Model")
MODEL_DEPLOYMENT = _kind("ModelDeployment")


def tf_object(kind, name, namespace, spec, labels=None):
    metadata = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}
