# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Filters that normalise GPU facts (compute capability, product names)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: compute_capability_to_sm
short_description: Turn a CUDA compute capability into its SM architecture name
version_added: 0.1.0
description:
  - Converts a compute capability such as C(12.1) (GB10, DGX Spark) or C(9.0) (H100) into C(sm_121) or C(sm_90).
options:
  _input:
    description: Compute capability as C(MAJOR.MINOR) string, or a C([major, minor]) list.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: GB10 is sm_121
  ansible.builtin.debug:
    msg: "{{ '12.1' | tokenfactory.spark.compute_capability_to_sm }}"
"""

RETURN = r"""
_value:
  description: The SM architecture name.
  type: str
  sample: sm_121
"""

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
