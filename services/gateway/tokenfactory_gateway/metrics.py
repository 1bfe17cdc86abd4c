"""Prometheus metrics of the gateway (labels: model and tenant names, never keys)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

disable_created_metrics()  # halves the exposition size; nothing here needs *_created

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5)
PAUSE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        labels = ("model", "tenant")
        self.requests = Counter(
            "tf_gateway_requests", "Proxied requests by HTTP status", (*labels, "status"), registry=r
        )
        self.errors = Counter(
            "tf_gateway_errors", "Failed requests by error code", ("model", "tenant", "code"), registry=r
        )
        self.rate_limited = Counter("tf_gateway_rate_limited", "Requests answered 429", (*labels, "scope"), registry=r)
        self.budget_exceeded = Counter(
            "tf_gateway_budget_exceeded", "Requests refused by a spend budget", (*labels, "scope"), registry=r
        )
        budget_labels = ("tenant", "period", "unit")  # unit: tokens, or amount (in the deployments' currency)
        self.budget_spent = Gauge(
            "tf_gateway_budget_spent", "Spent in the current period of a tenant budget", budget_labels, registry=r
        )
        self.budget_limit = Gauge("tf_gateway_budget_limit", "A tenant budget per period", budget_labels, registry=r)
        self.tokens = Counter("tf_gateway_tokens", "Tokens metered", (*labels, "kind"), registry=r)
        self.cost = Counter(
            "tf_gateway_cost", "Cost metered, in the deployment currency", (*labels, "currency"), registry=r
        )
        self.latency = Histogram(
            "tf_gateway_request_duration_seconds", "Request latency", labels, buckets=LATENCY_BUCKETS, registry=r
        )
        self.ttft = Histogram(
            "tf_gateway_time_to_first_token_seconds",
            "Time to first streamed token",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "tf_gateway_inter_token_latency_seconds",
            "Gap between streamed chunks",
            labels,
            buckets=ITL_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("tf_gateway_in_flight_requests", "Requests being proxied", registry=r)
        self.client_disconnects = Counter(
            "tf_gateway_client_disconnects", "Streams the client left", labels, registry=r
        )
        self.deployments = Gauge("tf_gateway_deployments", "Deployments in the routing table", registry=r)
        self.routing_errors = Counter("tf_gateway_routing_refresh_errors", "Failed routing refreshes", registry=r)
        self.meter_pending = Gauge(
            "tf_gateway_metering_pending_records", "Usage records not yet in PostgreSQL", registry=r
        )
        self.meter_spooled = Counter(
            "tf_gateway_metering_spooled_records", "Usage records left journaled after a failed insert", registry=r
        )
        self._routes: dict[tuple[str, str], RouteMetrics] = {}
        self.meter_written = Counter("tf_gateway_metering_written_records", "Usage records written", registry=r)
        self.meter_replayed = Counter(
            "tf_gateway_metering_replayed_records", "Usage records written from a journal on disk", registry=r
        )
        self.meter_rejected = Counter(
            "tf_gateway_metering_rejected_records", "Usage records PostgreSQL refused (kept in rejected.jsonl)",
            registry=r,
        )  # fmt: skip
        self.gc_pause = Histogram(
            "tf_gateway_gc_pause_seconds", "CPU time of each garbage collection (the event loop stops meanwhile)",
            ("generation",),
            buckets=PAUSE_BUCKETS, registry=r,
        )  # fmt: skip
        self.loop_lag = Histogram(
            "tf_gateway_event_loop_lag_seconds", "How late a due event-loop timer ran (loop busy or not scheduled)",
            buckets=PAUSE_BUCKETS, registry=r,
        )  # fmt: skip
        self.tls_reloads = Counter(
            "tf_gateway_tls_certificate_reloads", "Certificate reloads of the public listener", ("result",), registry=r
        )

    def route(self, model: str, tenant: str) -> RouteMetrics:
        """Label children for one (model, tenant), created once: labels() lookups cost more than the updates."""
        found = self._routes.get((model, tenant))
        if found is None:
            found = self._routes[model, tenant] = RouteMetrics(self, model, tenant)
        return found

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RouteMetrics:
    __slots__ = ("_m", "_statuses", "completion", "cost", "disconnects", "itl", "labels", "latency", "prompt", "ttft")

    def __init__(self, metrics: Metrics, model: str, tenant: str):
        self._m, self.labels = metrics, (model, tenant)
        self.prompt = metrics.tokens.labels(model, tenant, "prompt")
        self.completion = metrics.tokens.labels(model, tenant, "completion")
        self.latency = metrics.latency.labels(model, tenant)
        self.ttft = metrics.ttft.labels(model, tenant)
        self.itl = metrics.itl.labels(model, tenant)
        self.disconnects = metrics.client_disconnects.labels(model, tenant)
        self.cost: dict[str, Counter] = {}
        self._statuses: dict[int, Counter] = {}

    def request(self, status: int):
        child = self._statuses.get(status)
        if child is None:
            child = self._statuses[status] = self._m.requests.labels(*self.labels, str(status))
        return child

    def cost_in(self, currency: str):
        child = self.cost.get(currency)
        if child is None:
            child = self.cost[currency] = self._m.cost.labels(*self.labels, currency)
        return child
