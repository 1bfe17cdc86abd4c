#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Model deployments: a model served by an engine on GPUs of a compute cluster, behind an endpoint."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_deployment
short_description: Deploy a model on GPUs (vLLM, NIM or Dynamo) with rate limits, pricing and tenants
version_added: 0.1.0
description:
  - Creates or updates a C(ModelDeployment) (C(tokenfactory.io/v1alpha1)) and materializes its workload, all owned
    by it through ownerReferences (deleting it deletes them).
  - V(vllm) renders a Deployment (C(vllm serve) with C(--served-model-name), C(--max-model-len),
    C(--gpu-memory-utilization), probes on C(/health), C(nvidia.com/gpu) requests, a memory-backed C(/dev/shm), an
    C(HF_HOME) weights cache volume (a node directory by default, O(weights_cache)), C(Recreate) strategy because a
    GPU cannot be shared during a rollout) and a Service,
    plus an HPA (O(autoscaling)) and a PodDisruptionBudget (O(disruption_budget)). A replica that needs more GPUs than
    one node has (two DGX Sparks) becomes a StatefulSet of ranks pinned to nodes sharing one
    C(tokenfactory.io/fabric) label (C(vllm serve --nnodes/--node-rank/--master-addr), workers C(--headless)).
  - V(nim) renders a C(NIMService) (C(apps.nvidia.com/v1alpha1)) and V(dynamo) a C(DynamoGraphDeployment)
    (C(nvidia.com/v1alpha1)); their operators must be installed.
  - Before writing anything it checks the references (Model, its Provider, Endpoint, ComputeCluster), that
    O(gpu_type) exists in the compute cluster's inventory, and capacity - weights + KV cache for
    O(capacity_sequences) full-length sequences + 2 GiB runtime overhead per GPU against
    C(gpu_memory_utilization x GPU memory). On GB10 (DGX Spark) GPU memory is the node's unified memory, so the
    default utilization is 0.75 and at most 0.85 is accepted (0.90/0.95 on discrete GPUs).
  - "GPU supply policy: GPUs claimed by all ModelDeployments of the same O(gpu_type) (replicas or autoscaling
    minimum x O(gpus_per_replica)) may not exceed the allocatable GPUs of that type. With
    O(on_insufficient_gpus=fail) (default) a second 1-GPU deployment on a 1-GPU Spark fails before anything is
    created; with V(queue) it is created and stays C(Pending) until a GPU is released."
  - The module also writes C(status) (phase, served model name, upstream URL, placement, capacity); the Token
    Factory gateway routes by C(spec.model), C(spec.endpoint), C(spec.tenants), C(spec.rateLimits), C(spec.pricing)
    and C(status.upstreamURL), and only while C(status.phase) is C(Ready). Between runs the status keeper the
    gateway role deploys (C(gateway_status_keeper)) recomputes C(status) with the same code when the pods change,
    for example to V(Failed) when a Ready deployment's engine starts crash-looping.
author:
  - Token Factory maintainers (@tokenfactory)
options:
  model:
    description: Name of the C(Model) in the same namespace. Required with O(state=present).
    type: str
  endpoint:
    description: Name of the C(Endpoint) in the same namespace; its compute cluster provides the GPUs.
      Required with O(state=present).
    type: str
  engine:
    description: Inference engine.
    type: str
    default: vllm
    choices: [vllm, nim, dynamo]
  image:
    description: Engine image repository. Defaults to C(nvcr.io/nvidia/vllm) (vllm, multi-arch incl. arm64/GB10),
      C(nvcr.io/nvidia/ai-dynamo/vllm-runtime) (dynamo) or a NIM image (nim; set it for your model).
    type: str
  version:
    description: Engine image tag, for example C(25.11-py3).
    type: str
  replicas:
    description: Number of engine replicas (ignored by the workload when O(autoscaling) is set).
    type: int
    default: 1
  gpus_per_replica:
    description: GPUs per replica (C(--tensor-parallel-size)). More than one node's GPUs spans paired nodes.
    type: int
    default: 1
  gpu_type:
    description: GPU product (C(nvidia.com/gpu.product) label) to run on; must be in the compute cluster's inventory,
      for example C(NVIDIA-GB10). Required with O(state=present).
    type: str
  resources:
    description: CPU/memory requests and limits of each engine pod (GPU requests are derived).
    type: dict
    suboptions:
      requests:
        description: Requests; defaults C(cpu=2), C(memory=8Gi).
        type: dict
        suboptions:
          cpu:
            description: CPU quantity, for example C(4) or C(500m).
            type: str
          memory:
            description: Memory quantity, for example C(16Gi).
            type: str
      limits:
        description: Limits (none by default).
        type: dict
        suboptions:
          cpu:
            description: CPU quantity.
            type: str
          memory:
            description: Memory quantity.
            type: str
  weights_volume_size:
    description: Size limit of the weights volume mounted at C(/models) when O(weights_cache.type=emptyDir).
    type: str
    default: 50Gi
  weights_cache:
    description:
      - Where the engine keeps weights and compile caches, mounted at C(/models) (C(HF_HOME=/models/huggingface),
        C(TORCHINDUCTOR_CACHE_DIR), C(TRITON_CACHE_DIR), C(VLLM_CACHE_ROOT) under it), so that a restarted or
        rescheduled pod neither downloads nor compiles again. Engines that manage their own storage (NIM) ignore it.
    type: dict
    suboptions:
      type:
        description:
          - V(hostPath) - a directory on the node (its NVMe), shared by every replica on that node (default).
          - V(persistentVolumeClaim) - the claim O(weights_cache.claim_name), a ReadWriteMany volume shared by all
            nodes, or a ReadWriteOnce one for a single replica.
          - V(emptyDir) - the pod's own volume of O(weights_volume_size), gone with the pod.
        type: str
        default: hostPath
        choices: [hostPath, persistentVolumeClaim, emptyDir]
      path:
        description: The node directory of V(hostPath) (created when missing).
        type: str
        default: /var/lib/tokenfactory/models
      claim_name:
        description: The PersistentVolumeClaim of V(persistentVolumeClaim), in the deployment's namespace.
        type: str
      offline:
        description:
          - Set C(HF_HUB_OFFLINE=1) - the engine never asks the hub, the cache must hold the model (revision
            included). C(playbooks/serve.yml) sets it after its pre-pull filled the cache.
        type: bool
        default: false
  context_length:
    description: C(--max-model-len). Defaults to the model's maximum context length.
    type: int
  gpu_memory_utilization:
    description: C(--gpu-memory-utilization). Default 0.75 on unified memory (GB10), 0.90 on discrete GPUs.
    type: float
  kv_cache_dtype:
    description: KV cache element type (V(fp8) halves the KV cache).
    type: str
    default: auto
    choices: [auto, fp8]
  prefix_caching:
    description: Enable vLLM automatic prefix caching.
    type: bool
    default: true
  extra_args:
    description: Extra engine arguments. Flags the module derives (for example C(--max-model-len)) are rejected.
    type: list
    elements: str
    default: []
  env:
    description: Extra environment variables of the engine container (C(HF_TOKEN), C(HF_HOME), C(HF_HUB_OFFLINE), the
      cache directories and other managed names are rejected).
    type: dict
    default: {}
  autoscaling:
    description: Horizontal autoscaling on vLLM's waiting-request queue (needs a custom metrics adapter).
    type: dict
    suboptions:
      min_replicas:
        description: Lower bound.
        type: int
        required: true
      max_replicas:
        description: Upper bound (>= O(autoscaling.min_replicas)).
        type: int
        required: true
      target_waiting_requests:
        description: Average waiting requests per pod to scale at.
        type: int
  disruption_budget:
    description: Render a PodDisruptionBudget.
    type: dict
    suboptions:
      min_available:
        description: Pods that must stay available during voluntary disruptions.
        type: int
        required: true
  tenants:
    description: Tenants this deployment is shared with (gateway tenants).
    type: list
    elements: str
    default: []
  rate_limits:
    description:
      - Limits the gateway enforces on this deployment, each a count per minute from V(0) (unlimited) to
        V(1000000000). They come on top of a tenant's and a key's own limits (modules M(tokenfactory.spark.tenant),
        M(tokenfactory.spark.api_key)), which count over all models.
    type: dict
    suboptions:
      per_key:
        description: Each API key's bucket on this deployment.
        type: dict
        suboptions: &limits
          requests_per_minute:
            description: Requests per minute.
            type: int
          tokens_per_minute:
            description: Tokens (input + output) per minute.
            type: int
      per_tenant:
        description: Each tenant's bucket on this deployment (all keys of the tenant together; not the tenant's own
          limits over all models).
        type: dict
        suboptions: *limits
      per_deployment:
        description: The deployment as a whole, all tenants together.
        type: dict
        suboptions: *limits
  pricing:
    description: Prices the gateway meters with, as decimal strings.
    type: dict
    suboptions:
      currency:
        description: ISO 4217 code.
        type: str
        default: USD
      input_per_1m:
        description: Price per 1M input tokens, for example C("0.15").
        type: str
        required: true
      output_per_1m:
        description: Price per 1M output tokens, for example C("0.60").
        type: str
        required: true
  upstream_url:
    description: Route the gateway to this URL instead of the in-cluster Service (engine running elsewhere).
    type: str
  capacity_check:
    description: Check memory fit and GPU supply before deploying.
    type: bool
    default: true
  capacity_sequences:
    description: Full-context sequences the KV cache must hold at once for the capacity check.
    type: int
    default: 1
  on_insufficient_gpus:
    description: V(fail) refuses a deployment when not enough GPUs of O(gpu_type) are free; V(queue) creates it and
      its pods stay Pending (no wait) until GPUs are released.
    type: str
    default: fail
    choices: [fail, queue]
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - tokenfactory.spark.k8s_auth
  - tokenfactory.spark.k8s_auth.object
notes:
  - The NIM and Dynamo renderings are tested against stand-in CRDs (the operators cannot be installed in the test
    lab); the vLLM rendering is tested against a real API server with simulated GB10 nodes.
"""

EXAMPLES = r"""
- name: Serve Qwen2 0.5B on one DGX Spark GPU
  tokenfactory.spark.model_deployment:
    name: qwen2-0-5b
    namespace: tokenfactory
    model: qwen2-0-5b
    endpoint: public
    gpu_type: NVIDIA-GB10
    context_length: 8192
    tenants: [acme]
    rate_limits:
      per_key: {requests_per_minute: 60, tokens_per_minute: 100000}
      per_tenant: {requests_per_minute: 600}
    pricing: {currency: USD, input_per_1m: "0.15", output_per_1m: "0.60"}
  register: deployment

- name: Where did it land?
  ansible.builtin.debug:
    msg: "{{ deployment.status.phase }} on {{ deployment.placement.nodes }} at {{ deployment.base_url }}"

- name: A 70B model in FP4 across two paired Sparks
  tokenfactory.spark.model_deployment:
    name: llama-70b
    namespace: tokenfactory
    model: llama-3-3-70b-fp4
    endpoint: public
    gpu_type: NVIDIA-GB10
    gpus_per_replica: 2
    context_length: 32768
    wait_timeout: 3600

- name: Remove it and everything it created
  tokenfactory.spark.model_deployment:
    name: qwen2-0-5b
    namespace: tokenfactory
    state: absent
"""

RETURN = r"""
model_deployment:
  description: The ModelDeployment object as stored (with status); empty when absent.
  returned: always
  type: dict
status:
  description: Observed state written to the object's status.
  returned: when state=present
  type: dict
  contains:
    phase:
      description:
        - What the engine's pods report when the module runs. V(Pending) (queued, unschedulable or scaled to zero),
          V(Progressing) (rolling out), V(Ready) (every replica updated and available; the only phase the gateway
          routes to) or V(Failed) (a pod stuck in CrashLoopBackOff, ImagePullBackOff, ErrImagePull or another state
          it does not leave by itself, or a rollout past its progress deadline). With O(wait=true) a V(Failed)
          deployment fails the module at once.
      type: str
      sample: Ready
    message:
      description:
        - Why it is in this phase (scheduler message, rollout counts, queue note); for V(Failed) the pod, container,
          reason, last exit code and the container's last log lines.
      type: str
    servedModelName:
      description: OpenAI model name.
      type: str
    upstreamURL:
      description: Where the gateway sends requests.
      type: str
      sample: http://qwen2-0-5b.tokenfactory.svc:8000
  sample:
    phase: Ready
    servedModelName: Qwen/Qwen2-0.5B-Instruct
    upstreamURL: http://qwen2-0-5b.tokenfactory.svc:8000
base_url:
  description: OpenAI base URL of the endpoint that serves this deployment.
  returned: when state=present
  type: str
  sample: https://llm.example.com/v1
served_model_name:
  description: The C(model) value clients send.
  returned: when state=present
  type: str
  sample: Qwen/Qwen2-0.5B-Instruct
upstream_url:
  description: The engine URL the gateway routes to.
  returned: when state=present
  type: str
placement:
  description: GPU placement (gpuType, gpusPerReplica, gpusPerPod, nodesPerReplica, nodes the pods run on, fabric).
  returned: when state=present
  type: dict
  sample: {gpuType: NVIDIA-GB10, gpusPerReplica: 1, nodesPerReplica: 1, nodes: [spark-1]}
capacity:
  description: Capacity estimate in bytes per GPU (weights, KV cache, overhead, required, usable).
  returned: when state=present
  type: dict
children:
  description: Objects the module rendered, as C(Kind/name).
  returned: when state=present
  type: list
  elements: str
  sample: [Deployment/qwen2-0-5b, Service/qwen2-0-5b]
deleted_children:
  description: Children that were deleted with the ModelDeployment (C(Kind/name)).
  returned: when state=absent
  type: list
  elements: str
progress:
  description: Progress messages recorded while waiting.
  returned: when the module waited
  type: list
  elements: str
"""

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import K8sError
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.progress import progress_line
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.waiter import RolloutFailed
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.domain import FAILED, READY
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment import (
    deployment_spec,
    service_name,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.deployment_apply import DeploymentApply
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.kinds import MODEL_DEPLOYMENT, tf_object
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.module import TokenFactoryModule
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.options import kind_options
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.runner import run_object
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.status import deployment_status
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.watch import subject

ARG_SPEC = {
    **kind_options("ModelDeployment"),
    "capacity_check": {"type": "bool", "default": True},
    "capacity_sequences": {"type": "int", "default": 1},
    "on_insufficient_gpus": {"type": "str", "default": "fail", "choices": ["fail", "queue"]},
}


class Deployer:
    """state=present: the plan and writes of deployment_apply (shared with the keeper), status; waits when asked."""

    def __init__(self, tfm, name, namespace):
        self.tfm, self.client, self.params = tfm, tfm.client, tfm.params
        self.name, self.namespace = name, namespace
        self.apply = DeploymentApply(tfm.client, tfm.objects, name, namespace)

    def present(self):
        tfm, params, objects = self.tfm, self.params, self.tfm.objects
        spec = deployment_spec(params)
        md = tf_object("ModelDeployment", self.name, self.namespace, spec)
        policy = {
            "onInsufficientGpus": params["on_insufficient_gpus"],
            "capacityCheck": params["capacity_check"],
            "capacitySequences": params["capacity_sequences"],
        }
        # Plan everything with server-side dry runs before the first write: nothing half-created.
        refs, plan = self.apply.plan(spec, policy, generation=None)
        _model, _provider, endpoint, cluster = refs
        current, planned = objects.plan(md)
        plan["generation"] = planned["metadata"].get("generation", 1)  # what the write below leaves it at
        planned_children = self.apply.dry_run_children(planned, refs, plan)
        stale = self.apply.stale_children(current["metadata"]["uid"], plan) if current else []
        applied = objects.write(md, current, planned)
        rerender = applied["metadata"]["uid"] != planned["metadata"]["uid"]
        self.apply.write_children(applied, refs, plan, planned_children, stale, rerender)
        status = deployment_status(self.client, applied, plan, endpoint, cluster)
        if params["wait"] and not tfm.check_mode and not plan["note"]:
            status = self.wait_ready(applied, plan, endpoint, cluster)
        stored = objects.write_status(applied, status)
        if params["wait"] and status["phase"] == FAILED:
            raise RolloutFailed(f"ModelDeployment {self.namespace}/{self.name} failed: {status['message']}")
        return {
            "model_deployment": stored,
            "status": status,
            "base_url": status["endpointBaseURL"],
            "served_model_name": status["servedModelName"],
            "upstream_url": status["upstreamURL"],
            "placement": status["placement"],
            "capacity": status["capacity"],
            "children": status["children"],
        }

    def wait_ready(self, applied, plan, endpoint, cluster):
        latest = {}

        def check():
            latest["status"] = deployment_status(self.client, applied, plan, endpoint, cluster)
            status = latest["status"]
            # Failed (a stuck pod, a rollout past its deadline) ends the wait at once: present() then fails.
            done = status if status["phase"] in (READY, FAILED) else None
            return done, progress_line(
                subject(applied), status["phase"], status["readyReplicas"], status["replicas"], status["message"]
            )

        try:
            return self.tfm.wait_until(f"ModelDeployment {self.namespace}/{self.name} to be Ready", check)
        except K8sError:
            self.tfm.objects.write_status(applied, latest["status"])
            raise


def deleted_children(removed):
    return {"deleted_children": (removed or {}).get("status", {}).get("children", [])}


def main():
    tfm = TokenFactoryModule(ARG_SPEC, required_if=[("state", "present", ["model", "endpoint", "gpu_type"])])
    run_object(
        tfm,
        MODEL_DEPLOYMENT,
        "model_deployment",
        lambda name, namespace: Deployer(tfm, name, namespace).present(),
        check_name=service_name,
        absent_result=deleted_children,
    )


if __name__ == "__main__":
    main()
