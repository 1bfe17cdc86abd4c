#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Load-test a model deployment through its OpenAI-compatible endpoint and check it against SLOs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_deployment
short_description: Measure TTFT, ITL, TPOT, E2E latency, throughput and KV-cache use of a deployment against SLOs
version_added: 0.1.0
description:
  - Sends streaming chat or completion requests to an OpenAI-compatible endpoint (a gateway endpoint or an
    engine such as vLLM, NIM or Dynamo) and measures each request's timeline on the client.
  - Metric definitions and result key names follow C(vllm bench serve) so results are comparable. TTFT is the
    time to the first content chunk (an SSE event carrying a choice; a chat delta that only announces the role
    does not count), ITL the gaps between content chunks pooled over all requests, TPOT
    (E2E - TTFT) / (output_tokens - 1) per request, E2E the time to the last content chunk. Percentiles use
    linear interpolation. Goodput counts requests meeting every per-request SLO per second.
  - Warmup requests are sent first and excluded. Their C(usage.prompt_tokens) calibrate how many words make
    O(prompt_tokens) tokens, since the module has no tokenizer.
  - Token counts come from the C(usage) the server sends at the end of each stream
    (C(stream_options.include_usage)). Without it, output tokens are estimated as content chunks and prompt
    tokens as characters / 4, and RV(validation.tokens_estimated) is true.
  - Errors are counted by kind, including errors sent inside an HTTP 200 event stream, HTTP 429
    (C(rate_limited), never counted as latency), time-outs and dropped connections. Failed requests are
    excluded from the latency statistics and checked by O(slo.max_error_rate).
  - With O(metrics_url), the engine's Prometheus metrics are read before, during (0.1 s apart at first, then
    at most every O(scrape_interval) seconds) and after the run - KV-cache usage average and peak,
    running/waiting requests, preemptions, prefix-cache hit rate, server-side TTFT/ITL/E2E estimated from
    histogram deltas (approximate), and the generated-token delta, which must equal the client's usage sum
    when nothing else uses the engine.
  - The run is bounded by O(max_duration); requests still in flight then fail with kind C(deadline).
  - Needs only the Python standard library (3.10 or later) on the host that runs it, so it runs in an AWX
    execution environment as is. Usually run on the controller (C(delegate_to=localhost)) or a host next to
    the endpoint.
  - The API key is sent only as a bearer token in the C(Authorization) header and never returned or logged.
  - Results are picked up by the C(tokenfactory.spark.validation_report) callback for reports.
author:
  - Token Factory maintainers (@tokenfactory)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode no request is sent; the module validates its options and returns the planned load.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: Changes nothing on the endpoint.
options:
  base_url:
    description:
      - OpenAI base URL including C(/v1), for example an Endpoint's C(status.baseURL) or C(http://engine:8000/v1).
      - A URL without a path gets C(/v1) appended.
    type: str
    required: true
  model:
    description: Served model name sent as the OpenAI C(model) field.
    type: str
    required: true
  api_key:
    description: Bearer token for the endpoint (a gateway API key). Never logged or returned.
    type: str
  deployment:
    description: Name shown in results and reports (defaults to O(model)).
    type: str
  api:
    description: Which OpenAI API to load.
    type: str
    default: chat
    choices: [chat, completions]
  mode:
    description:
      - V(closed) keeps O(concurrency) requests in flight (each stream sends its next request when one ends).
      - V(poisson) sends requests at O(request_rate) per second with exponential inter-arrival times (open loop).
      - V(constant) sends them at fixed intervals of 1 / O(request_rate) seconds (open loop).
    type: str
    default: closed
    choices: [closed, poisson, constant]
  concurrency:
    description: Requests in flight in V(closed) mode (also used for the warmup).
    type: int
    default: 4
  request_rate:
    description: Requests per second in V(poisson) and V(constant) modes (required there).
    type: float
  max_concurrency:
    description: Optional cap on requests in flight in the open-loop modes; a request's clock starts when it is sent.
    type: int
  num_requests:
    description: Measured requests.
    type: int
    default: 32
  warmup_requests:
    description: Requests sent before the measurement and excluded from it.
    type: int
    default: 2
  prompt_tokens:
    description: Approximate prompt length in tokens (calibrated from the warmup's usage).
    type: int
    default: 128
  output_tokens:
    description: C(max_tokens) of each request.
    type: int
    default: 64
  ignore_eos:
    description: Send C(ignore_eos=true) (vLLM extension) so every request generates O(output_tokens) tokens.
    type: bool
    default: true
  seed:
    description: Seed of the prompt words and of the Poisson arrival times.
    type: int
    default: 0
  prompts:
    description: Explicit prompts, used round-robin instead of generated ones.
    type: list
    elements: str
  extra_body:
    description: Extra JSON fields merged into every request body (for example C(temperature)).
    type: dict
  request_timeout:
    description: Seconds one request may take in total before it fails with kind C(timeout).
    type: float
    default: 60
  max_duration:
    description: Upper bound in seconds for the measured run (the warmup has its own bound of the same length).
    type: float
    default: 300
  metrics_url:
    description:
      - Prometheus endpoint of the engine, for example C(http://engine:8000/metrics). Without it no server-side
        metrics are collected. Through a gateway, point it at the engine, not at the gateway.
    type: str
  metrics_token:
    description: Bearer token for O(metrics_url) if it needs one (O(metrics_via=direct)). Never logged or returned.
    type: str
  metrics_via:
    description:
      - How O(metrics_url) is read.
      - V(direct) dials it from the host running the module; a cluster-internal Service name
        (C(NAME.NAMESPACE.svc)) answers there only inside the cluster's Service network.
      - V(api_server) reads the same Service document through the Kubernetes API server's service proxy
        (C(/api/v1/namespaces/NAMESPACE/services/NAME:PORT/proxy/PATH)) with O(metrics_kubeconfig) and
        O(metrics_context), so a controller outside the cluster charts KV cache and queue;
        O(metrics_url) must then be a Service URL C(http(s)://NAME.NAMESPACE.svc[:PORT]/PATH) and the
        credentials need C(get) on C(services/proxy). Needs the kubernetes Python client.
      - V(auto) is V(api_server) when O(metrics_url) is a Service URL, else V(direct) (an engine outside the
        cluster, a port-forward URL).
    type: str
    choices: [direct, api_server, auto]
    default: direct
  metrics_kubeconfig:
    description:
      - Kubeconfig (path or dict) of the API server for O(metrics_via=api_server); unset = C(K8S_AUTH_KUBECONFIG)
        or C(~/.kube/config), as with kubernetes.core.
    type: raw
  metrics_context:
    description: Context of O(metrics_kubeconfig) (unset = its current context).
    type: str
  scrape_interval:
    description:
      - Longest gap in seconds between metric samples during the run. Sampling starts 0.1 s apart and the gap
        doubles up to this value, so short runs still have points; one more sample is taken when the load ends.
    type: float
    default: 1.0
  slo:
    description: Service level objectives. Latency objectives compare the O(slo.percentile) with the threshold.
    type: dict
    default: {}
    suboptions:
      percentile:
        description: Percentile checked for every latency objective.
        type: float
        default: 95
      ttft_ms:
        description: TTFT objective in milliseconds.
        type: float
        default: 500
      itl_ms:
        description: ITL objective in milliseconds (per request, goodput uses TPOT against it).
        type: float
        default: 250
      tpot_ms:
        description: Optional TPOT objective in milliseconds.
        type: float
      e2e_ms:
        description: Optional end-to-end latency objective in milliseconds.
        type: float
      max_error_rate:
        description: Largest allowed share of failed requests (0 to 1).
        type: float
        default: 0
  fail_on_slo_breach:
    description:
      - Fail the task when any objective is missed (the result is returned either way).
      - Request errors fail the task regardless, see O(fail_on_request_errors).
    type: bool
    default: false
  fail_on_request_errors:
    description:
      - Fail the task when any measured request failed for a reason other than HTTP 429 - connection refused or
        reset, HTTP 4xx/5xx, an error event inside the stream, a time-out (O(request_timeout)), a request cut off
        or never sent because the run hit O(max_duration), a stream without content or without its C([DONE]) event.
      - The message names how many failed, by kind, and the first error (kind, HTTP status, message); the result
        is returned either way.
      - HTTP 429 (the gateway's rate limits at work) is not a request error; it counts against
        O(slo.max_error_rate) like every failure and fails the task only with O(fail_on_slo_breach=true).
      - Set V(false) to judge failures by O(slo.max_error_rate) alone, for example to tolerate a few errors
        under overload.
      - Warmup requests (O(warmup_requests)) are not checked.
    type: bool
    default: true
  return_requests:
    description: Also return per-request timelines (start, TTFT, E2E, chunk arrival offsets, tokens, errors).
    type: bool
    default: false
  validate_certs:
    description: Verify TLS certificates of HTTPS endpoints.
    type: bool
    default: true
  ca_path:
    description: CA bundle file for HTTPS endpoints.
    type: path
  memory_bound:
    description:
      - Compare the measured decode rate with the bound memory bandwidth sets (RV(validation.memory_bound)).
      - A decode step reads the weights once for the batch and every stream's KV cache, so bytes per decoded
        token = O(memory_bound.weights_bytes) / streams + context x O(memory_bound.kv_bytes_per_token), and the
        bound is bandwidth x O(memory_bound.gpus) / that. Streams are the requests in flight (Little's law), the
        context the mean prompt plus half the mean output; measured = streams x 1000 / mean TPOT.
      - C(playbooks/validate.yml) fills it from the ModelDeployment's status (capacity, placement).
    type: dict
    suboptions:
      gpu_type:
        description:
          - GPU product (C(nvidia.com/gpu.product)) whose data-sheet bandwidth is used.
          - For example V(NVIDIA-GB10) (273 GB/s).
        type: str
      memory_bandwidth_gbps:
        description: Memory bandwidth in GB/s per GPU; required when O(memory_bound.gpu_type) is not a known product.
        type: float
      weights_bytes:
        description: Bytes of the model's weights.
        type: int
        required: true
      kv_bytes_per_token:
        description: KV-cache bytes per token of context (all layers, K and V).
        type: int
        required: true
      gpus:
        description: GPUs of one replica (tensor parallel).
        type: int
        default: 1
notes:
  - A failed request has no latency; a deployment answering everything with HTTP 429 therefore shows no latency
    values and fails the error-rate objective.
seealso:
  - name: vLLM benchmark CLI
    description: Reference for the metric definitions.
    link: https://docs.vllm.ai/en/latest/cli/bench/serve.html
"""

EXAMPLES = r"""
- name: Validate a deployment through the gateway
  tokenfactory.spark.validate_deployment:
    base_url: "{{ endpoint.status.baseURL }}"
    model: qwen2-0.5b-instruct
    api_key: "{{ tenant_api_key }}"
    deployment: qwen2-small
    concurrency: 8
    num_requests: 64
    metrics_url: http://qwen2-small.tokenfactory.svc:8000/metrics
    slo:
      ttft_ms: 500
      itl_ms: 250
      e2e_ms: 20000
    fail_on_slo_breach: true
  delegate_to: localhost
  register: validation

- name: Open-loop Poisson load at 4 requests/s with at most 16 in flight
  tokenfactory.spark.validate_deployment:
    base_url: http://127.0.0.1:8000/v1
    model: tiny-qwen2
    api: completions
    mode: poisson
    request_rate: 4
    max_concurrency: 16
    num_requests: 100
    seed: 7
"""

RETURN = r"""
passed:
  description: Whether every objective was met.
  returned: success
  type: bool
  sample: true
msg:
  description:
    - One-line summary; when O(fail_on_request_errors) fails the task, followed by the failed requests by kind
      and the first error.
  returned: always
  type: str
  sample: "tiny-qwen2: 32/32 ok, TTFT p95 80.1 ms, ITL p95 9.2 ms, 812 output tok/s, SLO passed"
plan:
  description: The load that would be sent (check mode only).
  returned: check mode
  type: dict
validation:
  description:
    - The measurement. Top-level keys follow C(vllm bench serve) (C(duration), C(completed), C(failed),
      C(total_input_tokens), C(total_output_tokens), C(request_throughput), C(request_goodput),
      C(output_throughput), C(total_token_throughput), C(mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms),
      C(max_output_tokens_per_s), C(max_concurrent_requests)).
  returned: success
  type: dict
  contains:
    schema:
      description: Result format identifier used by the report callback.
      type: str
      sample: tokenfactory.spark/validation/v1
    deployment:
      description: Deployment name.
      type: str
    p95_ttft_ms:
      description: 95th percentile TTFT in milliseconds (other metrics and percentiles alike).
      type: float
    tokens_estimated:
      description: True when some stream carried no usage and token counts were estimated.
      type: bool
    errors:
      description:
        - Failed requests by kind (C(by_kind) - C(rate_limited), C(stream_error), C(timeout), C(connect_error),
          C(http_503), ...), C(rate_limited), C(request_errors) (every failure but HTTP 429), C(first_error)
          (the first of those - index, kind, status, message - or null) and up to 10 C(samples).
      type: dict
    slo:
      description: Objectives (C(config)), one entry per check (C(checks)) and C(passed).
      type: dict
    server:
      description: Engine metrics (KV-cache usage, running/waiting, preemptions, prefix-cache hit rate,
        approximate server-side latencies, token deltas, samples over time) or the reason they are missing.
      type: dict
    token_check:
      description: Client usage sum of output tokens against the engine's generated-token delta.
      type: dict
    series:
      description: Output tokens per second and active requests over time.
      type: dict
    distributions:
      description: Histograms of TTFT and ITL in milliseconds.
      type: dict
    memory_bound:
      description:
        - With O(memory_bound) - decode_tokens_per_s (measured), bound_tokens_per_s, fraction_of_bound,
          above_bound, streams, context_tokens, bytes_read_per_decoded and the inputs; computed is false (with a
          reason) without decode data.
      type: dict
    first_token_at:
      description: Epoch seconds of the first successful token (used for time-to-serving).
      type: float
    requests:
      description: Per-request timelines when O(return_requests=true).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.client import (
    CORE_AUTH_ARG_SPEC,
    K8sError,
    KubeClient,
    require_kubernetes,
)
from ansible_collections.tokenfactory.spark.plugins.module_utils.k8s.service_proxy import ProxiedMetrics, is_service_url
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest import memory_bound
from ansible_collections.tokenfactory.spark.plugins.module_utils.loadtest.validation import plan, run_validation
from ansible_collections.tokenfactory.spark.plugins.module_utils.tokenfactory.inventory import MEMORY_BANDWIDTH_GBPS

SLO_SPEC = {
    "percentile": {"type": "float", "default": 95},
    "ttft_ms": {"type": "float", "default": 500},
    "itl_ms": {"type": "float", "default": 250},
    "tpot_ms": {"type": "float"},
    "e2e_ms": {"type": "float"},
    "max_error_rate": {"type": "float", "default": 0},
}

ARGUMENT_SPEC = {
    "base_url": {"type": "str", "required": True},
    "model": {"type": "str", "required": True},
    "api_key": {"type": "str", "no_log": True},
    "deployment": {"type": "str"},
    "api": {"type": "str", "default": "chat", "choices": ["chat", "completions"]},
    "mode": {"type": "str", "default": "closed", "choices": ["closed", "poisson", "constant"]},
    "concurrency": {"type": "int", "default": 4},
    "request_rate": {"type": "float"},
    "max_concurrency": {"type": "int"},
    "num_requests": {"type": "int", "default": 32},
    "warmup_requests": {"type": "int", "default": 2},
    "prompt_tokens": {"type": "int", "default": 128, "no_log": False},
    "output_tokens": {"type": "int", "default": 64, "no_log": False},
    "ignore_eos": {"type": "bool", "default": True},
    "seed": {"type": "int", "default": 0},
    "prompts": {"type": "list", "elements": "str"},
    "extra_body": {"type": "dict"},
    "request_timeout": {"type": "float", "default": 60},
    "max_duration": {"type": "float", "default": 300},
    "metrics_url": {"type": "str"},
    "metrics_token": {"type": "str", "no_log": True},
    "metrics_via": {"type": "str", "choices": ["direct", "api_server", "auto"], "default": "direct"},
    "metrics_kubeconfig": {"type": "raw", "no_log": True},
    "metrics_context": {"type": "str"},
    "scrape_interval": {"type": "float", "default": 1.0},
    "slo": {"type": "dict", "default": {}, "options": SLO_SPEC},
    "fail_on_slo_breach": {"type": "bool", "default": False},
    "fail_on_request_errors": {"type": "bool", "default": True},
    "return_requests": {"type": "bool", "default": False},
    "validate_certs": {"type": "bool", "default": True},
    "ca_path": {"type": "path"},
    "memory_bound": {
        "type": "dict",
        "options": {
            "gpu_type": {"type": "str"},
            "memory_bandwidth_gbps": {"type": "float"},
            "weights_bytes": {"type": "int", "required": True},
            "kv_bytes_per_token": {"type": "int", "required": True, "no_log": False},
            "gpus": {"type": "int", "default": 1},
        },
    },
}


def bandwidth(bound):
    """GB/s for memory_bound: the explicit figure, else the data sheet of gpu_type."""
    if bound.get("memory_bandwidth_gbps"):
        return bound["memory_bandwidth_gbps"]
    if bound.get("gpu_type") in MEMORY_BANDWIDTH_GBPS:
        return MEMORY_BANDWIDTH_GBPS[bound["gpu_type"]]
    known = ", ".join(sorted(MEMORY_BANDWIDTH_GBPS))
    raise ValueError(
        f"memory_bound: bandwidth of {bound.get('gpu_type')!r} unknown; set memory_bound.memory_bandwidth_gbps "
        f"or a gpu_type of {known}"
    )


def summary_line(result):
    parts = [f"{result['deployment']}: {result['completed']}/{result['num_prompts']} ok"]
    for metric, label in (("ttft", "TTFT"), ("itl", "ITL")):
        value = result.get(f"p95_{metric}_ms")
        parts.append(f"{label} p95 {value:.1f} ms" if value is not None else f"{label} p95 n/a")
    parts.append(f"{result['output_throughput']:.0f} output tok/s")
    bound = result.get("memory_bound") or {}
    if bound.get("computed"):
        parts.append(
            f"decode {bound['decode_tokens_per_s']:.0f} tok/s = {bound['fraction_of_bound']:.1%} of the "
            f"memory-bandwidth limit ({bound['bound_tokens_per_s']:.0f} tok/s)"
        )
    rate_limited = result["errors"]["rate_limited"]
    if rate_limited:
        parts.append(f"{rate_limited} rate-limited (HTTP 429)")
    failed = [c["name"] for c in result["slo"]["checks"] if not c["passed"]]
    parts.append("SLO passed" if not failed else f"SLO missed: {', '.join(failed)}")
    return ", ".join(parts)


def request_errors_line(result):
    """'2 of 8 requests failed (connect_error: 2), first: connect_error: ConnectionRefusedError: ...'."""
    errors = result["errors"]
    kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(errors["by_kind"].items()) if kind != "rate_limited")
    first = errors["first_error"]
    status = f" (HTTP {first['status']})" if first.get("status") not in (None, 0, 200) else ""
    return (
        f"{errors['request_errors']} of {result['num_prompts']} requests failed ({kinds}), "
        f"first: {first['kind']}{status}: {first['message']}"
    )


def metrics_proxy(module):
    """The engine's metrics through the API server's service proxy (metrics_via=api_server), else None."""
    params = module.params
    if not params["metrics_url"] or params["metrics_via"] == "direct":
        return None
    if params["metrics_via"] == "auto" and not is_service_url(params["metrics_url"]):
        return None
    require_kubernetes(module)
    auth = dict.fromkeys(CORE_AUTH_ARG_SPEC)
    auth.update(kubeconfig=params["metrics_kubeconfig"], context=params["metrics_context"])
    try:
        return ProxiedMetrics(KubeClient(auth, "tokenfactory-validate"), params["metrics_url"])
    except (K8sError, ValueError) as exc:
        module.fail_json(msg=f"metrics_via=api_server: {exc}")


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
        required_if=[("mode", "poisson", ["request_rate"]), ("mode", "constant", ["request_rate"])],
    )
    options = dict(module.params)
    options["slo"] = {k: v for k, v in (options["slo"] or {}).items() if v is not None}
    try:
        planned = plan(options)
        gbps = bandwidth(options["memory_bound"]) if options["memory_bound"] else None
    except ValueError as exc:
        module.fail_json(msg=f"invalid options: {exc}")
    if module.check_mode:
        module.exit_json(changed=False, plan=planned, msg="check mode: no load sent")
    options["metrics_proxy"] = metrics_proxy(module)
    try:
        result = run_validation(options)
    except ValueError as exc:
        module.fail_json(msg=f"invalid options: {exc}")
    if gbps is not None:
        bound = options["memory_bound"]
        result["memory_bound"] = memory_bound.summarize(
            result, gbps, bound["weights_bytes"], bound["kv_bytes_per_token"], bound["gpus"], bound.get("gpu_type")
        )
    msg = summary_line(result)
    passed = result["slo"]["passed"]
    if module.params["fail_on_request_errors"] and result["errors"]["request_errors"]:
        module.fail_json(msg=f"{msg}; {request_errors_line(result)}", passed=passed, validation=result)
    if module.params["fail_on_slo_breach"] and not passed:
        module.fail_json(msg=msg, passed=False, validation=result)
    module.exit_json(changed=False, passed=passed, msg=msg, validation=result)


if __name__ == "__main__":
    main()
