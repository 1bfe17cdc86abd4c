# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""ModelDeployment options -> a validated spec (no I/O); every check names the option the user wrote."""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    env_name,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import FIELDS
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.workload import RESERVED_ENV
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import check_value, kind_fields

DNS_1035 = "abcdefghijklmnopqrstuvwxyz"


def service_name(field, value):
    """The name becomes a Service name: DNS-1035 label (starts with a letter, <= 63)."""
    if len(value) > 63 or value[:1] not in DNS_1035 or not value.replace("-", "").isalnum() or value != value.lower():
        raise ValidationError(
            field, f"{value!r} must be a DNS-1035 label (lowercase letters, digits, '-', start with a letter, <= 63)"
        )
    if value.endswith("-"):
        raise ValidationError(field, f"{value!r} must not end with '-'")
    return value


def _extra_args(args, engine):
    args = check_value("extra_args", FIELDS["ModelDeployment"]["extra_args"], args)
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in engine.MANAGED_FLAGS:
            raise ValidationError(
                f"extra_args[{index}]",
                f"{flag} is set by the module from {engine.MANAGED_FLAGS[flag]}; remove it from extra_args",
            )
    return args


def _env(env):
    out = []
    for key in sorted(env):
        env_name(f"env.{key}", key)
        if key in RESERVED_ENV:
            raise ValidationError(
                f"env.{key}", f"is managed by the module (reserved: {', '.join(sorted(RESERVED_ENV))})"
            )
        out.append({"name": key, "value": str(env[key])})
    return out


def deployment_spec(params):
    """Validated ModelDeployment spec from module options (ValidationError names the option)."""
    spec = kind_fields("ModelDeployment", params, skip=("extra_args", "env"))
    spec["extraArgs"] = _extra_args(params["extra_args"], ENGINES[spec["engine"]])
    spec["env"] = _env(params["env"])
    if len(set(spec["tenants"])) != len(spec["tenants"]):
        raise ValidationError("tenants", "lists a tenant more than once")
    scaling = spec.get("autoscaling")
    if scaling and scaling["minReplicas"] > scaling["maxReplicas"]:
        raise ValidationError(
            "autoscaling", f"min_replicas {scaling['minReplicas']} must be <= max_replicas {scaling['maxReplicas']}"
        )
    cache = spec.get("weightsCache", {})
    if cache.get("type") == "persistentVolumeClaim" and not cache.get("claimName"):
        raise ValidationError("weights_cache.claim_name", "is required with weights_cache.type persistentVolumeClaim")
    budget = spec.get("disruptionBudget")
    if budget and budget["minAvailable"] > max(spec["replicas"], (scaling or {}).get("minReplicas", 0)):
        raise ValidationError(
            "disruption_budget.min_available", f"{budget['minAvailable']} exceeds replicas {spec['replicas']}"
        )
    return spec
