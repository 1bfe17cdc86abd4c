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
# Suites added by mk/*.mk append their targets here; `make test` runs all of them, in order.
TEST_TIERS :=
# $(call tf_pinned,NAME): the version versions.yml (the collection's one list of pinned versions) gives NAME.
tf_pinned = $(or $(shell sed -n 's/^$(1): *"\([^"]*\)".*/\1/p' $(ROOT)/versions.yml),$(error versions.yml pins no $(1)))
include $(sort $(wildcard mk/*.mk))

.PHONY: bootstrap lint sanity unit test test-fast collection-build

bootstrap:
	scripts/bootstrap

lint: bootstrap
	yamllint --strict .
	ruff check .
	ruff format --check .
	ansible-lint --strict
	antsibull-changelog lint

sanity: bootstrap
	scripts/sanity

unit: bootstrap
	$(PYTEST) -m "not (lab or engine or gateway or molecule or e2e or slow or observability)" -p no:cacheprovider

## Local fast path: lint and unit tests only.
test-fast: lint unit

## Everything CI runs.
test: lint sanity unit $(TEST_TIERS)

collection-build: bootstrap
	mkdir -p build && ansible-galaxy collection build --force --output-path build .
