# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""The component versions the collection pins, read from its one list (versions.yml at the collection root)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: pinned_version
author:
  - Token Factory maintainers (@tokenfactory)
short_description: A component version pinned in the collection's versions.yml
description:
  - Returns the version that C(versions.yml) at the root of the collection pins for each named component
    (C(kubernetes), C(kubernetes_upgrade_from), C(cni_plugins), C(helm), ...).
  - It is the one place these versions are decided; the roles' defaults, the lab inventories and the build
    scripts read it.
options:
  _terms:
    description: Names of components (keys of C(versions.yml)).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: The Kubernetes version the collection installs by default
  ansible.builtin.debug:
    msg: "{{ lookup('tokenfactory.spark.pinned_version', 'kubernetes') }}"
"""

RETURN = r"""
_raw:
  description: The pinned version of each named component, as C(versions.yml) writes it.
  type: list
  elements: str
"""

import pathlib

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

VERSIONS_FILE = pathlib.Path(__file__).resolve().parents[2] / "versions.yml"


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        pinned = yaml.safe_load(VERSIONS_FILE.read_text())
        unknown = [name for name in terms if name not in pinned]
        if unknown:
            raise AnsibleLookupError(f"{VERSIONS_FILE} pins no version of {unknown}; it pins {sorted(pinned)}")
        return [str(pinned[name]) for name in terms]
