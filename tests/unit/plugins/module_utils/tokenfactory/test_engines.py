"""Engines behind one interface: each engine is one module of engines/, the registry is the engine enum,
and nothing outside engines/ (the collection's plugins and the gateway) switches on the engine's name."""

import pathlib
import re

import pytest
import yaml
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory import domain
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.crds import all_crds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines import ENGINES
from ansible_collections.tokenfactory.spark.plugins.modules import model_deployment

ROOT = pathlib.Path(__file__).resolve().parents[5]
SCANNED = (ROOT / "plugins", ROOT / "services")
ENGINES_PACKAGE = ROOT / "plugins/module_utils/tokenfactory/engines"
# The domain's one mention of an engine name: the default of ModelDeployment's `engine`.
DOMAIN = ROOT / "plugins/module_utils/tokenfactory/domain.py"
INTERFACE = {
    "attributes": (
        "NAME",
        "DEFAULT_IMAGE",
        "REQUIRED_CRD",
        "MULTINODE",
        "RUNNING_USAGE",
        "CHILD_TYPES",
        "MANAGED_FLAGS",
    ),
    "functions": ("layout", "possible_children", "render", "observe", "upstream_url"),
}


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_implements_the_interface(name):
    engine = ENGINES[name]
    assert name == engine.NAME
    for attribute in INTERFACE["attributes"]:
        assert hasattr(engine, attribute), f"engine {name} lacks {attribute}"
    for function in INTERFACE["functions"]:
        assert callable(getattr(engine, function, None)), f"engine {name} lacks {function}()"
    assert engine.REQUIRED_CRD is None or set(engine.REQUIRED_CRD) == {"plural", "group", "purpose"}
    assert isinstance(engine.RUNNING_USAGE, bool)


def test_the_registry_is_the_engine_enum_everywhere():
    names = list(ENGINES)
    crd = {c["spec"]["names"]["kind"]: c for c in all_crds()}["ModelDeployment"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert schema["engine"]["enum"] == names
    assert model_deployment.ARG_SPEC["engine"]["choices"] == names
    documented = yaml.safe_load(model_deployment.DOCUMENTATION)["options"]["engine"]
    assert documented["choices"] == names
    assert documented["default"] == domain.FIELDS["ModelDeployment"]["engine"]["default"]


def test_no_engine_switch_outside_the_engines_package():
    """`if engine == "vllm"` (or a set of engine names) belongs in engines/<name>.py, as a capability the gateway
    reads from domain.json, so adding an engine touches one new module."""
    names = "|".join(ENGINES)
    default = f'"default": "{domain.FIELDS["ModelDeployment"]["engine"]["default"]}"'
    switch = re.compile(rf"""(engine\W*\s*(==|!=|\bin\b)|["']({names})["'])""")
    offending = []
    for path in (path for folder in SCANNED for path in folder.rglob("*.py")):
        if path.is_relative_to(ENGINES_PACKAGE):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not switch.search(line) or line.lstrip().startswith("#"):
                continue
            if path == DOMAIN and default in line:
                continue
            offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offending, "\n".join(offending)
