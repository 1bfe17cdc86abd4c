#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Model providers: where weights come from and with which credentials."""

from __future__ import annotations

DOCUMENTATION = r"""
module: provider
short_description: Manage a model provider (Hugging Face, NVIDIA NGC, object storage) and its credentials
version_added: 0.1.0
description:
  - Creates or updates a C(Provider) (C(tokenfactory.io/v1alpha1)) - the kind of model source and the Secret
    holding its credentials.
  - With O(token) the module stores the token in a Secret C(<name>-credentials) (key C(token)) owned by the
    Provider, so deleting the Provider deletes it. The token is never logged or returned.
  - Engines receive the credential as C(HF_TOKEN) (huggingface), C(NGC_API_KEY) (ngc) or C(AWS_SECRET_ACCESS_KEY) (s3).
author:
  - Token Factory maintainers (@tokenfactory)
options:
  type:
    description: Kind of model source. Required with O(state=present).
    type: str
    choices: [huggingface, ngc, s3]
  display_name:
    description: Name shown to operators.
    type: str
  url:
    description: Base URL of the provider (for example a private Hugging Face mirror or an S3 endpoint).
    type: str
  token:
    description: Access token to store in the provider's own Secret. Never logged or returned.
    type: str
  credentials_secret:
    description: Use an existing Secret instead of O(token). It must exist and contain O(credentials_secret_key).
    type: str
  credentials_secret_key:
    description: Key inside O(credentials_secret) (or the created Secret) that holds the token.
    type: str
    default: token
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.object
"""

EXAMPLES = r"""
- name: Hugging Face, token from the vault
  tokenfactory.spark.provider:
    name: huggingface
    namespace: tokenfactory
    type: huggingface
    token: "{{ vault_hf_token }}"

- name: NGC with an existing secret
  tokenfactory.spark.provider:
    name: ngc
    namespace: tokenfactory
    type: ngc
    credentials_secret: ngc-api-key
    credentials_secret_key: NGC_API_KEY
"""

RETURN = r"""
provider:
  description: The Provider object as stored; references the Secret by name only.
  returned: always
  type: dict
  sample:
    spec:
      type: huggingface
      credentialsSecret: {name: huggingface-credentials, key: token}
credentials_secret:
  description: Name of the Secret holding the credential (its data is never returned).
  returned: when a credential is configured
  type: str
  sample: huggingface-credentials
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import SECRET
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL, PROVIDER, tf_object
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import TokenFactoryModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import (
    ValidationError,
    dns_subdomain,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import kind_fields, kind_options
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_object
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.secrets import (
    ensure_with_secret,
)


def main():
    tfm = TokenFactoryModule(
        {
            **kind_options("Provider"),
            "token": {"type": "str", "no_log": True},
            "credentials_secret": {"type": "str", "no_log": False},
            "credentials_secret_key": {"type": "str", "default": "token", "no_log": False},
        },
        mutually_exclusive=[("token", "credentials_secret")],
        required_if=[("state", "present", ["type"])],
    )

    def present(name, namespace):
        params = tfm.params
        spec = kind_fields("Provider", params)
        key = params["credentials_secret_key"]
        secret_name = None
        if params["credentials_secret"]:
            secret_name = dns_subdomain("credentials_secret", params["credentials_secret"])
            existing = tfm.client.get(SECRET, secret_name, namespace)
            if existing is None:
                raise ValidationError(
                    "credentials_secret", f"Secret {secret_name!r} not found in namespace {namespace}"
                )
            if key not in existing.get("data", {}):
                keys = ", ".join(sorted(existing.get("data", {}))) or "none"
                raise ValidationError(
                    "credentials_secret_key", f"{key!r} is not a key of Secret {secret_name} (keys: {keys})"
                )
        elif params["token"]:
            if not params["token"].strip():
                raise ValidationError("token", "is empty")
            secret_name = f"{name}-credentials"
        if secret_name:
            spec["credentialsSecret"] = {"name": secret_name, "key": key}

        secret = (secret_name, "Opaque", {key: params["token"].strip()}) if params["token"] else None
        stored = ensure_with_secret(tfm.objects, tf_object("Provider", name, namespace, spec), secret)
        return {"provider": stored, **({"credentials_secret": secret_name} if secret_name else {})}

    run_object(tfm, PROVIDER, "provider", present, used_by=(MODEL, "provider"))


if __name__ == "__main__":
    main()
