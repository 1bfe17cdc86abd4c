"""The collection resolves by FQCN in place, from a built tarball, and the way AWX installs it."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
PROBE_PLAYBOOK = """
- name: Resolve tokenfactory.spark by FQCN
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Use a filter from the collection
      ansible.builtin.debug:
        msg: "ARCH={{ '12.1' | tokenfactory.spark.compute_capability_to_sm }}"
"""


def run(args, cwd, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = f"{BIN}:{env['PATH']}"
    env.update(env_extra or {})
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def project_files():
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [p for p in out.split("\0") if p and (ROOT / p).exists()]


def copy_project(dest):
    for rel in project_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target, follow_symlinks=False)
    return dest


def expected_plugins():
    """What ansible-doc lists from the checkout; it must include every module and callback file."""
    in_place = listed_plugins(ROOT, {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    for kind in ("modules", "callback"):
        files = {p.stem for p in (ROOT / "plugins" / kind).glob("*.py") if not p.name.startswith("_")}
        assert files <= in_place, f"ansible-doc misses {files - in_place}"
    assert in_place, "ansible-doc lists no plugin of tokenfactory.spark"
    return in_place


def listed_plugins(cwd, env_extra):
    names = set()
    for kind in ("module", "filter", "callback"):
        out = run(["ansible-doc", "-t", kind, "-l", "tokenfactory.spark", "-j"], cwd, env_extra)
        names |= {fqcn.split(".")[-1] for fqcn in json.loads(out or "{}")}
    return names


def assert_resolves(cwd, env_extra, probe_dir):
    probe = pathlib.Path(probe_dir) / "probe-fqcn.yml"
    probe.write_text(PROBE_PLAYBOOK.lstrip())
    out = run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(probe)], cwd, env_extra)
    assert "ARCH=sm_121" in out


def test_in_place_from_checkout(tmp_path):
    assert (ROOT / ".collections/ansible_collections/tokenfactory/spark").resolve() == ROOT
    out = run(["ansible-galaxy", "collection", "list", "tokenfactory.spark", "--format", "json"], ROOT)
    assert str(ROOT / ".collections" / "ansible_collections") in out
    assert_resolves(ROOT, {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}, tmp_path)


def test_built_tarball_installs_and_imports(tmp_path):
    run(["ansible-galaxy", "collection", "build", "--output-path", str(tmp_path), str(ROOT)], ROOT)
    (tarball,) = tmp_path.glob("tokenfactory-spark-*.tar.gz")
    dest = tmp_path / "collections"
    run(["ansible-galaxy", "collection", "install", "--offline", "-p", str(dest), str(tarball)], tmp_path)
    installed = dest / "ansible_collections/tokenfactory/spark"
    manifest = json.loads((installed / "MANIFEST.json").read_text())["collection_info"]
    assert manifest["license"] == ["Apache-2.0"]
    assert (installed / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    for junk in (".venv", ".collections", ".git", "build"):
        assert not (installed / junk).exists(), f"{junk} leaked into the tarball"
    env = {"ANSIBLE_COLLECTIONS_PATH": str(dest)}
    assert listed_plugins(tmp_path, env) == expected_plugins()
    assert_resolves(tmp_path, env, tmp_path)
    # Every plugin imports from the installed copy, not from the checkout.
    code = (
        "import importlib, pathlib, sys\n"
        f"sys.path.insert(0, {str(dest)!r})\n"
        "import ansible_collections.tokenfactory.spark as c\n"
        f"assert pathlib.Path(c.__path__[0]).resolve() == pathlib.Path({str(installed)!r}).resolve(), c.__path__\n"
        f"for p in sorted(pathlib.Path({str(installed)!r}).glob('plugins/*/*.py')):\n"
        "    mod = 'ansible_collections.tokenfactory.spark.plugins.%s.%s' % (p.parent.name, p.stem)\n"
        "    importlib.import_module(mod)\n"
    )
    run([sys.executable, "-c", code], tmp_path)


@pytest.mark.timeout(300)
def test_awx_style_project_sync(tmp_path):
    """AWX project sync: `ansible-galaxy collection install -r collections/requirements.yml` from the
    project root into a staging path, then the job runs with that path (Galaxy itself is not
    reachable here, so dependencies come from the pinned ansible bundle: --offline)."""
    project = copy_project(tmp_path / "project")
    assert not (project / ".collections").exists()
    stage = tmp_path / "stage" / "requirements_collections"
    env = {"ANSIBLE_COLLECTIONS_PATH": str(stage)}
    run(["ansible-galaxy", "collection", "install", "-r", "collections/requirements.yml", "--offline"], project, env)
    assert (stage / "ansible_collections/tokenfactory/spark/MANIFEST.json").is_file()
    job_env = {"ANSIBLE_COLLECTIONS_PATH": f"{stage}:{project / '.collections'}"}
    assert listed_plugins(project, job_env) == expected_plugins()
    assert_resolves(project, job_env, tmp_path)
