# Validation after rollout (plugins/module_utils/loadtest/loadgen.py & co., validate_deployment, validation_report).
.PHONY: test-validation bench-validation

## Synthetic-upstream accuracy, real CPU vLLM (KV pressure, engine death), gateway (API key, 429), playbook + reports.
test-validation: bootstrap engine gateway-deps
	$(PYTEST) -p no:cacheprovider tests/validation

## Our load generator vs `vllm bench serve` on the same engine: 1 warm-up + 8 interleaved rounds, accuracy rows
## with A/A spreads, CPU per token (user/sys), PASS/FAIL/UNRESOLVED (2.5 min quiet, 16 min at load 11-23; docs/validation.md).
bench-validation: bootstrap engine
	nice -n 5 $(VENV)/bin/python tests/bench/validation_vs_vllm_bench.py

SERVICE_TIERS += test-validation
