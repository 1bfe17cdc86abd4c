#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Models: what to serve, from which provider, under which OpenAI model name."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model
short_description: Manage a model (source, revision, served name, architecture facts)
version_added: 0.1.0
description:
  - Creates or updates a C(Model) (C(tokenfactory.io/v1alpha1)) that points at weights of a C(Provider) -
    a Hugging Face repo id, an NGC path, or an object storage URL (checked against the provider's type).
  - C(spec.servedName) is the OpenAI C(model) field clients send to the gateway.
  - C(spec.architecture) feeds the capacity check of M(tokenfactory.spark.model_deployment). It is filled in for
    well-known models (for example C(Qwen/Qwen2-0.5B-Instruct), C(meta-llama/Llama-3.1-8B-Instruct)); pass
    O(architecture) for others (values from the model's C(config.json)).
  - Credentials come from the Provider's Secret; nothing secret is stored on the Model.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  provider:
    description: Name of the C(Provider) in the same namespace. Required with O(state=present).
    type: str
  source:
    description:
      - Where the weights are. Required with O(state=present).
      - C(huggingface) providers take C(org/name), C(ngc) providers C(org/team/name[:tag]), C(s3) providers
        C(s3://bucket/path).
    type: str
  revision:
    description: Branch, tag or commit of the source.
    type: str
  served_name:
    description: OpenAI model name clients use. Defaults to O(source).
    type: str
  architecture:
    description: Size facts for the capacity check. Defaults to the built-in facts of well-known models.
    type: dict
    suboptions:
      parameters_billions:
        description: Parameter count in billions, as a decimal string (C("0.494")).
        type: str
        required: true
      num_layers:
        description: Transformer layers (C(num_hidden_layers)).
        type: int
        required: true
      num_kv_heads:
        description: Key/value heads (C(num_key_value_heads)).
        type: int
        required: true
      head_dim:
        description: Dimension of one attention head.
        type: int
        required: true
      max_context_length:
        description: Longest context the model supports (C(max_position_embeddings)).
        type: int
        required: true
      dtype:
        description: Storage type of the weights.
        type: str
        required: true
        choices: [float32, bfloat16, float16, fp8, nvfp4, int4]
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.object
"""

EXAMPLES = r"""
- name: Qwen2 0.5B Instruct from Hugging Face (architecture filled in)
  tokenfactory.spark.model:
    name: qwen2-0-5b
    namespace: tokenfactory
    provider: huggingface
    source: Qwen/Qwen2-0.5B-Instruct

- name: A model the collection does not know
  tokenfactory.spark.model:
    name: my-model
    namespace: tokenfactory
    provider: huggingface
    source: my-org/my-model
    revision: v2
    served_name: my-model
    architecture:
      parameters_billions: "3.2"
      num_layers: 28
      num_kv_heads: 8
      head_dim: 128
      max_context_length: 131072
      dtype: bfloat16
"""

RETURN = r"""
model:
  description: The Model object as stored.
  returned: always
  type: dict
served_name:
  description: The OpenAI model name of this model.
  returned: when state=present
  type: str
  sample: Qwen/Qwen2-0.5B-Instruct
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import (
    MODEL,
    MODEL_DEPLOYMENT,
    PROVIDER,
    tf_object,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.model_architecture import resolve
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import TokenFactoryModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import model_source
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import kind_fields, kind_options
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.references import reference
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_object


def main():
    tfm = TokenFactoryModule(
        kind_options("Model"),
        required_if=[("state", "present", ["provider", "source"])],
    )

    def present(name, namespace):
        params = tfm.params
        provider = reference(tfm.client, PROVIDER, "provider", params["provider"], namespace)
        source = model_source("source", params["source"], provider["spec"]["type"])
        given = {**params, "served_name": params["served_name"] or source}
        spec = kind_fields("Model", given, skip=("architecture",))
        current = tfm.client.get(MODEL, name, namespace)
        spec["architecture"], status = resolve(
            tfm, params["architecture"], provider, source, params["revision"], current
        )
        stored = tfm.objects.ensure(tf_object("Model", name, namespace, spec))
        if status is not None:
            stored = tfm.objects.write_status(stored, status)
        return {"model": stored, "served_name": spec["servedName"], "architecture": spec["architecture"]}

    run_object(tfm, MODEL, "model", present, used_by=(MODEL_DEPLOYMENT, "model"))


if __name__ == "__main__":
    main()
