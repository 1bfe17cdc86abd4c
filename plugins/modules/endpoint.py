#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Endpoints: the OpenAI-compatible host name users call, served by the Token Factory gateway."""

from __future__ import annotations

DOCUMENTATION = r"""
module: endpoint
short_description: Manage an inference endpoint (host name, TLS, compute cluster, gateway)
version_added: 0.1.0
description:
  - Creates or updates an C(Endpoint) (C(tokenfactory.io/v1alpha1)) - the host name clients use, its TLS certificate,
    the C(ComputeCluster) whose GPUs serve it and the gateway Service that terminates it.
  - C(status.baseURL) is the OpenAI base URL (C(https://<hostname>/v1)); the gateway reads it.
  - C(status.phase) says whether the gateway behind it serves - V(Ready) once a pod of the gateway Service
    (O(gateway)) is ready to take traffic, V(Pending) otherwise (C(status.message) says why) - as observed when the
    module runs, and kept current between runs by the status keeper the gateway role deploys
    (C(gateway_status_keeper)); C(status.gatewayReadyPods) counts them.
  - With O(tls_cert) and O(tls_key) the module stores them in a C(kubernetes.io/tls) Secret C(<name>-tls) owned
    by the Endpoint. The key is never logged or returned; certificate and key must match.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  hostname:
    description: DNS name clients call (no scheme, no path). Required with O(state=present).
    type: str
  port:
    description: Port of the public URL when it is not 443 (TLS) or 80.
    type: int
  compute_cluster:
    description: Name of the C(ComputeCluster) in the same namespace. Required with O(state=present).
    type: str
  gateway:
    description: Gateway Service that serves this endpoint.
    type: dict
    default: {}
    suboptions:
      service_name:
        description: Service name of the gateway.
        type: str
        default: tokenfactory-gateway
      namespace:
        description:
          - Namespace of the gateway Service; the default is where the C(tokenfactory.spark.gateway) role deploys it
            (its C(gateway_namespace) default).
        type: str
        default: tokenfactory-system
      port:
        description: Port of the gateway Service.
        type: int
        default: 8080
  tls_cert:
    description: PEM certificate (chain) for O(hostname). Requires O(tls_key).
    type: str
  tls_key:
    description: PEM private key of O(tls_cert). Never logged or returned.
    type: str
  tls_secret:
    description: Existing C(kubernetes.io/tls) Secret to use instead of O(tls_cert)/O(tls_key).
    type: str
  external_url:
    description:
      - Public base URL when it differs from C(scheme://hostname[:port]) (for example a lab gateway on a local port).
        C(/v1) is appended when missing.
    type: str
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.object
"""

EXAMPLES = r"""
- name: Public endpoint with TLS from files
  tokenfactory.spark.endpoint:
    name: public
    namespace: tokenfactory
    hostname: llm.example.com
    compute_cluster: spark
    tls_cert: "{{ lookup('ansible.builtin.file', 'llm.example.com.crt') }}"
    tls_key: "{{ lookup('ansible.builtin.file', 'llm.example.com.key') }}"
  register: ep

- name: Use its base URL
  ansible.builtin.debug:
    msg: "OPENAI_BASE_URL={{ ep.base_url }}"
"""

RETURN = r"""
endpoint:
  description: The Endpoint object as stored (with status).
  returned: always
  type: dict
base_url:
  description: OpenAI-compatible base URL of the endpoint.
  returned: when state=present
  type: str
  sample: https://llm.example.com/v1
tls_secret:
  description: Name of the TLS Secret (never its data).
  returned: when TLS is configured
  type: str
  sample: public-tls
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import SECRET
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import (
    COMPUTE_CLUSTER,
    ENDPOINT,
    MODEL_DEPLOYMENT,
    tf_object,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import TokenFactoryModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    check_tls_pair,
    dns_subdomain,
    pem,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import kind_fields, kind_options
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.references import reference
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_object
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.secrets import (
    ensure_with_secret,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import endpoint_status


def tls_spec(tfm, name):
    params = tfm.params
    if params["tls_secret"]:
        secret = dns_subdomain("tls_secret", params["tls_secret"])
        existing = tfm.client.get(SECRET, secret, params["namespace"])
        if existing is None or existing.get("type") != "kubernetes.io/tls":
            problem = "not found" if existing is None else f"has type {existing.get('type')}"
            raise ValidationError("tls_secret", f"Secret {secret!r} {problem}; a kubernetes.io/tls Secret is required")
        return secret, None
    if params["tls_cert"]:
        cert = pem("tls_cert", params["tls_cert"], ["CERTIFICATE"])
        key = pem("tls_key", params["tls_key"], ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"])
        check_tls_pair("tls_cert", cert, key)
        return f"{name}-tls", {"tls.crt": cert, "tls.key": key}
    return None, None


def main():
    tfm = TokenFactoryModule(
        {
            **kind_options("Endpoint"),
            "tls_cert": {"type": "str"},
            "tls_key": {"type": "str", "no_log": True},
            "tls_secret": {"type": "str", "no_log": False},
        },
        required_if=[("state", "present", ["hostname", "compute_cluster"])],
        required_together=[("tls_cert", "tls_key")],
        mutually_exclusive=[("tls_secret", "tls_cert")],
    )

    def present(name, namespace):
        params = tfm.params
        hostname = params["hostname"].lower()
        if len(hostname) > 253 or ("." not in hostname and hostname != "localhost"):
            raise ValidationError(
                "hostname", f"{params['hostname']!r} must be a fully qualified DNS name like llm.example.com"
            )
        spec = kind_fields("Endpoint", {**params, "hostname": hostname})
        reference(tfm.client, COMPUTE_CLUSTER, "compute_cluster", params["compute_cluster"], namespace)
        secret_name, secret_data = tls_spec(tfm, name)
        if secret_name:
            spec["tls"] = {"secretName": secret_name}

        secret = (secret_name, "kubernetes.io/tls", secret_data) if secret_data else None
        applied = ensure_with_secret(tfm.objects, tf_object("Endpoint", name, namespace, spec), secret)
        status = endpoint_status(tfm.client, spec)
        stored = tfm.objects.write_status(applied, status)
        tls = {"tls_secret": secret_name} if secret_name else {}
        return {"endpoint": stored, "base_url": status["baseURL"], **tls}

    run_object(tfm, ENDPOINT, "endpoint", present, used_by=(MODEL_DEPLOYMENT, "endpoint"))


if __name__ == "__main__":
    main()
