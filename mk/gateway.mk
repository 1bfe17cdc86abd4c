# Gateway service (services/gateway): its test tier and the overhead benchmark.
.PHONY: gateway-deps test-gateway test-gateway-engine test-gateway-lab bench-gateway
GATEWAY_DEPS_STAMP := $(ROOT)/.cache/bootstrap/gateway-deps

## Gateway runtime deps in the dev venv (bootstrap installs them too; this catches pin changes).
gateway-deps: bootstrap
	@want="$$(sha256sum services/gateway/requirements.txt | cut -d' ' -f1)"; \
	if [ "$$(cat $(GATEWAY_DEPS_STAMP) 2>/dev/null)" != "$$want" ]; then \
	  $(VENV)/bin/pip install -q --disable-pip-version-check -r services/gateway/requirements.txt && \
	  echo "$$want" > $(GATEWAY_DEPS_STAMP); fi

## Real PostgreSQL + Redis + gateway processes against the synthetic upstream.
test-gateway: gateway-deps
	$(PYTEST) -m "gateway and not engine and not lab" -p no:cacheprovider tests/gateway

## Added latency vs direct, LiteLLM proxy and Envoy (prints a table; see docs/gateway.md).
bench-gateway: gateway-deps
	nice -n 5 $(VENV)/bin/python tests/bench/gateway_overhead.py

SERVICE_TIERS += test-gateway

## The gateway in front of the real CPU vLLM engine (needs `make engine`, cached).
test-gateway-engine: gateway-deps engine
	$(PYTEST) -m "gateway and engine" -p no:cacheprovider tests/gateway

SERVICE_TIERS += test-gateway-engine

## Routing from ModelDeployment objects in the real lab API server (needs `make lab-bins`, cached).
test-gateway-lab: gateway-deps lab-bins
	$(PYTEST) -m "gateway and lab" -p no:cacheprovider tests/gateway

SERVICE_TIERS += test-gateway-lab
