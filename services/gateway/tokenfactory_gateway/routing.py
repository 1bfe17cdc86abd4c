"""Routing table built from Token Factory objects (Model + ModelDeployment, group tokenfactory.io).

One converter serves both sources (a static file of objects, or the Kubernetes API), so the
routing table, prices and limits always come from the same object shape.
"""

from __future__ import annotations

import dataclasses
import itertools
from decimal import Decimal, InvalidOperation

from . import domain

ALL_TENANTS = "*"


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    requests_per_minute: int = domain.UNLIMITED
    tokens_per_minute: int = domain.UNLIMITED

    @classmethod
    def from_spec(cls, spec, where) -> Limits:
        spec = spec or {}
        values = {}
        for field, key in domain.LIMIT_FIELDS.items():
            raw = spec.get(key, domain.UNLIMITED) or domain.UNLIMITED
            if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= domain.PER_MINUTE_MAX:
                raise ValueError(f"{where}.{key} must be an integer in 0..{domain.PER_MINUTE_MAX}, got {raw!r}")
            values[field] = raw
        return cls(**values)

    def __bool__(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)


@dataclasses.dataclass(frozen=True, slots=True)
class Price:
    currency: str = domain.CURRENCY_DEFAULT
    input_per_1m: Decimal = Decimal(0)
    output_per_1m: Decimal = Decimal(0)

    @classmethod
    def from_spec(cls, spec, where) -> Price:
        spec = spec or {}
        values = {}
        for field in ("input_per_1m", "output_per_1m"):
            key = domain.PRICING_FIELDS[field]
            raw = spec.get(key, "0")
            try:
                value = Decimal(str(raw))
            except InvalidOperation:
                raise ValueError(f"{where}.{key} must be a decimal string like '0.15', got {raw!r}") from None
            if not value.is_finite() or value < 0:
                raise ValueError(f"{where}.{key} must be a non-negative decimal, got {raw!r}")
            values[field] = value
        currency = spec.get(domain.PRICING_FIELDS["currency"], domain.CURRENCY_DEFAULT)
        return cls(currency=str(currency), **values)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        return (prompt_tokens * self.input_per_1m + completion_tokens * self.output_per_1m) / 1_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class Deployment:
    name: str  # namespace/name of the ModelDeployment
    model: str  # served model name (the OpenAI `model` field)
    upstream: str  # base URL without the trailing /v1
    endpoint: str = ""
    engine: str = domain.ENGINE_DEFAULT  # spec.engine: how the engine's OpenAI server reports usage
    tenants: frozenset = frozenset()
    per_key: Limits = Limits()
    per_tenant: Limits = Limits()
    per_deployment: Limits = Limits()
    price: Price = Price()

    def shared_with(self, tenant: str) -> bool:
        return tenant in self.tenants or ALL_TENANTS in self.tenants

    def describe(self) -> dict:
        return {
            "name": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "engine": self.engine,
            "upstream": self.upstream,
            "tenants": sorted(self.tenants),
            "rate_limits": {
                scope: dataclasses.asdict(getattr(self, scope)) for scope in domain.DEPLOYMENT_LIMIT_SCOPES
            },
            "pricing": {
                "currency": self.price.currency,
                "input_per_1m": str(self.price.input_per_1m),
                "output_per_1m": str(self.price.output_per_1m),
            },
        }


def deployments_from_objects(objects, endpoint: str = "") -> list[Deployment]:
    """Convert Model and ModelDeployment objects (dicts) into routable deployments.

    Only deployments in a routable phase (Ready: every replica updated and available) with an upstream URL are
    routed; Pending (queued), Progressing and Failed ones are left out.
    """
    served_names = {}
    for obj in objects:
        if obj.get("kind") == "Model":
            meta = obj.get("metadata", {})
            key = (meta.get("namespace", ""), meta.get("name"))
            served_names[key] = (obj.get("spec") or {}).get(domain.FIELDS["servedName"]) or meta.get("name")
    result = []
    for obj in objects:
        if obj.get("kind") != "ModelDeployment":
            continue
        meta, spec, status = obj.get("metadata", {}), obj.get("spec") or {}, obj.get("status") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        where = f"ModelDeployment {namespace}/{name}"
        if endpoint and spec.get("endpoint") != endpoint:
            continue
        upstream = spec.get(domain.FIELDS["upstreamURL"]) or status.get("upstreamURL")
        if not upstream or status.get("phase") not in domain.ROUTABLE_PHASES:
            continue
        model = status.get("servedModelName") or served_names.get((namespace, spec.get("model"))) or spec.get("model")
        if not model:
            raise ValueError(f"{where}: spec.model is required")
        limits = spec.get(domain.FIELDS["rateLimits"]) or {}
        scopes = {
            scope: Limits.from_spec(limits.get(field), f"{where} spec.rateLimits.{field}")
            for scope, field in domain.DEPLOYMENT_LIMIT_SCOPES.items()
        }
        result.append(
            Deployment(
                name=f"{namespace}/{name}" if namespace else name,
                model=model,
                upstream=normalise_upstream(upstream),
                endpoint=spec.get("endpoint", ""),
                engine=spec.get(domain.FIELDS["engine"]) or domain.ENGINE_DEFAULT,
                tenants=frozenset(spec.get(domain.FIELDS["tenants"]) or ()),
                **scopes,
                price=Price.from_spec(spec.get(domain.FIELDS["pricing"]), f"{where} spec.pricing"),
            )
        )
    return result


def normalise_upstream(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class RoutingTable:
    """Model name -> deployments; picks round-robin among the deployments shared with a tenant."""

    def __init__(self, deployments=()):
        self.deployments = tuple(deployments)
        self._by_model: dict[str, tuple[Deployment, ...]] = {}
        for dep in self.deployments:
            self._by_model[dep.model] = (*self._by_model.get(dep.model, ()), dep)
        self._turn = itertools.count()

    def resolve(self, model: str, tenant: str, granted: frozenset) -> Deployment | None:
        candidates = self._by_model.get(model)
        if not candidates:
            return None
        if model not in granted:
            candidates = [d for d in candidates if d.shared_with(tenant)]
            if not candidates:
                return None
        return candidates[next(self._turn) % len(candidates)]

    def models_for(self, tenant: str, granted: frozenset) -> list[str]:
        return sorted(
            model
            for model, deps in self._by_model.items()
            if model in granted or any(d.shared_with(tenant) for d in deps)
        )
