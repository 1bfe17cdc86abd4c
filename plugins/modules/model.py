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
  - C(spec.architecture) feeds the capacity check of M(tokenfactory.spark.model_deployment). Without
    O(architecture) the module derives it from the model's own files, read through the Provider - layers, KV heads,
    head dimension and context length from C(config.json) (C(num_key_value_heads) defaults to
    C(num_attention_heads), C(head_dim) to C(hidden_size / num_attention_heads), C(text_config) of multimodal configs
    is read, the dtype from C(torch_dtype)/C(dtype) or C(quantization_config)), the parameter count from
    C(model.safetensors.index.json) (C(metadata.total_size) / bytes per parameter) or the header of a single
    C(model.safetensors) (only its first bytes are read).
  - C(huggingface) providers are read at C(<url>/<org>/<name>/resolve/<revision>/<file>), C(url) defaulting to
    C(https://huggingface.co) (set the Provider's C(url) for a mirror) and O(revision) to C(main), with the
    Provider's token as an C(Authorization) bearer header (sent only to that host, never logged or returned).
    C(ngc) models are read only through a mirror in the same layout (the Provider's C(url) is required; the tag is
    the revision).
    C(s3) models are read with unsigned HTTPS GETs (public buckets and mirrors) at C(<url>/<bucket>/<path>/<file>),
    or C(https://<bucket>.s3.amazonaws.com/<path>/<file>) without C(url).
  - The derived facts are cached in the Model's C(status.architecture) with what they came from
    (C(status.architectureFrom) - provider, source, revision, provider URL, origin); a re-run with the same values
    reads no file. Check mode reads the files and writes nothing.
  - HTTP 401/403/404 or an unreadable C(config.json) fail naming the URL. Only when the files cannot be reached
    (no network, 5xx, NGC without mirror) does the module use its built-in facts of a few well-known models (for
    example C(Qwen/Qwen2-0.5B-Instruct), C(meta-llama/Llama-3.1-8B-Instruct)) with a warning; O(architecture)
    always wins and reads nothing.
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
    description:
      - Size facts for the capacity check. When given, nothing is read from the Provider.
      - Default - derived from the model's C(config.json) and weight index (see the description).
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
- name: Qwen2 0.5B Instruct from Hugging Face (architecture derived from its config.json)
  tokenfactory.spark.model:
    name: qwen2-0-5b
    namespace: tokenfactory
    provider: huggingface
    source: Qwen/Qwen2-0.5B-Instruct

- name: Any model of a private hub mirror (the Provider's url and token are used)
  tokenfactory.spark.model:
    name: my-model
    namespace: tokenfactory
    provider: hf-mirror
    source: my-org/my-model
    revision: v2

- name: Architecture given explicitly (nothing is fetched)
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
architecture:
  description: The architecture facts in C(spec.architecture) (given, cached, derived or built-in).
  returned: when state=present
  type: dict
  sample: {parametersBillions: "0.494", numLayers: 24, numKVHeads: 2, headDim: 64, maxContextLength: 32768,
    dtype: bfloat16}
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
