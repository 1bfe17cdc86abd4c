# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Which architecture facts a Model gets: the `architecture` option, else the facts cached in its status, else
derived from its files read through the Provider, else (only when the files cannot be reached) the built-in table.
"""

from __future__ import annotations

import base64
from decimal import Decimal

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import SECRET
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.capacity import known_architecture
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import (
    FIELDS,
    MODEL_ARCHITECTURE_FROM,
    MODEL_STATUS,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.model_config import (
    CONFIG,
    ConfigError,
    derive,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.model_files import (
    FetchError,
    ModelFiles,
    UnsupportedSource,
    file_base,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import to_fields

ARCHITECTURE_OPTIONS = FIELDS["Model"]["architecture"]["options"]
BUILT_IN = "built-in"
HOW_TO_FIX = "pass architecture (values from the model's config.json)"


def checked(option_value, prefix):
    facts = to_fields(ARCHITECTURE_OPTIONS, option_value, prefix)
    if Decimal(facts["parametersBillions"]) <= 0:
        raise ValidationError(f"{prefix}parameters_billions", "must be greater than 0")
    return facts


def provider_token(client, provider, no_log_values):
    """The Provider's credential (decoded from its Secret), registered as a value Ansible must never print."""
    ref = provider["spec"].get("credentialsSecret")
    if not ref:
        return None
    meta = provider["metadata"]
    secret = client.get(SECRET, ref["name"], meta["namespace"])
    encoded = (secret or {}).get("data", {}).get(ref["key"])
    if encoded is None:
        raise ValidationError(
            "provider", f"Provider {meta['name']!r} refers to Secret {ref['name']} key {ref['key']}, which is missing"
        )
    token = base64.b64decode(encoded).decode().strip()
    no_log_values.add(token)
    return token or None


def derived_from(provider, source, revision):
    """What cached facts were derived from; a re-run with the same values reuses them."""
    values = (provider["metadata"]["name"], source, revision, provider["spec"].get("url"))
    return {key: value for key, value in zip(MODEL_ARCHITECTURE_FROM[:-1], values, strict=True) if value}


def cached(current, key):
    status = (current or {}).get("status") or {}
    origin = dict(status.get(MODEL_STATUS["from"]) or {})
    origin.pop(MODEL_ARCHITECTURE_FROM[-1], None)
    facts = status.get(MODEL_STATUS["architecture"])
    return facts if facts and origin == key else None


def fetch(tfm, provider, source, revision):
    """(architecture option, origin) read through the Provider; FetchError/UnsupportedSource when it cannot be read."""
    spec = provider["spec"]
    base = file_base(spec["type"], source, revision, spec.get("url"))
    token = provider_token(tfm.client, provider, tfm.module.no_log_values)
    files = ModelFiles(base, token)
    tfm.note(f"reading the architecture of {source} from {files.url(CONFIG)}")
    return derive(files), files.url(CONFIG)


def resolve(tfm, given, provider, source, revision, current):
    """(spec.architecture, status to write or None)."""
    if given is not None:
        return checked(given, "architecture."), None
    key = derived_from(provider, source, revision)
    facts = cached(current, key)
    if facts is not None:
        return facts, None
    known = known_architecture(source)
    try:
        option, origin = fetch(tfm, provider, source, revision)
        facts = checked(option, f"architecture (derived from {origin}).")
    except ConfigError as exc:
        raise ValidationError("architecture", f"cannot derive it: {exc}; {HOW_TO_FIX}") from None
    except (FetchError, UnsupportedSource) as exc:
        answered = getattr(exc, "answered", False)
        if answered or known is None:
            field = "source" if answered else "architecture"
            also = "" if answered else "; no built-in facts either"
            message = f"cannot derive the architecture of {source!r}: {exc}{also}; {HOW_TO_FIX}"
            raise ValidationError(field, message) from None
        tfm.module.warn(f"architecture of {source}: using the built-in facts ({exc})")
        facts, origin = known, BUILT_IN
    status_from = {**key, MODEL_ARCHITECTURE_FROM[-1]: origin}
    return facts, {MODEL_STATUS["architecture"]: facts, MODEL_STATUS["from"]: status_from}
