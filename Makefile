# Entry points. README's two commands: `make lab` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
ROOT := $(CURDIR)
VENV ?= $(or $(TF_VENV),$(ROOT)/.venv)
# scripts/bootstrap and the tests that call it use the same venv.
export TF_VENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
PYTEST := $(VENV)/bin/pytest
# `make test` runs two lanes side by side (scripts/run_lanes.py), the tiers of each lane one after another. Suites
# added by mk/*.mk append their tiers to one lane: CLUSTER_TIERS bring up real kubelet nodes on podman hosts (one
# cluster at a time), SERVICE_TIERS are the rest (lint, unit, real services, the API server lab, light podman hosts).
CLUSTER_TIERS :=
SERVICE_TIERS := lint sanity unit
# Each tier's log: $(TIER_LOGS)/<tier>.log (the summary names the failed ones and prints their tails).
TIER_LOGS ?= $(ROOT)/reports/tiers
# Cached builds under $(TF_CACHE) run one at a time whichever lane asks (two at once would write the same cache);
# a warm check waits for the holder, then returns in seconds.
BUILD_LOCK = mkdir -p $(TF_CACHE) && flock $(TF_CACHE)/build.lock
RUN_LANES = $(VENV)/bin/python scripts/run_lanes.py --make "$(MAKE)" --log-dir $(TIER_LOGS)
# $(call tf_pinned,NAME): the version versions.yml (the collection's one list of pinned versions) gives NAME.
tf_pinned = $(or $(shell sed -n 's/^$(1): *"\([^"]*\)".*/\1/p' $(ROOT)/versions.yml),$(error versions.yml pins no $(1)))
include $(sort $(wildcard mk/*.mk))

.PHONY: bootstrap lint sanity unit test test-clusters test-services test-fast collection-build

bootstrap:
	scripts/bootstrap

lint: bootstrap
	yamllint --strict .
	ruff check .
	ruff format --check .
	ansible-lint --strict
	antsibull-changelog lint

# SANITY_ARGS: more ansible-test options (e.g. --test compile); test-py312 runs only the Python-version tests again.
SANITY_ARGS ?=
sanity: bootstrap
	scripts/sanity $(SANITY_ARGS)

unit: bootstrap
	$(PYTEST) -m "not (lab or engine or gateway or molecule or e2e or rehearsal or slow or observability)" -p no:cacheprovider

## Local fast path: lint and unit tests only.
test-fast: lint unit

## Everything CI runs: both lanes at once; every tier runs even after another failed, then the summary.
test: bootstrap
	$(RUN_LANES) --lane clusters "$(CLUSTER_TIERS)" --lane services "$(SERVICE_TIERS)"

## One lane alone (same logs and summary).
test-clusters: bootstrap
	$(RUN_LANES) --lane clusters "$(CLUSTER_TIERS)"
test-services: bootstrap
	$(RUN_LANES) --lane services "$(SERVICE_TIERS)"

collection-build: bootstrap
	mkdir -p build && ansible-galaxy collection build --force --output-path build .
