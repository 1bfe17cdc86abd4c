# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Documentation shared by the Token Factory modules: Kubernetes auth, object options, attributes."""

from __future__ import annotations


class ModuleDocFragment:
    # With kubernetes.core.k8s_auth_options (the connection options themselves): timeout, namespace, action group.
    DOCUMENTATION = r"""
options:
  request_timeout:
    description: Seconds to wait for each API request; an API server that does not answer in time fails the task.
      Conflicts (409), throttling (429) and server errors (5xx) are retried up to 5 times with exponential backoff
      (at least the server's C(Retry-After)).
    type: int
    default: 30
  namespace:
    description: Namespace of the Token Factory objects.
    type: str
    default: default
attributes:
  action_group:
    description: Use C(group/tokenfactory.spark.kubernetes) in C(module_defaults) to set the auth options and namespace.
    support: full
    membership:
      - tokenfactory.spark.kubernetes
requirements:
  - kubernetes >= 30.0.0 (Python client; pinned in the collection's requirements.txt)
  - the kubernetes.core collection (the connection options are its own; they configure the kubernetes client)
notes:
  - "Set these once for all Token Factory Kubernetes modules with
    C(module_defaults: {group/tokenfactory.spark.kubernetes: {kubeconfig: ..., namespace: ...}}); the gateway
    admin modules have their own group, C(tokenfactory.spark.gateway_admin)."
  - A O(kubeconfig) that cannot be read fails naming the option and the path it tried. Given as a dict, only its
    naming values (cluster, user and context names, server) appear in messages; credentials stay masked.
"""

    # Object modules: one named object, present or absent, optionally waited for.
    OBJECT = r"""
options:
  wait:
    description:
      - Wait until the object reaches its target state (ready, or deleted with all its children).
      - Progress messages are returned in RV(ignore:progress) and logged.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait when O(wait=true); the module fails with the last observed state after that.
    type: int
    default: 300
  name:
    description: Name of the object (DNS-1123 subdomain).
    type: str
    required: true
  state:
    description:
      - V(present) creates or updates the object with server-side apply (field manager C(tokenfactory.spark)).
      - V(absent) deletes it; children owned through ownerReferences are deleted with it.
    type: str
    default: present
    choices: [present, absent]
attributes:
  check_mode:
    description: Every change is computed with a server-side dry run; nothing is written.
    support: full
  diff_mode:
    description: Returns before/after of each object it would change (secret data hidden).
    support: full
"""

    # The *_info modules: objects of a namespace, or one by name, with their status; never Secret data.
    INFO = r"""
notes:
  - Returns the objects of O(namespace), or the one called O(name), with spec and status; Secret data is never read.
options:
  name:
    description: Name of one object to read. Without it all objects of the namespace are returned.
    type: str
  label_selectors:
    description: Label selectors (C(key=value), C(key!=value), C(key)) that all must match.
    type: list
    elements: str
    default: []
"""
