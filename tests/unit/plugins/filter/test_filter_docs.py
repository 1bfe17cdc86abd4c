"""Every filter the collection exports has its own documentation: ansible-doc shows a doc named after it, from
its own plugins/filter/<name>.yml, whose options are the function's parameters and whose examples use it."""

import importlib
import inspect
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[4]
FILTERS = ROOT / "plugins/filter"


def exported_filters():
    """name -> function, from every FilterModule of plugins/filter (what Ansible loads)."""
    exported = {}
    for path in sorted(FILTERS.glob("*.py")):
        module = importlib.import_module(f"ansible_collections.tokenfactory.spark.plugins.filter.{path.stem}")
        for name, function in module.FilterModule().filters().items():
            assert name not in exported, f"{name} exported twice"
            exported[name] = function
    return exported


def ansible_doc(names):
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    argv = [pathlib.Path(sys.executable).parent / "ansible-doc", "-t", "filter", "-j"]
    argv += [f"tokenfactory.spark.{name}" for name in names]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert run.returncode == 0 and not run.stderr.strip(), run.stderr
    return json.loads(run.stdout)


def test_ansible_doc_shows_each_filter_its_own_documentation():
    exported = exported_filters()
    docs = ansible_doc(sorted(exported))
    assert sorted(docs) == sorted(f"tokenfactory.spark.{name}" for name in exported)
    for name, function in exported.items():
        entry = docs[f"tokenfactory.spark.{name}"]
        doc = entry["doc"]
        assert doc["name"] == name, f"ansible-doc shows {doc['name']!r}'s documentation for {name}"
        assert pathlib.Path(doc["filename"]).name == f"{name}.yml", doc["filename"]
        parameters = list(inspect.signature(function).parameters)
        assert sorted(doc["options"]) == sorted(["_input", *parameters[1:]]), name
        assert f"tokenfactory.spark.{name}" in entry["examples"], f"{name}: examples do not use it"
        assert entry["return"]["_value"]["description"], name
    documented = {path.stem for path in FILTERS.glob("*.yml")}
    assert documented == set(exported), f"docs without a filter: {sorted(documented - set(exported))}"
