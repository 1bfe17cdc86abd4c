# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Input checks that name the offending field and what is allowed; run before any write."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import domain


def _compiled(name):
    return re.compile(domain.FORMATS[name]["pattern"])


DNS_LABEL_RE = _compiled("dnsLabel")
DNS_SUBDOMAIN_RE = _compiled("dnsSubdomain")
QUANTITY_RE = _compiled("quantity")
DECIMAL_RE = _compiled("decimal")
URL_RE = _compiled("url")
ENV_NAME_RE = _compiled("envName")
SERVED_NAME_RE = _compiled("servedName")
IMAGE_TAG_RE = _compiled("imageTag")
CURRENCY_RE = _compiled("currency")
ABSOLUTE_PATH_RE = _compiled("absolutePath")
SOURCE_RE = {kind: re.compile(facts["source"]) for kind, facts in domain.PROVIDER_TYPES.items()}

BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL_SUFFIXES = {"m": Decimal("0.001"), "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
DECIMAL_SUFFIXES["E"] = 10**18


class ValidationError(Exception):
    """Bad input: `field` is the option path the user wrote, message says what is allowed."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.field = field


def dns_label(field, value):
    if not isinstance(value, str) or len(value) > 63 or not DNS_LABEL_RE.match(value):
        raise ValidationError(
            field, f"{value!r} is not a DNS-1123 label (lowercase a-z, 0-9 and '-', start/end alphanumeric, <= 63)"
        )
    return value


def dns_subdomain(field, value):
    if not isinstance(value, str) or len(value) > 253 or not DNS_SUBDOMAIN_RE.match(value):
        raise ValidationError(
            field, f"{value!r} is not a DNS-1123 name (lowercase a-z, 0-9, '-' and '.', start/end alphanumeric)"
        )
    return value


def parse_quantity(field, value):
    """Kubernetes quantity -> Decimal (bytes for memory, cores for CPU)."""
    text = str(value).strip()
    match = QUANTITY_RE.match(text)
    if not match:
        raise ValidationError(field, f"{value!r} is not a Kubernetes quantity (examples: 500m, 4, 16Gi, 20G)")
    suffix = match.group(2) or ""
    number = Decimal(text[: len(text) - len(suffix)])
    factor = BINARY_SUFFIXES.get(suffix) or DECIMAL_SUFFIXES[suffix]
    return number * factor


def quantity(field, value, minimum=None):
    amount = parse_quantity(field, value)
    if minimum is not None and amount < parse_quantity(field, minimum):
        raise ValidationError(field, f"{value} is below the minimum {minimum}")
    return str(value).strip()


def decimal_string(field, value):
    text = str(value).strip()
    if not DECIMAL_RE.match(text):
        raise ValidationError(field, f"{value!r} must be a non-negative decimal with at most 6 decimals, e.g. '0.15'")
    try:
        Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the regex already guarantees it
        raise ValidationError(field, f"{value!r} is not a decimal") from exc
    return text


def currency(field, value):
    if not isinstance(value, str) or not CURRENCY_RE.match(value):
        raise ValidationError(field, f"{value!r} must be an ISO 4217 code in capitals, e.g. USD or EUR")
    return value


def url(field, value):
    if not isinstance(value, str) or len(value) > 2048 or not URL_RE.match(value):
        raise ValidationError(field, f"{value!r} must be an http:// or https:// URL")
    return value.rstrip("/")


def env_name(field, value):
    if not ENV_NAME_RE.match(value):
        raise ValidationError(field, f"{value!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def served_name(field, value):
    if not isinstance(value, str) or len(value) > 256 or not SERVED_NAME_RE.match(value):
        raise ValidationError(field, f"{value!r} may contain only letters, digits and . _ / : - (<= 256)")
    return value


def image_tag(field, value):
    if not isinstance(value, str) or not IMAGE_TAG_RE.match(value):
        raise ValidationError(field, f"{value!r} is not an image tag (letters, digits, '_', '.', '-'; <= 128)")
    return value


def absolute_path(field, value):
    if not isinstance(value, str) or len(value) > 512 or not ABSOLUTE_PATH_RE.match(value) or "/../" in value + "/":
        raise ValidationError(field, f"{value!r} is not an absolute path (/dir/..., letters, digits, _ . + -; no '..')")
    return value


def model_source(field, value, provider_type):
    pattern, expected = SOURCE_RE[provider_type], domain.PROVIDER_TYPES[provider_type]["sourceExample"]
    if not isinstance(value, str) or not pattern.match(value):
        raise ValidationError(field, f"{value!r} is not {expected} (provider type {provider_type})")
    return value


def pem(field, value, kinds):
    """A PEM block of one of `kinds` (e.g. CERTIFICATE, PRIVATE KEY); the value itself is never echoed."""
    text = (value or "").strip()
    for kind in kinds:
        if re.search(rf"-----BEGIN {kind}-----.+-----END {kind}-----", text, re.S):
            return text + "\n"
    allowed = ", ".join(f"'-----BEGIN {kind}-----'" for kind in kinds)
    raise ValidationError(field, f"is not PEM; expected a block starting with {allowed}")


def check_tls_pair(cert_field, cert_pem, key_pem):
    """Certificate and key must belong together (checked when the cryptography library is present)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
    except ImportError:  # pragma: no cover - cryptography ships with ansible-core's usual environments
        return
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError as exc:
        raise ValidationError(cert_field, "the PEM block is not a parseable X.509 certificate") from exc
    try:
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ValidationError("tls_key", "the PEM block is not an unencrypted private key") from exc
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if cert.public_key().public_bytes(encoding, public) != key.public_key().public_bytes(encoding, public):
        raise ValidationError("tls_key", f"does not match the public key of {cert_field}")


def positive_range(field, value, low, high):
    if value is None or not low <= value <= high:
        raise ValidationError(field, f"{value} is out of range; allowed {low}..{high}")
    return value


def per_minute_limit(field, value):
    """A rate limit: 0..PER_MINUTE_MAX per minute, 0 = unlimited (the one meaning of every limit)."""
    if value is None or isinstance(value, bool) or not 0 <= value <= domain.PER_MINUTE_MAX:
        raise ValidationError(
            field, f"{value} is out of range; allowed 0..{domain.PER_MINUTE_MAX} per minute (0 = unlimited)"
        )
    return value


def length(field, value, minimum=None, maximum=None):
    if minimum is not None and len(value) < minimum:
        raise ValidationError(field, f"must have at least {minimum} character(s)")
    if maximum is not None and len(value) > maximum:
        raise ValidationError(field, f"is longer than {maximum} characters")
    return value


# The check of each domain.FORMATS name: check(field, value) -> normalized value, or ValidationError.
FORMAT_CHECKS = {
    "dnsLabel": dns_label,
    "dnsSubdomain": dns_subdomain,
    "quantity": quantity,
    "decimal": decimal_string,
    "currency": currency,
    "url": url,
    "envName": env_name,
    "servedName": served_name,
    "imageTag": image_tag,
    "absolutePath": absolute_path,
}


def drop_none(data):
    """Recursively remove None values and empty dicts (so they do not become apply-owned fields)."""
    if isinstance(data, dict):
        cleaned = {k: drop_none(v) for k, v in data.items() if v is not None}
        return {k: v for k, v in cleaned.items() if v != {}}
    if isinstance(data, list):
        return [drop_none(v) for v in data]
    return data
