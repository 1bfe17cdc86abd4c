# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Filters that normalise GPU facts (compute capability, product names)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def compute_capability_to_sm(value):
    """'12.1' or [12, 1] -> 'sm_121'."""
    if isinstance(value, list | tuple) and len(value) == 2:
        major, minor = value
    else:
        text = str(value).strip()
        major, sep, minor = text.partition(".")
        if not sep:
            raise AnsibleFilterError(f"compute capability must look like MAJOR.MINOR, got {value!r}")
    try:
        major_i, minor_i = int(major), int(minor)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"compute capability must look like MAJOR.MINOR, got {value!r}") from exc
    if major_i < 1 or not 0 <= minor_i <= 9:
        raise AnsibleFilterError(f"compute capability out of range: {value!r}")
    return f"sm_{major_i}{minor_i}"


class FilterModule:
    def filters(self):
        return {"compute_capability_to_sm": compute_capability_to_sm}
