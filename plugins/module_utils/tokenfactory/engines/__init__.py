# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The inference engines behind one interface, one module each; ENGINES is the engine enum of the domain.

An engine module defines NAME, DEFAULT_IMAGE (repository, tag), REQUIRED_CRD (None or plural/group/purpose),
MULTINODE (may one replica span nodes), RUNNING_USAGE (its OpenAI server takes stream_options.continuous_usage_stats;
the gateway reads it from domain.gateway_view), CHILD_TYPES, MANAGED_FLAGS (engine flags the module derives) and
    layout(spec, plan, name)          -> {"workload": {kind, name}, "children": ["Kind/name", ...], "service": name}
    possible_children(name)           -> [(ResourceType, name)] it may ever have created (pruning)
    render(md, model, provider, plan) -> the children, in plan["children"] order
    observe(client, md, plan)         -> {"phase", "message", "nodes", "readyReplicas"}
    upstream_url(md, plan)            -> the in-cluster URL of its OpenAI server
Adding an engine: a new module here, its name in ENGINES below, its tests, the gateway's copy rewritten by
scripts/write-gateway-domain, and the documented choices of model_deployment's `engine` (which sanity checks
against the argument spec).
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import dynamo, nim, vllm

ENGINES = {engine.NAME: engine for engine in (vllm, nim, dynamo)}


def engine_of(spec):
    return ENGINES[spec["engine"]]


def possible_children(name):
    """Every (type, name) any engine may have created for a deployment `name` (to prune after an engine switch)."""
    return [child for engine in ENGINES.values() for child in engine.possible_children(name)]


def render(md, model, provider, plan):
    """Every child of a ModelDeployment, in apply order: the one place rendering starts."""
    return engine_of(md["spec"]).render(md, model, provider, plan)


def upstream_url(md, plan):
    """Where the gateway sends requests: spec.upstreamURL when set, else the engine's in-cluster Service."""
    return md["spec"].get("upstreamURL") or engine_of(md["spec"]).upstream_url(md, plan)
