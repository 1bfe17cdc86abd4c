"""Engine metrics kept by the synthetic upstream (text exposition format 0.0.4), named as vLLM names them or,
with metric_names="nim" / "dynamo", as NVIDIA NIM for LLMs and NVIDIA Dynamo's frontend do (the names their
documentation lists; those engines need GPUs, so the dashboards' NIM and Dynamo queries are proven on these)."""

import bisect
import threading

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0)
FINISH_REASONS = ("stop", "length", "abort", "error")
TOKEN_BUCKETS = (16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0)
# quantity -> metric name, per naming scheme; the label that carries the model name; where /metrics is served.
METRIC_NAMES = {
    "vllm": {
        "running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
        "kv_cache_usage": "vllm:kv_cache_usage_perc", "prompt_tokens": "vllm:prompt_tokens_total",
        "generation_tokens": "vllm:generation_tokens_total", "requests": "vllm:request_success_total",
        "ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
        "e2e": "vllm:e2e_request_latency_seconds", "model_label": "model_name", "path": "/metrics",
    },
    "nim": {
        "running": "num_requests_running", "waiting": "num_requests_waiting",
        "kv_cache_usage": "gpu_cache_usage_perc", "prompt_tokens": "prompt_tokens_total",
        "generation_tokens": "generation_tokens_total", "requests": "request_success_total",
        "ttft": "time_to_first_token_seconds", "itl": "time_per_output_token_seconds",
        "e2e": "e2e_request_latency_seconds", "model_label": "model_name", "path": "/v1/metrics",
    },
    "dynamo": {
        "running": "dynamo_frontend_inflight_requests", "waiting": "dynamo_frontend_queued_requests",
        "kv_cache_usage": "dynamo_component_kvstats_gpu_cache_usage_percent",
        "prompt_tokens": "dynamo_frontend_input_sequence_tokens",  # a histogram: _sum counts the tokens
        "generation_tokens": "dynamo_frontend_output_tokens_total", "requests": "dynamo_frontend_requests_total",
        "ttft": "dynamo_frontend_time_to_first_token_seconds", "itl": "dynamo_frontend_inter_token_latency_seconds",
        "e2e": "dynamo_frontend_request_duration_seconds", "model_label": "model", "path": "/metrics",
    },
}  # fmt: skip


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.counts):
            self.counts[index] += 1
        self.total += 1
        self.sum += value

    def lines(self, name: str, labels: str) -> list[str]:
        out, cumulative = [], 0
        for bound, count in zip(self.buckets, self.counts, strict=True):
            cumulative += count
            out.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(cumulative)}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.total)}')
        out.append(f"{name}_count{{{labels}}} {float(self.total)}")
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        return out


class EngineMetrics:
    """Counters, gauges and histograms with one engine's names and labels (METRIC_NAMES)."""

    def __init__(self, model: str, kv_cache_tokens: int, metric_names: str = "vllm"):
        self.names = METRIC_NAMES[metric_names]
        self.labels = f'engine="0",{self.names["model_label"]}="{model}"'
        self.kv_cache_tokens = kv_cache_tokens
        self.lock = threading.Lock()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.running: dict[int, int] = {}  # request id -> tokens held in the (simulated) KV cache
        self.prompt_lengths = Histogram(TOKEN_BUCKETS)
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def request_started(self, request_id: int, prompt_tokens: int) -> None:
        with self.lock:
            self.running[request_id] = prompt_tokens
            self.prompt_tokens += prompt_tokens
            self.prompt_lengths.observe(prompt_tokens)

    def tokens_generated(self, request_id: int, count: int) -> None:
        with self.lock:
            self.running[request_id] += count
            self.generation_tokens += count

    def request_finished(self, request_id: int, finish_reason: str, e2e_seconds: float) -> None:
        with self.lock:
            self.running.pop(request_id, None)
            self.success[finish_reason] += 1
            self.e2e.observe(e2e_seconds)

    def kv_cache_usage(self) -> float:
        return min(1.0, sum(self.running.values()) / self.kv_cache_tokens)

    def render(self) -> str:
        with self.lock:
            return "\n".join(self._lines()) + "\n"

    def _lines(self) -> list[str]:
        labels, n = self.labels, self.names
        out = []

        def metric(name: str, kind: str, help_text: str, samples: list[str]) -> None:
            out.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples])

        metric(n["running"], "gauge", "Number of requests in model execution batches.",
               [f"{n['running']}{{{labels}}} {float(len(self.running))}"])  # fmt: skip
        metric(n["waiting"], "gauge", "Number of requests waiting to be processed.",
               [f"{n['waiting']}{{{labels}}} 0.0"])  # fmt: skip
        metric(n["kv_cache_usage"], "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [f"{n['kv_cache_usage']}{{{labels}}} {self.kv_cache_usage()}"])  # fmt: skip
        if n["prompt_tokens"].endswith("_total"):
            metric(n["prompt_tokens"], "counter", "Number of prefill tokens processed.",
                   [f"{n['prompt_tokens']}{{{labels}}} {float(self.prompt_tokens)}"])  # fmt: skip
        else:
            metric(n["prompt_tokens"], "histogram", "Input sequence length in tokens.",
                   self.prompt_lengths.lines(n["prompt_tokens"], labels))  # fmt: skip
        metric(n["generation_tokens"], "counter", "Number of generation tokens processed.",
               [f"{n['generation_tokens']}{{{labels}}} {float(self.generation_tokens)}"])  # fmt: skip
        if n["requests"].startswith("dynamo_"):
            finished = float(sum(self.success.values()))
            route = 'endpoint="chat_completions",request_type="stream",status="success"'
            samples = [f"{n['requests']}{{{labels},{route}}} {finished}"]
        else:
            samples = [f'{n["requests"]}{{{labels},finished_reason="{reason}"}} {float(count)}'
                       for reason, count in self.success.items()]  # fmt: skip
        metric(n["requests"], "counter", "Count of successfully processed requests.", samples)
        for key, histogram, help_text in (
            ("ttft", self.ttft, "Histogram of time to first token in seconds."),
            ("itl", self.itl, "Histogram of inter-token latency in seconds."),
            ("e2e", self.e2e, "Histogram of e2e request latency in seconds."),
        ):
            metric(n[key], "histogram", help_text, histogram.lines(n[key], labels))
        return out
