#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Read the GPU nodes' health and the alerts firing: the health gate of upgrades and deployments."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_health_info
short_description: GPU node health and firing alerts, for a playbook to gate on
version_added: 0.2.0
description:
  - Reads every GPU node (a node with C(nvidia.com/gpu) capacity) from Kubernetes and, from Prometheus, what the
    DCGM exporter reports for it (GPUs reporting, last XID, temperature, clock event reasons) and, for
    unified-memory GPUs such as GB10, the host's available memory (node-exporter; DCGM has no framebuffer
    figures there).
  - Reads the alerts firing in Prometheus (the rules of the C(tokenfactory.spark.observability) role decide the
    thresholds).
  - RV(healthy) is false when a node is not Ready, offers fewer GPUs than it has, DCGM reports fewer GPUs than
    the node has (O(require_gpu_metrics)), or an alert of a severity in O(blocking_severities) fires. Other firing
    alerts are returned in RV(non_blocking) and do not close the gate.
  - Changes nothing; a playbook asserts on RV(healthy) (see C(playbooks/health_gate.yml)).
author:
  - Token Factory maintainers (@tokenfactory)
options:
  prometheus_url:
    description:
      - Prometheus base URL the controller can reach, for example V(http://127.0.0.1:9090) (a port-forward).
      - Without it, Prometheus is read through the API server's service proxy (O(prometheus_service)), with the
        same credentials as the Kubernetes calls; no port needs to be exposed.
    type: str
  prometheus_service:
    description: The Prometheus Service read through the API server proxy when O(prometheus_url) is not set.
    type: dict
    default: {}
    suboptions:
      namespace:
        description: Namespace of the Service.
        type: str
        default: tokenfactory-monitoring
      name:
        description: Service name.
        type: str
        default: tokenfactory-prometheus
      port:
        description: Service port (number or name).
        type: str
        default: "9090"
  nodes:
    description:
      - Gate only these nodes (for example the node about to be upgraded). Alerts naming another node are then
        ignored; alerts without a C(node) label always count. A listed node without GPUs is reported as missing.
      - Default is every GPU node.
    type: list
    elements: str
    default: []
  blocking_severities:
    description: Severities of firing alerts that make RV(healthy) false.
    type: list
    elements: str
    default: [critical]
  ignore_alerts:
    description: Alert names never considered (for example one a maintenance window expects).
    type: list
    elements: str
    default: []
  require_gpu_metrics:
    description: Block when DCGM reports fewer GPUs than a node has (or no host memory metrics for unified memory).
    type: bool
    default: true
  unified_memory_products:
    description: GPU products whose memory is the node's memory (host memory is then required).
    type: list
    elements: str
    default: [NVIDIA-GB10]
  prometheus_validate_certs:
    description: Verify the TLS certificate of an HTTPS O(prometheus_url).
    type: bool
    default: true
  prometheus_ca_path:
    description: CA bundle for an HTTPS O(prometheus_url).
    type: path
notes:
  - O(namespace) is not used by this module.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.read_only
"""

EXAMPLES = r"""
- name: Read the health of the GPU nodes (Prometheus through the API server proxy)
  tokenfactory.spark.cluster_health_info:
    kubeconfig: "{{ tf_kubeconfig }}"
  register: health

- name: Stop unless the node about to be upgraded is healthy
  tokenfactory.spark.cluster_health_info:
    kubeconfig: "{{ tf_kubeconfig }}"
    nodes: [spark-02]
    blocking_severities: [critical, warning]
  register: health
  failed_when: not health.healthy
"""

RETURN = r"""
healthy:
  description: No blocking node problem and no firing alert of a blocking severity.
  returned: always
  type: bool
blocking:
  description: Why the gate is closed, one line per node problem or blocking alert.
  returned: always
  type: list
  elements: str
  sample: ["spark-01: TokenFactoryGPUXidCritical (critical): GPU 0 on spark-01: XID 79 needs the node drained"]
non_blocking:
  description: Firing alerts of other severities (warnings), one line each.
  returned: always
  type: list
  elements: str
nodes:
  description:
    - Per GPU node - name, ready, gpuProduct, gpuCapacity, gpuAllocatable, unifiedMemory, gpusReporting,
      lastXid, maxTemperatureC, clockEventReasons, memoryAvailableRatio (those Prometheus has) and problems.
  returned: always
  type: list
  elements: dict
alerts:
  description: The firing alerts considered (alertname, severity, node, summary, activeAt, labels).
  returned: always
  type: list
  elements: dict
"""

import json
import urllib.parse

from ansible.module_utils.urls import open_url

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import NODE, K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.checks import ValidationError
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.health import (
    NODE_QUERIES,
    PrometheusError,
    PrometheusReader,
    evaluate,
    node_states,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import (
    NAMESPACE_ARG_SPEC,
    TokenFactoryModule,
)

SERVICE_SPEC = {
    "namespace": {"type": "str", "default": "tokenfactory-monitoring"},
    "name": {"type": "str", "default": "tokenfactory-prometheus"},
    "port": {"type": "str", "default": "9090"},
}
ARGUMENT_SPEC = {
    "prometheus_url": {"type": "str"},
    "prometheus_service": {"type": "dict", "default": {}, "options": SERVICE_SPEC},
    "nodes": {"type": "list", "elements": "str", "default": []},
    "blocking_severities": {"type": "list", "elements": "str", "default": ["critical"]},
    "ignore_alerts": {"type": "list", "elements": "str", "default": []},
    "require_gpu_metrics": {"type": "bool", "default": True},
    "unified_memory_products": {"type": "list", "elements": "str", "default": ["NVIDIA-GB10"]},
    "prometheus_validate_certs": {"type": "bool", "default": True},
    "prometheus_ca_path": {"type": "path"},
}


def prometheus_fetch(tfm):
    params = tfm.params
    url = params["prometheus_url"]
    if url:
        base = url.rstrip("/")

        def fetch(path, query):
            response = open_url(
                f"{base}{path}?{urllib.parse.urlencode(query)}" if query else base + path,
                timeout=params["request_timeout"],
                validate_certs=params["prometheus_validate_certs"],
                ca_path=params["prometheus_ca_path"],
            )
            return json.loads(response.read())

        return fetch, base
    svc = params["prometheus_service"]
    proxy = (
        f"/api/v1/namespaces/{urllib.parse.quote(svc['namespace'])}/services/"
        f"{urllib.parse.quote(svc['name'])}:{urllib.parse.quote(svc['port'])}/proxy"
    )

    def fetch_proxied(path, query):
        return tfm.client.request("GET", proxy + path, query=query)

    return fetch_proxied, f"service {svc['namespace']}/{svc['name']}:{svc['port']} (API server proxy)"


def main():
    tfm = TokenFactoryModule(ARGUMENT_SPEC, base_spec=NAMESPACE_ARG_SPEC)

    def body():
        params = tfm.params
        fetch, source = prometheus_fetch(tfm)
        reader = PrometheusReader(fetch)
        try:
            metrics = {key: reader.by_node(expr) for key, expr in NODE_QUERIES.items()}
            alerts = reader.firing_alerts()
        except (PrometheusError, OSError, K8sError) as exc:
            raise ValidationError("prometheus_url", f"cannot read Prometheus at {source}: {exc}") from exc
        states = node_states(tfm.client.list(NODE), metrics, set(params["unified_memory_products"]))
        blocking, warnings, considered = evaluate(
            states,
            alerts,
            set(params["blocking_severities"]),
            set(params["ignore_alerts"]),
            only_nodes=set(params["nodes"]),
            require_gpu_metrics=params["require_gpu_metrics"],
        )
        if params["nodes"]:
            states = [s for s in states if s["name"] in params["nodes"]]
        return {
            "healthy": not blocking,
            "blocking": blocking,
            "non_blocking": warnings,
            "nodes": states,
            "alerts": considered,
            "prometheus": source,
        }

    tfm.run(body)


if __name__ == "__main__":
    main()
