# The unit tests and ansible-test's Python-version sanity tests (compile, import: the multi-version ones) again
# under Python 3.12 (DGX OS 7 / Ubuntu 24.04 ship it; `make unit` uses .venv's Python, 3.11 on Debian 12), in their
# own venv. The single-version sanity tests (pylint, validate-modules, ...) check the same files whatever the Python
# and run once, in the sanity tier. Measured 2026-12-05 on the shared 2-core machine: cold (new venv,
# pinned requirements downloaded, ansible-test's sanity requirements, unit 212 s, sanity) 766 s at load 9-11;
# warm 198 s at load 6-8 (unit 110 s, sanity ~85 s).
.PHONY: test-py312
SERVICE_TIERS += test-py312
PY312_VENV ?= $(ROOT)/.venv-3.12
# python3.12 on PATH if it runs (a pyenv shim may not), else pyenv's.
PY312 ?= $(shell for p in python3.12 $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12); do \
  "$$p" -c '' 2>/dev/null && { command -v "$$p"; break; }; done)

test-py312:
	@[ -n "$(PY312)" ] || { echo "test-py312: no runnable python3.12 (PATH, pyenv): set PY312=" >&2; exit 1; }
	$(MAKE) --no-print-directory VENV=$(PY312_VENV) TF_PYTHON=$(PY312) unit sanity \
	  SANITY_ARGS="--test compile --test import"
