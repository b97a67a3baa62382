# researchloop: `make run` (a real loop on the embedded defaults) and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BASE_PYTHON ?= python3
export DAGSTER_HOME := $(CURDIR)/dagster_home
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
RUN_MODEL ?= qwen2.5-coder-1.5b
TEST_MODEL ?= qwen2.5-coder-0.5b
TOPIC ?= pointcloud_classification
ROUNDS ?= 2
PYTEST_ARGS ?=

.PHONY: setup system-deps run test test-fast ui bench clean-runtime

setup: $(VENV)/.installed system-deps

$(VENV)/.installed: requirements.txt pyproject.toml
	@echo "== creating $(VENV) and installing pinned packages (a few minutes the first time)"
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0  # the CPU wheel; a bare torch would pull CUDA
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

# bubblewrap sandboxes the code the LLM writes; dataset-fashion-mnist holds the
# image_classification topic's data; postgresql, chromium and chromium-driver serve the
# PostgreSQL-storage and browser tests (Debian packages; needs root or sudo once).
system-deps:
	@pkgs=""; command -v bwrap >/dev/null || pkgs="$$pkgs bubblewrap"; \
	  test -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz || pkgs="$$pkgs dataset-fashion-mnist"; \
	  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	  test -x /usr/bin/chromium || pkgs="$$pkgs chromium"; \
	  test -x /usr/bin/chromedriver || pkgs="$$pkgs chromium-driver"; \
	  [ -z "$$pkgs" ] || { echo "== installing$$pkgs"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$pkgs >/dev/null; }

run: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(VENV)/bin/researchloop run --topic $(TOPIC) --rounds $(ROUNDS)

test: setup
	$(PY) -m resources.local_llm fetch --model $(TEST_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(TEST_MODEL) $(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

ui: setup
	RESEARCHLOOP_LOCAL_MODEL=$${RESEARCHLOOP_LOCAL_MODEL:-$(RUN_MODEL)} $(PY) -m pipelines.ui

bench: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(PY) bench/run_bench.py

# one benchmark: make bench-ranking | bench-filtering | bench-independence | bench-repair |
# bench-parallel | bench-topics (each rewrites its own section of bench/RESULTS.md)
bench-%: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(PY) bench/$*_bench.py

clean-runtime:
	find dagster_home -mindepth 1 -maxdepth 1 ! -name dagster.yaml ! -name README.md -exec rm -rf {} +
