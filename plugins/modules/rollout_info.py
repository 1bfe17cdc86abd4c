#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Where the rollout of a Deployment or StatefulSet stands now, with the reason of a stuck pod: for until loops."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rollout_info
short_description: The rollout of a Deployment or StatefulSet now (phase, ready replicas, stuck pod's reason)
version_added: 0.3.0
description:
  - Reads a Deployment or StatefulSet and its pods and returns its phase, decided as
    M(tokenfactory.spark.model_deployment) decides it for engines - V(Ready) when every wanted replica runs the
    current spec and is available (the checks of C(kubectl rollout status)), V(Failed) when a pod is stuck
    (CrashLoopBackOff with its last log lines, ImagePullBackOff, ErrImagePull, ...) or the rollout passed its
    progress deadline, V(Pending) when a pod cannot be scheduled or the workload does not exist yet, else
    V(Progressing) - and the newest event about the workload or its pods.
  - Meant for an C(until) loop (the gateway role waits for the gateway with it); RV(progress_line) is what the
    C(tokenfactory.spark.progress) callback prints on each retry.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  kind:
    description: Kind of the workload.
    type: str
    default: Deployment
    choices: [Deployment, StatefulSet]
  name:
    description: Name of the workload.
    type: str
    required: true
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Wait for the gateway, one progress line per look
  tokenfactory.spark.rollout_info:
    name: tokenfactory-gateway
    namespace: tokenfactory-system
  register: gateway_rollout
  until: gateway_rollout.rollout.phase in ['Ready', 'Failed']
  retries: 60
  delay: 5
  failed_when: false

- name: Fail with the reason
  ansible.builtin.fail:
    msg: "{{ gateway_rollout.progress_line }}"
  when: gateway_rollout.rollout.phase != 'Ready'
"""

RETURN = r"""
rollout:
  description: Where the rollout stands.
  returned: always
  type: dict
  contains:
    phase:
      description: Pending, Progressing, Ready or Failed.
      type: str
    readyReplicas:
      description: Ready replicas.
      type: int
    replicas:
      description: Wanted replicas.
      type: int
    message:
      description: Why it is in this phase; for Failed the pod, container, reason, last exit and log lines.
      type: str
    lastEvent:
      description: "The newest event about the workload or its pods (C(Kind/name Reason: message)), or empty."
      type: str
  sample:
    phase: Progressing
    readyReplicas: 0
    replicas: 1
    message: 0 of 1 updated replicas available
    lastEvent: "Pod/tokenfactory-gateway-6d9c-x2x Pulling: Pulling image ..."
progress_line:
  description: All of RV(rollout) on one line.
  returned: always
  type: str
  sample: "Deployment tokenfactory-system/tokenfactory-gateway: Progressing, 0/1 ready - 0 of 1 updated replicas
    available"
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import DEPLOYMENT, POD, STATEFUL_SET
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.progress import last_event, progress_line
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import PENDING
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.engines.pods import workload_phase
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import (
    NAMESPACE_ARG_SPEC,
    TokenFactoryModule,
)

ARG_SPEC = {
    "kind": {"type": "str", "default": "Deployment", "choices": ["Deployment", "StatefulSet"]},
    "name": {"type": "str", "required": True},
}
TYPES = {DEPLOYMENT.kind: DEPLOYMENT, STATEFUL_SET.kind: STATEFUL_SET}


def selector(workload):
    labels = ((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def observe(client, kind, name, namespace):
    workload = client.get(TYPES[kind], name, namespace)
    if workload is None:
        return {"phase": PENDING, "readyReplicas": 0, "replicas": 0, "message": f"{kind} does not exist yet"}, []
    match = selector(workload)
    pods = client.list(POD, namespace, match) if match else []
    desired = workload["spec"].get("replicas", 1)
    phase, message, _nodes = workload_phase(client, desired, workload, pods)
    ready = (workload.get("status") or {}).get("readyReplicas", 0)
    seen = {"phase": phase, "readyReplicas": ready, "replicas": desired, "message": message}
    return seen, [pod["metadata"]["name"] for pod in pods]


def main():
    tfm = TokenFactoryModule(ARG_SPEC, base_spec=NAMESPACE_ARG_SPEC)

    def body():
        kind, name, namespace = tfm.params["kind"], tfm.params["name"], tfm.params["namespace"]
        seen, pods = observe(tfm.client, kind, name, namespace)
        seen["lastEvent"] = last_event(tfm.client, namespace, [name, *pods])
        line = progress_line(
            f"{kind} {namespace}/{name}",
            seen["phase"],
            seen["readyReplicas"],
            seen["replicas"],
            seen["message"],
            seen["lastEvent"],
        )
        return {"rollout": seen, "progress_line": line}

    tfm.run(body)


if __name__ == "__main__":
    main()
