"""Where the gateway runs is decided once (domain.GATEWAY_*): the gateway role deploys it there and an Endpoint
names it there unless told otherwise, so serve.yml needs no default of its own."""

import pathlib

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import domain
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import kind_fields, kind_options

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE_VARS = {
    "gateway_namespace": domain.GATEWAY_NAMESPACE,
    "gateway_name": domain.GATEWAY_SERVICE_NAME,
    "gateway_port": domain.GATEWAY_PORT,
}


def endpoint_spec(**params):
    """An Endpoint's spec as the module writes it: Ansible's own argument validation, then the domain's fields."""
    result = ArgumentSpecValidator(kind_options("Endpoint")).validate(
        {"hostname": "llm.example.com", "compute_cluster": "spark", **params}
    )
    assert not result.error_messages, result.error_messages
    return kind_fields("Endpoint", result.validated_parameters)


def test_the_gateway_role_defaults_are_the_domain_defaults():
    defaults = yaml.safe_load((ROOT / "roles/gateway/defaults/main.yml").read_text())
    spec = yaml.safe_load((ROOT / "roles/gateway/meta/argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    for var, value in ROLE_VARS.items():
        assert defaults[var] == value, var
        assert options[var]["default"] == value, var


def test_an_endpoint_names_the_gateway_where_the_role_deploys_it():
    assert endpoint_spec()["gateway"] == {
        "serviceName": "tokenfactory-gateway",
        "namespace": "tokenfactory-system",
        "port": 8080,
    }
    moved = endpoint_spec(gateway={"namespace": "edge", "service_name": "gw"})["gateway"]
    assert moved == {"serviceName": "gw", "namespace": "edge", "port": 8080}


def test_serve_yml_passes_the_gateway_settings_without_defaults_of_its_own():
    plays = yaml.safe_load((ROOT / "playbooks/serve.yml").read_text())
    tasks = [t for play in plays for t in play.get("tasks", []) if "tokenfactory.spark.endpoint" in t]
    assert len(tasks) == 2
    for task in tasks:
        gateway = task["tokenfactory.spark.endpoint"]["gateway"]
        assert gateway == {
            "service_name": "{{ gateway_name | default(omit) }}",
            "namespace": "{{ gateway_namespace | default(omit) }}",
            "port": "{{ gateway_port | default(omit) }}",
        }


def test_serve_settings_for_the_weights_cache_are_the_domain_and_engine_defaults():
    """serve.yml's pre-pull Jobs write where the engine pods read: the same cache directory and the engine's image."""
    from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import vllm

    defaults = yaml.safe_load((ROOT / "roles/settings/defaults/main.yml").read_text())
    cache = domain.FIELDS["ModelDeployment"]["weights_cache"]["options"]
    assert defaults["tf_weights_cache"] == {"type": cache["type"]["default"], "path": cache["path"]["default"]}
    repository, tag = vllm.DEFAULT_IMAGE
    assert f"'{repository}'" in defaults["tf_weights_prepull_image"]
    assert f"'{tag}'" in defaults["tf_weights_prepull_image"]
