"""vLLM-named Prometheus metrics kept by the synthetic upstream (text exposition format 0.0.4)."""

import bisect
import threading

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0)
FINISH_REASONS = ("stop", "length", "abort", "error")


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
    """Counters, gauges and histograms with vLLM's names and labels (engine, model_name)."""

    def __init__(self, model: str, kv_cache_tokens: int):
        self.labels = f'engine="0",model_name="{model}"'
        self.kv_cache_tokens = kv_cache_tokens
        self.lock = threading.Lock()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = dict.fromkeys(FINISH_REASONS, 0)
        self.running: dict[int, int] = {}  # request id -> tokens held in the (simulated) KV cache
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def request_started(self, request_id: int, prompt_tokens: int) -> None:
        with self.lock:
            self.running[request_id] = prompt_tokens
            self.prompt_tokens += prompt_tokens

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
        labels = self.labels
        out = []

        def metric(name: str, kind: str, help_text: str, samples: list[str]) -> None:
            out.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples])

        metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [f"vllm:num_requests_running{{{labels}}} {float(len(self.running))}"])  # fmt: skip
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
               [f"vllm:num_requests_waiting{{{labels}}} 0.0"])  # fmt: skip
        metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [f"vllm:kv_cache_usage_perc{{{labels}}} {self.kv_cache_usage()}"])  # fmt: skip
        metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               [f"vllm:prompt_tokens_total{{{labels}}} {float(self.prompt_tokens)}"])  # fmt: skip
        metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
               [f"vllm:generation_tokens_total{{{labels}}} {float(self.generation_tokens)}"])  # fmt: skip
        metric("vllm:request_success_total", "counter", "Count of successfully processed requests.", [
            f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(count)}'
            for reason, count in self.success.items()
        ])  # fmt: skip
        for name, histogram, help_text in (
            ("vllm:time_to_first_token_seconds", self.ttft, "Histogram of time to first token in seconds."),
            ("vllm:inter_token_latency_seconds", self.itl, "Histogram of inter-token latency in seconds."),
            ("vllm:e2e_request_latency_seconds", self.e2e, "Histogram of e2e request latency in seconds."),
        ):
            metric(name, "histogram", help_text, histogram.lines(name, labels))
        return out
