# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""What an OCI image archive holds (manifest digest, architectures), and a machine's name in OCI terms.

The one place that maps `uname -m` / ansible_architecture to OCI architecture names, and the one reader of an
archive's index -> manifest -> config chain, used by the roles (filters) before an archive is loaded and by tests."""

from __future__ import annotations

import json
import tarfile

# ansible_architecture (uname -m) -> OCI/Go architecture; the OCI names map to themselves.
OCI_ARCHITECTURES = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64"}
INDEX_TYPES = {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}


class ArchiveError(ValueError):
    """The archive is missing, not an OCI layout, or lacks a blob its index names."""


def oci_architecture(machine):
    """'aarch64' -> 'arm64', 'x86_64' -> 'amd64' (OCI names pass through); anything else is an error."""
    try:
        return OCI_ARCHITECTURES[str(machine)]
    except KeyError:
        allowed = ", ".join(sorted(OCI_ARCHITECTURES))
        raise ValueError(f"architecture {machine!r} is not supported (one of {allowed})") from None


def _blob(members, archive, digest):
    algorithm, hexdigest = digest.split(":", 1) if ":" in digest else (digest, "")
    name = f"blobs/{algorithm}/{hexdigest}"
    member = members.get(name)
    if member is None:
        raise ArchiveError(f"{archive}: blob {digest} named by the index is not in the archive")
    return json.load(archive.extractfile(member))


def _architectures(members, archive, descriptor):
    document = _blob(members, archive, descriptor["digest"])
    if document.get("mediaType", descriptor.get("mediaType")) in INDEX_TYPES or "manifests" in document:
        found = set()
        for child in document.get("manifests", []):
            found |= _architectures(members, archive, child)
        return found
    config = _blob(members, archive, document["config"]["digest"])
    return {config["architecture"]} if config.get("architecture") else set()


def archive_image(path):
    """OCI archive -> {digest: the first manifest's digest (what containerd lists), architectures: [sorted]}."""
    try:
        archive = tarfile.open(path)  # noqa: SIM115 - closed below
    except (OSError, tarfile.TarError) as error:
        raise ArchiveError(f"{path}: cannot read the OCI archive ({error})") from None
    with archive:
        members = {member.name.removeprefix("./"): member for member in archive.getmembers() if member.isfile()}
        if "index.json" not in members:
            raise ArchiveError(f"{path}: no index.json, not an OCI archive (podman save --format oci-archive)")
        index = json.load(archive.extractfile(members["index.json"]))
        manifests = index.get("manifests") or []
        if not manifests:
            raise ArchiveError(f"{path}: index.json lists no manifest")
        architectures = set()
        try:
            for descriptor in manifests:
                architectures |= _architectures(members, archive, descriptor)
        except (KeyError, TypeError, json.JSONDecodeError) as error:
            raise ArchiveError(f"{path}: malformed manifest or config ({error!r})") from None
    return {"digest": manifests[0]["digest"], "architectures": sorted(architectures)}
