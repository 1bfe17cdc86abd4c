#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read ModelDeployment objects."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_deployment_info
short_description: List Token Factory model deployments, their status and GPU placement
description:
  - Deployments with their phase, upstream URL, GPU placement and capacity estimate.
  - C(status) is what M(tokenfactory.spark.model_deployment) observed when it last ran, or what the status keeper
    (gateway role, C(gateway_status_keeper)) recomputed since with the same code. With O(observe=true) the
    module also reads each deployment's engine workload and pods now (writing nothing) and returns RV(rollouts)
    and RV(progress_line), for an C(until) loop that watches a rollout (see C(playbooks/serve.yml)).
version_added: 0.1.0
author: Token Factory maintainers (@tokenfactory)
options:
  observe:
    description: Also report the rollout as the engine's workload and pods show it now (RV(rollouts)).
    type: bool
    default: false
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.info
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Watch a rollout (the tokenfactory.spark.progress callback prints progress_line on each retry)
  tokenfactory.spark.model_deployment_info:
    name: qwen2-0-5b
    namespace: tokenfactory
    observe: true
  register: rollout
  until: rollout.rollouts | map(attribute='phase') | intersect(['Ready', 'Failed']) | length > 0
  retries: 180
  delay: 10

- name: Deployments shared with tenant acme
  tokenfactory.spark.model_deployment_info:
    namespace: tokenfactory
  register: info

- name: Show the ones acme may use
  ansible.builtin.debug:
    msg: "{{ info.model_deployments | selectattr('spec.tenants', 'contains', 'acme')
      | map(attribute='metadata.name') }}"
"""

RETURN = r"""
model_deployments:
  description: The ModelDeployment objects found (managedFields removed), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    status:
      description: What the module observed when it last ran (or the status keeper since).
      type: dict
      contains:
        phase:
          description: Pending, Progressing, Ready (the only phase the gateway routes) or Failed.
          type: str
        upstreamURL:
          description: Where the gateway sends the requests.
          type: str
        placement:
          description: gpuType, GPUs per replica and pod, nodes per replica, the nodes and fabric.
          type: dict
        capacity:
          description: Bytes per GPU for weights, KV cache, overhead, required and usable.
          type: dict
        children:
          description: The objects it rendered, as Kind/name.
          type: list
rollouts:
  description: The rollout of each deployment as its workload and pods show it now, in RV(model_deployments) order.
  returned: when O(observe=true)
  type: list
  elements: dict
  contains:
    name:
      description: The ModelDeployment.
      type: str
    phase:
      description: Pending, Progressing, Ready or Failed, decided as M(tokenfactory.spark.model_deployment) does.
      type: str
    readyReplicas:
      description: Ready engine replicas.
      type: int
    replicas:
      description: Wanted replicas (the autoscaling minimum when autoscaling).
      type: int
    message:
      description: Why it is in this phase; for Failed the pod, container, reason, last exit and log lines.
      type: str
    lastEvent:
      description: "The newest Kubernetes event about the workload or its pods (C(Kind/name Reason: message))."
      type: str
    progressLine:
      description: All of the above on one line.
      type: str
progress_line:
  description: The RV(rollouts) progress lines joined with C(; ).
  returned: when O(observe=true)
  type: str
  sample: "ModelDeployment tokenfactory/qwen2-0-5b: Progressing, 0/1 ready - 0 of 1 updated replicas available"
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL_DEPLOYMENT
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_info
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.watch import rollout_now


def observed(tfm, items):
    if not tfm.params["observe"]:
        return {}
    rollouts = [rollout_now(tfm.client, md) for md in items]
    return {"rollouts": rollouts, "progress_line": "; ".join(r["progressLine"] for r in rollouts)}


def main():
    run_info(MODEL_DEPLOYMENT, "model_deployments", {"observe": {"type": "bool", "default": False}}, observed)


if __name__ == "__main__":
    main()
