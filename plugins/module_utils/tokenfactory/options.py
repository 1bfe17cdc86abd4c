# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Module options from the domain: argument specs, and options -> spec fields with every format and bound checked.

Both walk domain.FIELDS, the table the CRD schemas are built from too (crds.py), so a module accepts what the
API server accepts and says so naming the option the user wrote.
"""

from __future__ import annotations

import re

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import domain
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    FORMAT_CHECKS,
    ValidationError,
    length,
    per_minute_limit,
    positive_range,
    quantity,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES

ANSIBLE_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}
# Option names Ansible suspects of holding secrets: an entry marked "secret" is no_log, any other one (a count, a
# name, a reference) says no_log=False explicitly.
LOOKS_SECRET = re.compile(r"pass(?!ive)|secret|token|key", re.I)


def named_enums():
    """Enums the domain names instead of listing: the engines are the engines registry."""
    return {"engines": list(ENGINES)}


def choices(entry):
    enum = entry["enum"]
    return list(named_enums()[enum]) if isinstance(enum, str) else list(enum)


def option_spec(name, entry, nested=False):
    spec = {"type": entry.get("optionType") or ANSIBLE_TYPES[entry["type"]]}
    if spec["type"] == "list":
        spec["elements"] = ANSIBLE_TYPES[entry["items"]["type"]]
    if "enum" in entry:
        spec["choices"] = choices(entry)
    if "default" in entry:
        spec["default"] = entry["default"]
    elif nested and entry.get("required"):
        spec["required"] = True
    if spec["type"] == "dict" and "options" in entry:
        spec["options"] = argument_spec(entry["options"], nested=True)
    if entry.get("secret") or LOOKS_SECRET.search(name):
        spec["no_log"] = bool(entry.get("secret"))
    return spec


def argument_spec(entries, nested=False):
    """Ansible argument spec of domain field entries (crdOnly entries are set by the module itself)."""
    return {name: option_spec(name, e, nested) for name, e in entries.items() if not e.get("crdOnly")}


def kind_options(kind, skip=()):
    return argument_spec({k: v for k, v in domain.FIELDS[kind].items() if k not in skip})


def check_value(path, entry, value):
    """One option value -> its spec field value, checked against the entry's format and bounds."""
    kind = entry["type"]
    if kind == "string":
        value = str(value)
        if entry.get("format"):
            value = FORMAT_CHECKS[entry["format"]](path, value)
        if "atLeast" in entry:
            value = quantity(path, value, minimum=entry["atLeast"])
        return length(path, value, entry.get("minLength"), entry.get("maxLength"))
    if kind in ("integer", "number"):
        if entry.get("unit") == "perMinute":
            return per_minute_limit(path, value)
        return positive_range(path, value, entry.get("minimum"), entry.get("maximum"))
    if kind == "array":
        if len(value) > entry.get("maxItems", len(value)):
            raise ValidationError(path, f"has {len(value)} items; at most {entry['maxItems']} allowed")
        return [check_value(f"{path}[{i}]", entry["items"], item) for i, item in enumerate(value)]
    if kind == "object" and "options" in entry:
        return to_fields(entry["options"], value, f"{path}.")
    if kind == "object":
        return {key: str(item) for key, item in value.items()}
    return value


def to_fields(entries, params, prefix="", skip=()):
    """Spec fields of the given options (None and '' mean not set; structured objects left empty are dropped)."""
    fields = {}
    for name, entry in entries.items():
        if name in skip or entry.get("crdOnly"):
            continue
        value = params.get(name)
        if value is None or value == "":
            continue
        value = check_value(f"{prefix}{name}", entry, value)
        if value == {} and "options" in entry:
            continue
        fields[entry["field"]] = value
    return fields


def kind_fields(kind, params, skip=()):
    return to_fields(domain.FIELDS[kind], params, skip=skip)
