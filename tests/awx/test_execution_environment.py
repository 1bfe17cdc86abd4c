"""The ansible-builder definition carries exactly the collection's dependencies, and ansible-builder accepts it."""

import hashlib
import pathlib
import subprocess
import sys
import tarfile

import pytest

from lab.versions import kube_tag, pinned
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


def test_ansible_runner_pin_matches_the_dev_toolchain():
    ee = load(EE)["dependencies"]
    runner = next(p for p in pins(ROOT / "requirements-dev.txt") if p.startswith("ansible-runner=="))
    assert ee["ansible_runner"]["package_pip"] == runner


def build_args():
    """ARG defaults and the RUN step of additional_build_steps.append_final."""
    steps = load(EE)["additional_build_steps"]["append_final"]
    args = dict(s.removeprefix("ARG ").split("=", 1) for s in steps if s.startswith("ARG "))
    run = next(s for s in steps if s.startswith("RUN "))
    return args, run.removeprefix("RUN ")


def test_helm_and_kubectl_pins_are_the_collections():
    """ansible-builder cannot read versions.yml: its two ARG defaults must equal the collection's pins."""
    args = build_args()[0]
    assert args["HELM_VERSION"] == pinned("helm")
    assert args["KUBECTL_VERSION"] == kube_tag()


STUBS = {
    "uname": 'echo "$FAKE_ARCH"',
    # curl -fsSLo OUT URL | curl -fsSL URL: served from $RELEASES/<host>/<path>.
    "curl": "\n".join(
        [
            'out=""',
            'for a; do case "$a" in -fsSLo) out=next ;; http*) url=$a ;; *) [ "$out" = next ] && out=$a ;; esac; done',
            'src="$RELEASES/${url#https://}"',
            '[ -f "$src" ] || exit 22',
            'if [ -n "$out" ]; then cp "$src" "$out"; else cat "$src"; fi',
        ]
    ),
    "install": 'dest="${@: -1}"; cp "${@: -2:1}" "$DEST/$(basename "$dest")"; chmod 0755 "$DEST/$(basename "$dest")"',
}


def fake_releases(root, args, arch, tamper=False):
    """The official release files of one architecture, with their published checksum files."""
    kubectl = root / f"dl.k8s.io/release/{args['KUBECTL_VERSION']}/bin/linux/{arch}/kubectl"
    kubectl.parent.mkdir(parents=True)
    kubectl.write_text(f"#!/bin/sh\necho kubectl-{arch}\n")
    kubectl.with_name("kubectl.sha256").write_text(hashlib.sha256(kubectl.read_bytes()).hexdigest())
    helm_dir = root / "helm-src" / f"linux-{arch}"
    helm_dir.mkdir(parents=True)
    (helm_dir / "helm").write_text(f"#!/bin/sh\necho helm-{arch}\n")
    tgz = root / f"get.helm.sh/helm-{args['HELM_VERSION']}-linux-{arch}.tar.gz"
    tgz.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(helm_dir, arcname=f"linux-{arch}")
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    digest = ("0" * 64) if tamper else digest
    pathlib.Path(f"{tgz}.sha256sum").write_text(f"{digest}  {tgz.name}\n")


def run_download_step(tmp_path, machine, tamper=False):
    args, script = build_args()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}[machine]
    releases, stubs, dest = tmp_path / "releases", tmp_path / "stubs", tmp_path / "usr-local-bin"
    for folder in (stubs, dest):
        folder.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text(f"#!/bin/bash\n{body}\n")
        (stubs / name).chmod(0o755)
    fake_releases(releases, args, arch, tamper)
    env = {"PATH": f"{dest}:{stubs}:/usr/bin:/bin", "FAKE_ARCH": machine, "RELEASES": str(releases), "DEST": str(dest)}
    proc = subprocess.run(
        ["/bin/sh", "-c", script], env={**env, **args}, capture_output=True, text=True, timeout=60, check=False
    )
    return proc, dest


@pytest.mark.parametrize(("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64")])
def test_download_step_installs_the_architectures_binaries(tmp_path, machine, arch):
    proc, dest = run_download_step(tmp_path, machine)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.rsplit("/", 1)[-1] for line in lines[:2]] == ["kubectl: OK", "helm.tar.gz: OK"], lines
    assert lines[2:] == [f"helm-{arch}", f"kubectl-{arch}"]
    assert sorted(p.name for p in dest.iterdir()) == ["helm", "kubectl"]


def test_download_step_refuses_a_checksum_mismatch(tmp_path):
    proc, dest = run_download_step(tmp_path, "aarch64", tamper=True)
    assert proc.returncode != 0
    assert "FAILED" in proc.stdout + proc.stderr
    assert not (dest / "helm").exists()
