# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""CustomResourceDefinitions of the Token Factory objects (tokenfactory.io/v1alpha1), derived from domain.py.

Applied by the tokenfactory.spark.crds module. The OpenAPI schemas carry the same enums, formats and bounds as
the modules' checks (both come from domain.FIELDS), so bad objects are rejected server-side too.
"""

from __future__ import annotations

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import domain
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import named_enums

SCHEMA_KEYS = ("minimum", "maximum", "minLength", "maxLength", "maxItems", "description")
OPEN_STATUS = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def schema(entry, enums):
    """The OpenAPI v3 schema of one domain field entry."""
    out = {"type": entry["type"]}
    if entry["type"] == "integer":
        out["format"] = "int64"
    out.update(domain.FORMATS.get(entry.get("format"), {}))
    if "enum" in entry:
        out["enum"] = list(enums[entry["enum"]] if isinstance(entry["enum"], str) else entry["enum"])
    out.update({key: entry[key] for key in SCHEMA_KEYS if key in entry})
    if entry["type"] == "array":
        out["items"] = schema(entry["items"], enums)
    if entry.get("valuesType"):
        out["additionalProperties"] = {"type": entry["valuesType"]}
    if entry["type"] == "object" and "options" in entry:
        out.update(properties(entry["options"], enums))
    if entry.get("rules"):
        out["x-kubernetes-validations"] = [{"rule": rule, "message": message} for rule, message in entry["rules"]]
    return out


def properties(entries, enums):
    props = {e["field"]: schema(e, enums) for e in entries.values()}
    required = [e["field"] for e in entries.values() if e.get("required")]
    return {"properties": props, **({"required": required} if required else {})}


def spec_schema(kind):
    return {"type": "object", **properties(domain.FIELDS[kind], named_enums())}


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
    plural, short_names = domain.KINDS[kind]["plural"], domain.KINDS[kind]["shortNames"]
    columns = [{"name": name, "type": "string", "jsonPath": path} for name, path in PRINTER_COLUMNS[kind]]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{domain.GROUP}", "labels": {"app.kubernetes.io/part-of": "tokenfactory"}},
        "spec": {
            "group": domain.GROUP,
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
                    "name": domain.VERSION,
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
                                "spec": spec_schema(kind),
                                "status": OPEN_STATUS,
                            },
                        }
                    },
                }
            ],
        },
    }


def all_crds():
    return [crd(kind) for kind in domain.KINDS]
