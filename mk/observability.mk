# Observability: Prometheus/promtool/node_exporter built from the Go module proxy (cached), alert rule unit
# tests, Prometheus state, the alert pipeline and health gate, kubernetes_sd against the lab API server,
# every dashboard query against live series (tests/observability, docs/operations.md).
.PHONY: prometheus test-observability
SERVICE_TIERS += test-observability

## Build (or reuse) prometheus, promtool and node_exporter under $TF_CACHE (cold ~10 min, warm instant), and the
## Prometheus Operator's PrometheusRule CRD (the real schema the rules are checked against).
prometheus:
	$(BUILD_LOCK) nice -n 10 scripts/ensure-prometheus >/dev/null
	$(BUILD_LOCK) scripts/ensure-prometheus-operator-crds >/dev/null

# Measured 2026-12-04: 5 min 46 s wall warm, 54 s CPU, load average 11-15 (shared machine, `make lab` beside it).
test-observability: bootstrap prometheus lab-bins gateway-deps
	$(PYTEST) -m observability -p no:cacheprovider tests/observability
