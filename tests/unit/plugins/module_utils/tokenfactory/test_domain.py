"""One domain schema: the CRDs, the modules' options and checks, and the gateway all read domain.py."""

import importlib
import json
import pathlib

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import domain
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.crds import all_crds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import deployment_spec
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import choices, kind_options
from tokenfactory_gateway import domain as gateway_domain
from tokenfactory_gateway import store
from tokenfactory_gateway.errors import ApiError
from tokenfactory_gateway.routing import Limits, deployments_from_objects

from tests.unit.plugins.module_utils.tokenfactory.samples import md_params

ROOT = pathlib.Path(__file__).resolve().parents[5]
GATEWAY_COPY = ROOT / "services/gateway/tokenfactory_gateway/domain.json"


def test_gateway_copy_is_generated_from_the_domain():
    expected = json.dumps(domain.gateway_view(ENGINES), indent=2, sort_keys=True) + "\n"
    assert GATEWAY_COPY.read_text() == expected, "stale: run .venv/bin/python scripts/write-gateway-domain"


def test_gateway_reads_the_same_facts():
    assert (gateway_domain.GROUP, gateway_domain.VERSION) == (domain.GROUP, domain.VERSION)
    plurals = {k: domain.KINDS[k]["plural"] for k in ("Model", "ModelDeployment")}
    assert plurals == gateway_domain.PLURALS
    assert gateway_domain.ROUTABLE_PHASES == {"Ready"} == set(domain.ROUTABLE_PHASES)
    assert gateway_domain.PER_MINUTE_MAX == domain.PER_MINUTE_MAX
    crd = {c["spec"]["names"]["kind"]: c for c in all_crds()}["ModelDeployment"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    scopes = spec["rateLimits"]["properties"]
    assert set(scopes) == set(gateway_domain.DEPLOYMENT_LIMIT_SCOPES.values())
    for scope in scopes.values():
        for field in gateway_domain.LIMIT_FIELDS.values():
            bound = scope["properties"][field]
            assert (bound["minimum"], bound["maximum"]) == (gateway_domain.UNLIMITED, gateway_domain.PER_MINUTE_MAX)
    assert set(spec["pricing"]["properties"]) == set(gateway_domain.PRICING_FIELDS.values())
    declared = {name: engine.RUNNING_USAGE for name, engine in ENGINES.items()}
    assert {name: gateway_domain.running_usage(name) for name in ENGINES} == declared
    assert gateway_domain.running_usage("an-engine-of-a-newer-collection") is False


def entries(fields, prefix=""):
    """(option path, entry) of every option the module has (crdOnly fields are filled from other options)."""
    for option, entry in fields.items():
        if entry.get("crdOnly"):
            continue
        yield prefix + option, entry
        if "options" in entry:
            yield from entries(entry["options"], f"{prefix}{option}.")


def crd_property(kind, path):
    crd = {c["spec"]["names"]["kind"]: c for c in all_crds()}[kind]
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    fields = domain.FIELDS[kind]
    for part in path.split("."):
        node, fields = node["properties"][fields[part]["field"]], fields[part].get("options", {})
    return node


@pytest.mark.parametrize("kind", sorted(domain.FIELDS))
def test_module_options_and_crd_share_enums_and_bounds(kind):
    options = kind_options(kind)
    for path, entry in entries(domain.FIELDS[kind]):
        prop = crd_property(kind, path)
        option = options
        for part in path.split("."):
            option = option[part] if option is options else option["options"][part]
        if "enum" in entry:
            assert option["choices"] == prop["enum"] == choices(entry), path
        for bound in ("minimum", "maximum"):
            assert prop.get(bound) == entry.get(bound), path


def nested(path, value):
    head, _dot, rest = path.partition(".")
    return {head: nested(rest, value) if rest else value}


MD_BOUNDED = [(path, entry) for path, entry in entries(domain.FIELDS["ModelDeployment"]) if entry["type"] == "integer"]
# Options that must come along for a bound to be the only thing tested.
SIBLINGS = {
    "autoscaling": {"autoscaling": {"min_replicas": 1, "max_replicas": 64}},
    "disruption_budget": {"replicas": 64, "disruption_budget": {"min_available": 0}},
}


@pytest.mark.parametrize(("path", "entry"), MD_BOUNDED, ids=[path for path, _entry in MD_BOUNDED])
def test_model_deployment_checks_each_bound_of_the_schema(path, entry):
    """The module refuses exactly what the CRD refuses, naming the option."""

    def params(value):
        given = nested(path, value)
        top = next(iter(given))
        base = SIBLINGS.get(top, {})
        return md_params(**{**base, top: {**base.get(top, {}), **given[top]} if top in base else given[top]})

    deployment_spec(params(entry["maximum"]))
    for wrong in (entry["maximum"] + 1, entry["minimum"] - 1):
        with pytest.raises(ValidationError) as err:
            deployment_spec(params(wrong))
        assert err.value.field == path


def test_every_limit_has_one_bound_and_zero_means_unlimited():
    limit = domain.PER_MINUTE_MAX
    assert Limits.from_spec({"requestsPerMinute": 0, "tokensPerMinute": limit}, "x") == Limits(0, limit)
    with pytest.raises(ValueError, match=r"0\.\.1000000000"):
        Limits.from_spec({"tokensPerMinute": limit + 1}, "x")
    assert store.check_limits({"requests_per_minute": limit}) == {"requests_per_minute": limit, "tokens_per_minute": 0}
    with pytest.raises(ApiError):
        store.check_limits({"tokens_per_minute": limit + 1})
    spec = deployment_spec(
        md_params(
            rate_limits={
                "per_key": {"requests_per_minute": 0, "tokens_per_minute": limit},
                "per_tenant": None,
                "per_deployment": None,
            }
        )
    )
    assert spec["rateLimits"] == {"perKey": {"requestsPerMinute": 0, "tokensPerMinute": limit}}


def model_deployment(phase, **params):
    spec = deployment_spec(md_params(**params))
    status = {"phase": phase, "servedModelName": "qwen", "upstreamURL": "http://qwen.tf.svc:8000"}
    return {"kind": "ModelDeployment", "metadata": {"name": "qwen", "namespace": "tf"}, "spec": spec, "status": status}


@pytest.mark.parametrize("phase", [*domain.DEPLOYMENT_PHASES, None])
def test_gateway_routes_only_ready_deployments(phase):
    routed = deployments_from_objects([model_deployment(phase)])
    assert bool(routed) == (phase == "Ready")


def test_gateway_reads_what_the_module_writes():
    md = model_deployment(
        "Ready",
        tenants=["acme"],
        rate_limits={
            "per_key": {"requests_per_minute": 60, "tokens_per_minute": None},
            "per_tenant": {"requests_per_minute": None, "tokens_per_minute": 5000},
            "per_deployment": {"requests_per_minute": 900, "tokens_per_minute": None},
        },
        pricing={"currency": "EUR", "input_per_1m": "0.15", "output_per_1m": "0.6"},
    )
    (routed,) = deployments_from_objects([md])
    assert routed.tenants == {"acme"}
    assert (routed.per_key, routed.per_tenant, routed.per_deployment) == (
        Limits(60, 0),
        Limits(0, 5000),
        Limits(900, 0),
    )
    assert (routed.price.currency, str(routed.price.input_per_1m), str(routed.price.output_per_1m)) == (
        "EUR",
        "0.15",
        "0.6",
    )


def test_the_gateway_package_ships_its_copy():
    pyproject = (ROOT / "services/gateway/pyproject.toml").read_text()
    assert 'tokenfactory_gateway = ["domain.json"]' in pyproject
    assert "COPY tokenfactory_gateway ./tokenfactory_gateway" in (ROOT / "services/gateway/Containerfile").read_text()
    importlib.import_module("tokenfactory_gateway.domain")
