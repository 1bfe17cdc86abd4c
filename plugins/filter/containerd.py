# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""containerd config schema version for an installed containerd; which images a node still lacks."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

VERSION = re.compile(r"\bv?(\d+)\.(\d+)\.(\d+)")


def containerd_config_version(version_output):
    """`containerd --version` output (or a bare version) -> config schema version (2 or 3)."""
    match = VERSION.search(str(version_output))
    if not match:
        raise AnsibleFilterError(f"cannot find a version in containerd output {version_output!r}")
    major = int(match.group(1))
    if major == 1:
        if int(match.group(2)) < 6:
            raise AnsibleFilterError(f"containerd {match.group(0)} is too old: 1.6 or newer is required")
        return 2
    if major == 2:
        return 3
    raise AnsibleFilterError(f"containerd {match.group(0)} is not supported (1.6+ uses config v2, 2.x uses v3)")


def containerd_images_missing(wanted, ls_output):
    """Items of `wanted` ({ref, digest?}) that `ctr images ls` output lacks, or lists with another digest."""
    present = {}
    for line in str(ls_output).splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            present[fields[0]] = fields[2]
    missing = []
    for item in wanted or []:
        if not isinstance(item, dict) or not item.get("ref"):
            raise AnsibleFilterError(f"each image needs a ref (and an archive): got {item!r}")
        digest = present.get(item["ref"])
        if digest is None or (item.get("digest") and item["digest"] != digest):
            missing.append(item)
    return missing


class FilterModule:
    def filters(self):
        return {
            "containerd_config_version": containerd_config_version,
            "containerd_images_missing": containerd_images_missing,
        }
