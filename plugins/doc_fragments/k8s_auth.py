# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Documentation shared by the Token Factory modules: Kubernetes auth, object options, attributes."""

from __future__ import annotations


class ModuleDocFragment:
    # Connection and authentication (k8s/client.py AUTH_ARG_SPEC), namespace, action group membership.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file. Without it, C(KUBECONFIG) / C(~/.kube/config) is used, then the in-cluster
        service account.
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
    type: path
  context:
    description:
      - Name of the kubeconfig context to use (default is the current context).
      - Can also be set with the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - URL of the API server, for example V(https://10.0.0.10:6443). Overrides the kubeconfig's server.
      - Can also be set with the E(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Bearer token for the API server. Never logged.
      - Can also be set with the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. Default comes from the kubeconfig (normally true).
      - Can also be set with the E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - Path to a CA bundle that signs the API server's certificate.
      - Can also be set with the E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Path to a client certificate for mutual TLS.
      - Can also be set with the E(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Path to the key of O(client_cert).
      - Can also be set with the E(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [key_file]
  request_timeout:
    description: Seconds to wait for each API request.
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
notes:
  - "Set these once for all Token Factory Kubernetes modules with
    C(module_defaults: {group/tokenfactory.spark.kubernetes: {kubeconfig: ..., namespace: ...}}); the gateway
    admin modules have their own group, C(tokenfactory.spark.gateway_admin)."
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
