"""The OCI archive reader behind the architecture check: index -> (nested index) -> manifest -> config, on archives
written in the OCI image layout, and on the lab's real gateway archive when scripts/build-service-images made it."""

import io
import json
import os
import pathlib
import tarfile

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.tokenfactory.spark.plugins.filter.oci import oci_architecture, oci_archive_image
from ansible_collections.tokenfactory.spark.plugins.module_utils.host.oci_archive import ArchiveError, archive_image

from tests.oci_layout import INDEX, Layout

CACHE = pathlib.Path(os.environ.get("TF_CACHE", pathlib.Path.home() / ".cache/tokenfactory"))


@pytest.mark.parametrize("prefix", ["", "./"])
def test_a_single_arm64_image(tmp_path, prefix):
    layout = Layout()
    manifest = layout.image("arm64")
    archive = layout.write(tmp_path / "gateway.tar", [manifest], prefix=prefix)
    assert archive_image(archive) == {"digest": manifest["digest"], "architectures": ["arm64"]}


def test_a_multi_arch_index_lists_every_architecture(tmp_path):
    layout = Layout()
    nested = layout.blob(
        {"schemaVersion": 2, "mediaType": INDEX, "manifests": [layout.image("amd64"), layout.image("arm64")]}
    )
    archive = layout.write(tmp_path / "multi.tar", [nested])
    assert archive_image(archive) == {"digest": nested["digest"], "architectures": ["amd64", "arm64"]}


def test_a_missing_config_blob_is_named(tmp_path):
    layout = Layout()
    manifest = layout.image("amd64")
    config = json.loads(layout.blobs[manifest["digest"]])["config"]["digest"]
    archive = layout.write(tmp_path / "broken.tar", [manifest], drop={config})
    with pytest.raises(ArchiveError, match=f"blob {config} named by the index is not in the archive"):
        archive_image(archive)


def test_not_an_oci_archive(tmp_path):
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tar:
        tar.addfile(tarfile.TarInfo("manifest.json"), io.BytesIO(b""))
    with pytest.raises(AnsibleFilterError, match=r"no index\.json, not an OCI archive"):
        oci_archive_image(str(plain))
    with pytest.raises(AnsibleFilterError, match="cannot read the OCI archive"):
        oci_archive_image(str(tmp_path / "absent.tar"))


@pytest.mark.parametrize(("machine", "oci"), [("aarch64", "arm64"), ("x86_64", "amd64"), ("arm64", "arm64")])
def test_machine_names_in_oci_terms(machine, oci):
    assert oci_architecture(machine) == oci


def test_an_unknown_machine_names_the_supported_ones():
    with pytest.raises(
        AnsibleFilterError, match=r"'riscv64' is not supported \(one of aarch64, amd64, arm64, x86_64\)"
    ):
        oci_architecture("riscv64")


def test_the_lab_gateway_archive_is_of_this_machine():
    """scripts/build-service-images' real archive (podman push oci-archive, zstd layers): the reader agrees with
    images.json's digest and names the architecture podman built for, this machine's."""
    listing = CACHE / "images/images.json"
    if not listing.is_file():
        pytest.skip("scripts/build-service-images has not run here")
    entry = next(e for e in json.loads(listing.read_text()) if e["ref"].startswith("localhost/tokenfactory-gateway:"))
    image = archive_image(entry["archive"])
    assert image == {"digest": entry["digest"], "architectures": [oci_architecture(os.uname().machine)]}
