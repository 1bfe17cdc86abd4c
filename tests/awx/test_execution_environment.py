"""The ansible-builder definition carries exactly the collection's dependencies, and ansible-builder accepts it."""

import pathlib
import subprocess
import sys

from tests.awx.definitions import AWX, ROOT, load

EE = AWX / "execution-environment.yml"


def pins(path):
    lines = (line.split("#", 1)[0].strip() for line in pathlib.Path(path).read_text().splitlines())
    return {line for line in lines if line and not line.startswith("-r ")}


def test_galaxy_dependencies_equal_galaxy_yml():
    ee = load(EE)["dependencies"]
    declared = load(ROOT / "galaxy.yml")["dependencies"]
    assert {c["name"]: c["version"] for c in ee["galaxy"]["collections"]} == declared


def test_python_and_system_files_are_the_collections():
    ee = load(EE)["dependencies"]
    meta = load(ROOT / "meta/execution-environment.yml")["dependencies"]
    assert (AWX / ee["python"]).resolve() == (ROOT / meta["python"]).resolve() == ROOT / "requirements.txt"
    assert (AWX / ee["system"]).resolve() == (ROOT / meta["system"]).resolve() == ROOT / "bindep.txt"


def test_ansible_core_pin_matches_the_dev_toolchain():
    ee = load(EE)["dependencies"]
    core = next(p for p in pins(ROOT / "requirements-dev.txt") if p.startswith("ansible-core=="))
    assert ee["ansible_core"]["package_pip"] == core


def test_ansible_builder_creates_the_build_context(tmp_path):
    builder = pathlib.Path(sys.executable).parent / "ansible-builder"
    proc = subprocess.run(
        [str(builder), "create", "-f", str(EE), "-c", str(tmp_path / "ctx")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = tmp_path / "ctx" / "_build"
    assert pins(build / "requirements.txt") == pins(ROOT / "requirements.txt")
    assert (build / "bindep.txt").read_text() == (ROOT / "bindep.txt").read_text()
    galaxy = load(build / "requirements.yml")
    assert {c["name"] for c in galaxy["collections"]} == set(load(ROOT / "galaxy.yml")["dependencies"])
    # The introspection step the image build runs, run here on the generated context.
    introspect = subprocess.run(
        [
            sys.executable,
            str(build / "scripts/introspect.py"),
            "introspect",
            f"--user-pip={build / 'requirements.txt'}",
            f"--user-bindep={build / 'bindep.txt'}",
            f"--write-pip={tmp_path / 'pip.txt'}",
            f"--write-bindep={tmp_path / 'bindep.txt'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert introspect.returncode == 0, introspect.stdout + introspect.stderr
    assert pins(ROOT / "requirements.txt") <= {
        line.split("#")[0].strip() for line in (tmp_path / "pip.txt").read_text().splitlines()
    }
