"""Load the AWX-as-code definitions and the awx.awx module option specs they are checked against."""

import functools
import json
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
AWX = ROOT / "awx"
PLAYBOOKS = ROOT / "playbooks"


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's !unsafe tag as a plain string (AWX injector templates)."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load(path):
    return yaml.load(pathlib.Path(path).read_text(), Loader=_Loader)  # noqa: S506 - SafeLoader subclass


def awx_file(name):
    return load(AWX / name)


def survey(name):
    return load(AWX / "surveys" / name)


@functools.cache
def module_options(module):
    """Option spec of an awx.awx module, from ansible-doc (the installed collection, not a copy)."""
    out = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "ansible-doc"), "-j", f"awx.awx.{module}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)[f"awx.awx.{module}"]["doc"]["options"]


TYPES = {"str": str, "int": int, "bool": bool, "list": list, "dict": dict, "raw": object, "path": str, "float": float}


def check_against_spec(value, options, where):
    """Return problems of a dict of module parameters against an ansible-doc option spec (recursive)."""
    problems = []
    for key, val in value.items():
        spec = options.get(key) or next((o for o in options.values() if key in o.get("aliases", [])), None)
        if spec is None:
            problems.append(f"{where}.{key}: not an option")
            continue
        expected = TYPES.get(spec.get("type", "str"), object)
        if not isinstance(val, expected) or (expected is int and isinstance(val, bool)):
            problems.append(f"{where}.{key}: expected {spec.get('type')}, got {type(val).__name__}")
            continue
        if "choices" in spec and val not in spec["choices"]:
            problems.append(f"{where}.{key}: {val!r} not in {spec['choices']}")
        sub = spec.get("suboptions")
        if sub and isinstance(val, dict):
            problems += check_against_spec(val, sub, f"{where}.{key}")
        if sub and isinstance(val, list):
            for i, elem in enumerate(val):
                problems += check_against_spec(elem, sub, f"{where}.{key}[{i}]")
    for key, spec in options.items():
        if spec.get("required") and key not in value:
            problems.append(f"{where}: required option {key} missing")
    return problems


def playbook_closure(playbook):
    """Text of a playbook plus everything it pulls in: imported playbooks, task files, roles of this collection."""
    seen, texts, todo = set(), [], [pathlib.Path(playbook)]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        text = path.read_text()
        texts.append(text)
        for ref in re.findall(r"import_playbook:\s*([\w./-]+\.yml)", text):
            todo.append(path.parent / ref)
        for ref in re.findall(r"(?:import|include)_tasks:\s*([\w./-]+\.yml)", text):
            todo.append(path.parent / ref)
        for role in set(re.findall(r"tokenfactory\.spark\.(\w+)", text)):
            todo.extend(p for p in (ROOT / "roles" / role).rglob("*") if p.is_file())
    return "\n".join(texts)
