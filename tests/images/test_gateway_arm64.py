"""Rehearsal of the gateway image for arm64 nodes (DGX Spark) on an x86-64 controller: podman builds
services/gateway/Containerfile with --platform linux/arm64 through qemu-user (binfmt), the OCI archive's config says
arm64 (the reader the containerd role checks with), this amd64 machine's containerd role refuses it before loading,
naming both architectures, and an arm64 host (localhost/tf-debian:bookworm-arm64, make host-image-arm64, its own
containerd) imports it under its ref and digest. Needs podman, qemu-user-static with binfmt registered, PyPI."""

import os
import pathlib
import re
import subprocess
import uuid

import pytest
from ansible_collections.tokenfactory.spark.plugins.module_utils.host.oci_archive import archive_image

from tests.playbooks.ansible_run import ROOT
from tests.playbooks.test_image_architecture import image_play

pytestmark = [pytest.mark.molecule, pytest.mark.slow, pytest.mark.timeout(3600)]
ARM64_HOST = "localhost/tf-debian:bookworm-arm64"
REF = "localhost/tokenfactory-gateway:0.1.0"  # the ref the nodes load; built under a tag of its own, see below
VENV = pathlib.Path(os.environ.get("TF_VENV", ROOT / ".venv"))


def podman(*args, timeout=2400, **kwargs):
    return subprocess.run(["podman", *map(str, args)], check=True, timeout=timeout, text=True, **kwargs)


def debian_mirror():
    for source in pathlib.Path("/etc/apt/sources.list.d").glob("*.sources"):
        found = re.search(r"^URIs: *(http\S*debian)$", source.read_text(), re.M)
        if found:
            return found.group(1)
    return "http://deb.debian.org/debian"


@pytest.fixture
def arm64_gateway(tmp_path):
    """The gateway image built for linux/arm64 (qemu-user), saved as an OCI archive under REF; tags removed after."""
    assert pathlib.Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists(), (
        "qemu-aarch64 is not registered with binfmt_misc (docs/lab-recipes: update-binfmts --enable qemu-aarch64)"
    )
    tag = uuid.uuid4().hex[:8]
    base, built = f"localhost/tf-rehearsal-python:{tag}", f"localhost/tf-rehearsal-gateway:{tag}"
    (tmp_path / "Containerfile").write_text(
        f"FROM {ARM64_HOST}\n"
        f"RUN echo 'deb {debian_mirror()} bookworm main' > /etc/apt/sources.list && rm -f /etc/apt/sources.list.d/* "
        "&& apt-get update -q && apt-get install -qy --no-install-recommends python3-venv "
        "&& rm -rf /var/lib/apt/lists/*\n"
    )
    core = subprocess.run(
        [
            VENV / "bin/python",
            "-c",
            "import importlib.util as u; "
            "print(u.find_spec('ansible_collections.kubernetes.core').submodule_search_locations[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (tmp_path / "pip.conf").write_text("[global]\ncert = /etc/pip-ca.crt\n")
    try:
        podman("build", "-q", "--platform", "linux/arm64", "-t", base, "-f", tmp_path / "Containerfile", tmp_path)
        podman(
            "build",
            "-q",
            "--platform",
            "linux/arm64",
            "--build-arg",
            f"BASE_IMAGE={base}",
            "-t",
            built,
            "--build-context",
            f"status-keeper={ROOT / 'services/status_keeper'}",
            "--build-context",
            f"collection={ROOT / 'plugins'}",
            "--build-context",
            f"kubernetes-core={core}/plugins",
            "--volume",
            "/etc/ssl/certs/ca-certificates.crt:/etc/pip-ca.crt:ro",
            "--volume",
            f"{tmp_path / 'pip.conf'}:/etc/pip.conf:ro",
            "-f",
            ROOT / "services/gateway/Containerfile",
            ROOT / "services/gateway",
        )
        archive = tmp_path / "gateway-arm64.tar"
        podman("push", "-q", built, f"oci-archive:{archive}:{REF}")
        yield archive
    finally:
        subprocess.run(["podman", "rmi", "-f", built, base], check=False, capture_output=True)


@pytest.fixture
def arm64_host():
    """An arm64 container (qemu-user) of the arm64 host image, running its own containerd (native snapshotter)."""
    name = f"tf-arm64-containerd-{uuid.uuid4().hex[:6]}"
    podman(
        "run", "-d", "--name", name, "--arch", "arm64", "--privileged", "--entrypoint", "sleep", ARM64_HOST, "infinity"
    )
    try:
        podman("exec", name, "sh", "-c", "containerd >/var/log/containerd.log 2>&1 &")
        podman(
            "exec",
            name,
            "sh",
            "-c",
            "for i in $(seq 120); do ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; "
            "cat /var/log/containerd.log; exit 1",
            timeout=300,
        )
        yield name
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], check=False, capture_output=True)


def test_the_arm64_gateway_image_is_checked_then_loaded_into_an_arm64_containerd(arm64_gateway, arm64_host, tmp_path):
    image = archive_image(arm64_gateway)
    assert image["architectures"] == ["arm64"]

    # This machine is no arm64 node: the containerd role refuses the archive before anything is loaded.
    if os.uname().machine != "aarch64":
        refused = image_play(tmp_path, gateway_image_source="archive", gateway_image_archive=str(arm64_gateway))
        assert refused.returncode != 0
        assert f"{REF} ({arm64_gateway}) is arm64" in refused.stdout, refused.stdout[-3000:]

    # The arm64 host imports it under its ref, with the digest the reader found.
    podman("cp", arm64_gateway, f"{arm64_host}:/tmp/gateway.tar")
    podman(
        "exec",
        arm64_host,
        "ctr",
        "-n",
        "k8s.io",
        "images",
        "import",
        "--snapshotter",
        "native",
        "/tmp/gateway.tar",
        timeout=1200,
    )
    listed = podman("exec", arm64_host, "ctr", "-n", "k8s.io", "images", "ls", capture_output=True).stdout
    (line,) = [row for row in listed.splitlines() if row.startswith(REF + " ")]
    assert image["digest"] in line, line
    assert "linux/arm64" in line, line
    uname = podman("exec", arm64_host, "uname", "-m", capture_output=True).stdout.strip()
    assert uname == "aarch64"
