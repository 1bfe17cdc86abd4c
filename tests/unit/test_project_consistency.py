"""Project-level invariants: pinned dependencies, declared collections, action groups, bootstrap."""

import ast
import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIN = re.compile(r"^[A-Za-z0-9_.\-]+(\[[a-z,]+\])?==[0-9][0-9A-Za-z.\-+]*$")
FQCN = re.compile(r"(?<![\w./-])([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")


def load(rel):
    return yaml.safe_load((ROOT / rel).read_text())


def requirement_lines(rel):
    for raw in (ROOT / rel).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            yield line


def test_python_requirements_are_exact_pins():
    for rel in ("requirements.txt", "requirements-dev.txt"):
        for line in requirement_lines(rel):
            if line.startswith("-r "):
                assert (ROOT / line[3:].strip()).is_file(), f"{rel}: {line} points nowhere"
                continue
            assert PIN.match(line), f"{rel}: {line!r} is not pinned with =="


def test_the_gateway_image_pins_the_collection_pins():
    """The gateway image runs the status keeper (the collection's module_utils): the same kubernetes and
    ansible-core as the controller."""
    dev = dict(line.split("==") for line in requirement_lines("requirements-dev.txt") if "==" in line)
    collection = dict(line.split("==") for line in requirement_lines("requirements.txt"))
    for rel, pins in (
        ("services/gateway/requirements-keeper.txt", dev),
        ("services/gateway/requirements-kubernetes.txt", collection),
    ):
        lines = list(requirement_lines(rel))
        assert lines and all(PIN.match(line) for line in lines), rel
        for name, version in (line.split("==") for line in lines):
            assert pins[name] == version, f"{rel}: {name}=={version}, the collection pins {pins[name]}"


def test_license_file_is_the_apache_license_galaxy_declares():
    """Every file header cites LICENSE; galaxy.yml names its SPDX id (license, not license_file as well)."""
    galaxy = load("galaxy.yml")
    assert galaxy["license"] == ["Apache-2.0"] and "license_file" not in galaxy
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"], text[:200]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    assert len(re.findall(r"^\s+\d\. [A-Z]", text, re.M)) == 9, "the nine sections of the license"


def test_no_python_requirement_is_unused():
    """Each pin in requirements.txt is imported by a plugin (the controller / EE needs nothing else)."""
    dists = importlib.metadata.packages_distributions()
    imported = set()
    for module in third_party_imports():
        imported |= {d.lower().replace("_", "-") for d in dists.get(module, [module])}
    pinned = {re.split(r"[=\[]", line)[0].lower().replace("_", "-") for line in requirement_lines("requirements.txt")}
    assert pinned <= imported, f"requirements.txt pins unused packages: {sorted(pinned - imported)}"


def installed_collections():
    out = subprocess.run(
        [pathlib.Path(sys.executable).parent / "ansible-galaxy", "collection", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        cwd=ROOT,
    ).stdout
    import json

    return {name for per_path in json.loads(out).values() for name in per_path}


def used_collections():
    known = installed_collections()
    used = {}
    files = [p for d in ("roles", "playbooks", "plugins") for p in (ROOT / d).rglob("*") if p.is_file()]
    for path in files:
        if path.suffix not in {".yml", ".yaml", ".py", ".j2"}:
            continue
        for ns, name in FQCN.findall(path.read_text(errors="ignore")):
            fq = f"{ns}.{name}"
            if fq in known:
                used.setdefault(fq, path.relative_to(ROOT))
    return used


def test_every_used_collection_is_a_declared_dependency():
    declared = set(load("galaxy.yml")["dependencies"]) | {"ansible.builtin", "tokenfactory.spark"}
    undeclared = {fq: str(where) for fq, where in used_collections().items() if fq not in declared}
    assert not undeclared, f"collections used but missing from galaxy.yml dependencies: {undeclared}"


def test_collection_requirement_files_agree_with_galaxy():
    galaxy = load("galaxy.yml")["dependencies"]
    for rel in ("requirements.yml", "collections/requirements.yml"):
        names = {c["name"] for c in load(rel)["collections"]}
        missing = set(galaxy) - names
        assert not missing, f"{rel} lacks {missing}"
    awx = [c for c in load("collections/requirements.yml")["collections"] if c.get("type") == "dir"]
    assert awx == [{"name": "./", "type": "dir"}], "AWX sync must install the project itself"


def test_action_groups_hold_every_module_of_their_auth_kind_and_nothing_else():
    """module_defaults of a group sets its connection options on every member, so a group may only hold
    modules that accept them: Kubernetes modules in `kubernetes`, gateway admin modules in `gateway_admin`."""
    groups = load("meta/runtime.yml").get("action_groups", {})
    assert set(groups) == {"kubernetes", "gateway_admin"}
    expected = {"kubernetes": set(), "gateway_admin": set()}
    for path in (ROOT / "plugins/modules").glob("*.py"):
        text = path.read_text()
        if "tokenfactory.spark.k8s_auth" in text:
            expected["kubernetes"].add(path.stem)
        if "tokenfactory.spark.gateway_auth" in text:
            expected["gateway_admin"].add(path.stem)
    assert not expected["kubernetes"] & expected["gateway_admin"]
    for group, members in expected.items():
        assert set(groups[group]) == members, f"action group {group}: {sorted(groups[group])} != {sorted(members)}"


def test_readme_names_the_modules_outside_both_action_groups():
    """The README's module_defaults section says which modules it does not reach, and why."""
    grouped = {m for members in load("meta/runtime.yml")["action_groups"].values() for m in members}
    outside = {path.stem for path in (ROOT / "plugins/modules").glob("*.py")} - grouped
    (paragraph,) = [p for p in (ROOT / "README.md").read_text().split("\n\n") if "in neither group" in p]
    named = set(re.findall(r"`(\w+)`", paragraph)) & {path.stem for path in (ROOT / "plugins/modules").glob("*.py")}
    assert named == outside


def third_party_imports():
    stdlib = set(sys.stdlib_module_names)
    found = {}
    for path in (ROOT / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top not in {"ansible", "ansible_collections"}:
                    found.setdefault(top, path.relative_to(ROOT))
    return found


def test_execution_environment_covers_plugin_imports():
    ee = load("meta/execution-environment.yml")
    for key in ("python", "system"):
        assert (ROOT / ee["dependencies"][key]).is_file()
    pinned = {re.split(r"[=\[]", line)[0].lower().replace("_", "-") for line in requirement_lines("requirements.txt")}
    dists = importlib.metadata.packages_distributions()
    for module, where in third_party_imports().items():
        owners = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        assert owners & pinned, f"{where} imports {module!r} but requirements.txt pins none of {owners}"


def test_bootstrap_is_idempotent_and_quiet_when_done():
    proc = subprocess.run([ROOT / "scripts/bootstrap"], capture_output=True, text=True, timeout=600, check=True)
    proc = subprocess.run([ROOT / "scripts/bootstrap"], capture_output=True, text=True, timeout=60, check=True)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("[bootstrap] ready")


def test_bootstrap_rejects_unknown_extra_naming_the_allowed_values():
    proc = subprocess.run(
        [ROOT / "scripts/bootstrap", "--with", "gpu"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2
    assert "--with gpu: allowed values are lab-bins, engine, host-image, all" in proc.stderr
    assert proc.stdout == "", "bad input must fail before any step runs"


def test_default_scenario_links_every_file_of_the_pair_inventory():
    """molecule/default links inventories/spark-pair/group_vars file by file (no directory symlinks): none missing."""
    inventory = ROOT / "inventories/spark-pair/group_vars"
    scenario = ROOT / "molecule/default/group_vars"
    expected = {p.relative_to(inventory) for p in inventory.rglob("*.yml")}
    linked = {p.relative_to(scenario) for p in scenario.rglob("*.yml") if p.parent != scenario}
    assert linked == expected
    for rel in expected:
        assert (scenario / rel).is_symlink() and (scenario / rel).resolve() == (inventory / rel).resolve(), rel
    lab = ROOT / "inventories/lab/group_vars/tf_lab_nodes/lab_node.yml"
    assert (scenario / "tf_lab_nodes.yml").resolve() == lab.resolve()


def test_pair_lab_links_every_file_of_the_lab_inventory_and_the_pairs_link_settings():
    """inventories/lab-pair links inventories/lab's group_vars and host_vars file by file, and inventories/spark-pair's
    ConnectX-7 settings; its own settings are only group_vars/tf_lab_pair (what the pair lab differs in)."""
    lab, pair = ROOT / "inventories/lab", ROOT / "inventories/lab-pair"
    expected = {p.relative_to(lab / "group_vars"): p for p in (lab / "group_vars").rglob("*.yml")}
    expected[pathlib.Path("all/connectx.yml")] = ROOT / "inventories/spark-pair/group_vars/all/connectx.yml"
    own = pathlib.Path("tf_lab_pair/pair.yml")
    found = {p.relative_to(pair / "group_vars"): p for p in (pair / "group_vars").rglob("*.yml")}
    assert set(found) == set(expected) | {own}
    for rel, target in expected.items():
        assert found[rel].is_symlink() and found[rel].resolve() == target.resolve(), rel
    assert not found[own].is_symlink()
    (lab_host,) = (lab / "host_vars").glob("*.yml")
    for host in ("tf-lab-pair-1", "tf-lab-pair-2"):
        assert (pair / "host_vars" / f"{host}.yml").resolve() == lab_host.resolve(), host
