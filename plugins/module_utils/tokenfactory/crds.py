# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""CustomResourceDefinitions of the Token Factory objects (tokenfactory.io/v1alpha1), as data.

Applied by the tokenfactory.spark.crds module; `python -m` is not needed: ansible-doc / docs/modules.md
explain how to dump them for kubectl users. The OpenAPI schemas reject bad objects server-side too.
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import CRD, GROUP, VERSION, conditions

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
DECIMAL = r"^[0-9]+(\.[0-9]{1,6})?$"
CURRENCY = r"^[A-Z]{3}$"
ENGINES = ["vllm", "nim", "dynamo"]
PROVIDER_TYPES = ["huggingface", "ngc", "s3"]
DTYPES = ["float32", "bfloat16", "float16", "fp8", "nvfp4", "int4"]
KV_CACHE_DTYPES = ["auto", "fp8"]
PHASES = ["Pending", "Progressing", "Ready", "Failed", "Deleting"]


def string(pattern=None, enum=None, max_length=None, min_length=None, description=None):
    schema = {"type": "string"}
    for key, value in (("pattern", pattern), ("enum", enum), ("maxLength", max_length), ("minLength", min_length)):
        if value is not None:
            schema[key] = value
    if description:
        schema["description"] = description
    return schema


def integer(minimum=None, maximum=None, description=None):
    schema = {"type": "integer", "format": "int64"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    if description:
        schema["description"] = description
    return schema


def obj(properties, required=(), description=None, rules=()):
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if description:
        schema["description"] = description
    if rules:
        schema["x-kubernetes-validations"] = [{"rule": rule, "message": message} for rule, message in rules]
    return schema


def string_map():
    return {"type": "object", "additionalProperties": {"type": "string"}}


def array(items, max_items=None):
    schema = {"type": "array", "items": items}
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


def limits():
    return obj(
        {
            "requestsPerMinute": integer(1, 10_000_000),
            "tokensPerMinute": integer(1, 10_000_000_000),
        }
    )


OPEN_STATUS = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

SPECS = {
    "ComputeCluster": obj(
        {
            "profile": string(enum=["gpu", "cpu"], description="gpu needs an allocatable GPU; cpu allows none"),
            "nodeSelector": string_map(),
            "description": string(max_length=256),
        },
        required=["profile"],
    ),
    "Endpoint": obj(
        {
            "hostname": string(pattern=DNS_SUBDOMAIN, max_length=253),
            "port": integer(1, 65535),
            "computeCluster": string(pattern=DNS_SUBDOMAIN, max_length=253),
            "gateway": obj(
                {
                    "serviceName": string(pattern=DNS_LABEL, max_length=63),
                    "namespace": string(pattern=DNS_LABEL, max_length=63),
                    "port": integer(1, 65535),
                },
                required=["serviceName"],
            ),
            "tls": obj({"secretName": string(pattern=DNS_SUBDOMAIN, max_length=253)}, required=["secretName"]),
            "externalURL": string(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=2048),
        },
        required=["hostname", "computeCluster", "gateway"],
    ),
    "Provider": obj(
        {
            "type": string(enum=PROVIDER_TYPES),
            "displayName": string(max_length=128),
            "url": string(pattern=r"^https?://[^\s]+$", max_length=2048),
            "credentialsSecret": obj(
                {"name": string(pattern=DNS_SUBDOMAIN, max_length=253), "key": string(min_length=1, max_length=253)},
                required=["name", "key"],
            ),
        },
        required=["type"],
    ),
    "Model": obj(
        {
            "provider": string(pattern=DNS_SUBDOMAIN, max_length=253),
            "source": string(min_length=1, max_length=1024),
            "revision": string(min_length=1, max_length=128),
            "servedName": string(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$", max_length=256),
            "architecture": obj(
                {
                    "parametersBillions": string(pattern=DECIMAL),
                    "numLayers": integer(1, 1024),
                    "numKVHeads": integer(1, 1024),
                    "headDim": integer(1, 4096),
                    "maxContextLength": integer(1, 10_000_000),
                    "dtype": string(enum=DTYPES),
                },
                required=["parametersBillions", "numLayers", "numKVHeads", "headDim", "maxContextLength", "dtype"],
            ),
        },
        required=["provider", "source", "servedName", "architecture"],
    ),
    "ModelDeployment": obj(
        {
            "model": string(pattern=DNS_SUBDOMAIN, max_length=253),
            "endpoint": string(pattern=DNS_SUBDOMAIN, max_length=253),
            "engine": string(enum=ENGINES),
            "image": string(min_length=1, max_length=512),
            "version": string(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"),
            "replicas": integer(0, 64),
            "gpusPerReplica": integer(1, 64),
            "gpuType": string(min_length=1, max_length=128),
            "resources": obj(
                {
                    side: obj({"cpu": string(pattern=QUANTITY), "memory": string(pattern=QUANTITY)})
                    for side in ("requests", "limits")
                }
            ),
            "weightsVolumeSize": string(pattern=QUANTITY),
            "contextLength": integer(16, 10_000_000),
            "gpuMemoryUtilization": {"type": "number", "minimum": 0.05, "maximum": 0.95},
            "kvCacheDtype": string(enum=KV_CACHE_DTYPES),
            "prefixCaching": {"type": "boolean"},
            "extraArgs": array(string(min_length=1, max_length=1024), max_items=64),
            "env": array(obj({"name": string(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"), "value": string()}, ["name"])),
            "autoscaling": obj(
                {
                    "minReplicas": integer(1, 64),
                    "maxReplicas": integer(1, 64),
                    "targetWaitingRequests": integer(1, 10_000),
                },
                required=["minReplicas", "maxReplicas"],
                rules=[("self.minReplicas <= self.maxReplicas", "minReplicas must be <= maxReplicas")],
            ),
            "disruptionBudget": obj({"minAvailable": integer(0, 64)}, required=["minAvailable"]),
            "tenants": array(string(pattern=DNS_SUBDOMAIN, max_length=253), max_items=1000),
            "rateLimits": obj({scope: limits() for scope in ("perKey", "perTenant", "perDeployment")}),
            "pricing": obj(
                {
                    "currency": string(pattern=CURRENCY),
                    "inputPer1M": string(pattern=DECIMAL),
                    "outputPer1M": string(pattern=DECIMAL),
                },
                required=["currency", "inputPer1M", "outputPer1M"],
            ),
            "upstreamURL": string(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=2048),
        },
        required=["model", "endpoint", "engine", "replicas", "gpusPerReplica", "gpuType"],
    ),
}

PLURALS = {
    "ComputeCluster": ("computeclusters", ["cc"]),
    "Endpoint": ("endpoints", ["tfep"]),
    "Provider": ("providers", ["tfprov"]),
    "Model": ("models", ["tfmodel"]),
    "ModelDeployment": ("modeldeployments", ["md"]),
}

PRINTER_COLUMNS = {
    "ComputeCluster": [("Phase", ".status.phase"), ("GPUs", ".status.totals.gpus")],
    "Endpoint": [("Host", ".spec.hostname"), ("Base URL", ".status.baseURL")],
    "Provider": [("Type", ".spec.type")],
    "Model": [("Served name", ".spec.servedName"), ("Source", ".spec.source")],
    "ModelDeployment": [
        ("Phase", ".status.phase"),
        ("Model", ".spec.model"),
        ("Engine", ".spec.engine"),
        ("Upstream", ".status.upstreamURL"),
    ],
}


def crd(kind):
    plural, short_names = PLURALS[kind]
    columns = [{"name": name, "type": "string", "jsonPath": path} for name, path in PRINTER_COLUMNS[kind]]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "tokenfactory"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["tokenfactory"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": SPECS[kind],
                                "status": OPEN_STATUS,
                            },
                        }
                    },
                }
            ],
        },
    }


def all_crds():
    return [crd(kind) for kind in SPECS]


def established(client, name):
    """check() for KubeClient.wait_for: (True, None) once CRD `name` is Established (conditions may be null)."""

    def check():
        status = {c["type"]: c["status"] for c in conditions(client.get(CRD, name))}
        done = status.get("Established") == "True"
        return done, None if done else f"waiting for CRD {name} to be Established"

    return check
