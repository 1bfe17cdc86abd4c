# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""A machine's OCI architecture name; what an OCI image archive on the controller holds."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.tokenfactory.spark.plugins.module_utils.host import oci_archive


def oci_architecture(machine):
    try:
        return oci_archive.oci_architecture(machine)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None


def oci_archive_image(path):
    try:
        return oci_archive.archive_image(path)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None


class FilterModule:
    def filters(self):
        return {"oci_architecture": oci_architecture, "oci_archive_image": oci_archive_image}
