#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Install or remove the Token Factory CustomResourceDefinitions."""

from __future__ import annotations

DOCUMENTATION = r"""
module: crds
short_description: Install the Token Factory CustomResourceDefinitions (tokenfactory.io/v1alpha1)
version_added: 0.1.0
description:
  - Applies the CRDs of C(ComputeCluster), C(Endpoint), C(Provider), C(Model) and C(ModelDeployment)
    (group C(tokenfactory.io), version C(v1alpha1), namespaced) with server-side apply, and waits until the
    API server serves them.
  - The CRDs ship inside the collection as data (C(plugins/module_utils/tokenfactory/crds.py)); their OpenAPI schemas
    reject bad objects (enums, patterns, ranges, required fields, C(minReplicas <= maxReplicas)).
  - Needs permission to manage CustomResourceDefinitions (cluster-admin); the other modules only need
    rights on the objects in their namespace.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  state:
    description:
      - V(present) installs or updates the CRDs.
      - V(absent) deletes them, which deletes B(every) Token Factory object in the cluster and, through
        ownerReferences, their workloads.
    type: str
    default: present
    choices: [present, absent]
  wait:
    description: Wait until each CRD is C(Established) (present) or gone (absent).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait when O(wait=true).
    type: int
    default: 120
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
notes:
  - CRDs are cluster-scoped; O(namespace) is accepted (and ignored) so that C(module_defaults) of the action group
    can set it for every module.
attributes:
  check_mode:
    description: Server-side dry run; nothing is written.
    support: full
  diff_mode:
    description: Returns before/after of each CRD it would change.
    support: full
"""

EXAMPLES = r"""
- name: Install the Token Factory CRDs
  tokenfactory.spark.crds:
    kubeconfig: /etc/kubernetes/admin.conf

- name: Show what would change, without writing
  tokenfactory.spark.crds:
  check_mode: true
  diff: true
"""

RETURN = r"""
crds:
  description: Names of the CRDs managed by this module.
  returned: always
  type: list
  elements: str
  sample: [computeclusters.tokenfactory.io, modeldeployments.tokenfactory.io]
api_version:
  description: API version of the Token Factory objects.
  returned: always
  type: str
  sample: tokenfactory.io/v1alpha1
progress:
  description: Progress messages recorded while waiting.
  returned: when the module waited
  type: list
  elements: str
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import CRD
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import crd_established
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.crds import all_crds
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import API_VERSION
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import (
    NAMESPACE_ARG_SPEC,
    TokenFactoryModule,
)


def main():
    tfm = TokenFactoryModule(
        {
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
            "wait": {"type": "bool", "default": True},
            "wait_timeout": {"type": "int", "default": 120},
        },
        base_spec=NAMESPACE_ARG_SPEC,
    )

    def body():
        crds = all_crds()
        names = [crd["metadata"]["name"] for crd in crds]
        if tfm.params["state"] == "absent":
            for name in names:
                tfm.objects.remove(CRD, name, wait=tfm.params["wait"])
        else:
            current_and_planned = [(crd, *tfm.objects.plan(crd)) for crd in crds]
            for crd, current, planned in current_and_planned:
                tfm.objects.write(crd, current, planned)
            if tfm.params["wait"] and not tfm.check_mode:
                for name in names:
                    tfm.wait_until(f"CRD {name} Established", crd_established(tfm.client, name))
        return {"crds": names, "api_version": API_VERSION}

    tfm.run(body)


if __name__ == "__main__":
    main()
