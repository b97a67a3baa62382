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
# pytest-xdist workers for make test: test files are spread over them whole (--dist loadfile), so
# a file's module fixtures are built once. auto: one per core.
TEST_WORKERS ?= auto
# Every package of the venv, direct and indirect, pinned with its sha256 hashes; generated from
# pyproject.toml (the one place versions are declared) by `make lock`.
LOCK := requirements.lock

.PHONY: setup system-deps lock lint run test test-all test-fast ui bench clean-runtime

setup: $(VENV)/.installed system-deps

# uv (itself from the lock, installed by pip with its hashes checked) installs the lock: it checks
# every file against the lock's hashes, downloads in parallel, compiles the bytecode on every core and
# removes what an older venv holds beyond the lock. torch is the CPU wheel 2.13.0+cpu that this
# machine keeps on disk (pip's find-links, handed to uv). Should uv fail, pip installs the lock the
# slower way (pip-sync, from the lock, then removes the extras). The project itself goes in
# editable, with no dependencies and no build isolation (its build back-end, setuptools, comes from
# the lock too). FIND_LINKS is deferred (=): pip is asked only when the venv is built.
FIND_LINKS = $(strip $(PIP_FIND_LINKS) $(shell $(BASE_PYTHON) -m pip config get global.find-links 2>/dev/null))
UV_SYNC = $(VENV)/bin/uv pip sync -q --require-hashes --compile-bytecode --python $(PY) \
	  $(foreach f,$(sort $(FIND_LINKS)),--find-links $(f)) $(LOCK)
$(VENV)/.installed: $(LOCK) pyproject.toml
	@echo "== creating $(VENV) and installing the locked packages (a minute or two the first time)"
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	awk '/^uv==/{p=1} p{print} p && !/\\$$/{exit}' $(LOCK) > $(VENV)/uv-requirement.txt
	( $(PY) -m pip install -q --require-hashes --no-deps -r $(VENV)/uv-requirement.txt && $(UV_SYNC) ) || \
	  { echo "== uv could not install the lock: pip installs it"; \
	    $(PY) -m pip install -q --require-hashes -r $(LOCK) && $(VENV)/bin/pip-sync -q $(LOCK); }
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Re-resolve the lock after editing pyproject.toml's dependencies (pip-tools, from the lock itself).
lock: $(VENV)/.installed
	$(VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --no-strip-extras \
	  --extra test --extra dev --extra ray --build-deps-for editable --no-emit-index-url --no-emit-find-links \
	  --output-file $(LOCK) pyproject.toml

# Debian packages, installed only when missing (needs root or sudo once): $(APT_INSTALL) installs $$pkgs.
APT_INSTALL = [ -z "$$pkgs" ] || { echo "== installing$$pkgs"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$pkgs >/dev/null; }

# What a run needs: bubblewrap sandboxes the code the LLM writes; dataset-fashion-mnist holds the
# image_classification topic's data.
system-deps:
	@pkgs=""; command -v bwrap >/dev/null || pkgs="$$pkgs bubblewrap"; \
	  test -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz || pkgs="$$pkgs dataset-fashion-mnist"; \
	  $(APT_INSTALL)

# What only the tests need: postgresql, chromium and chromium-driver serve the PostgreSQL-storage and
# browser tests (tests/support/system_deps.py installs or skips when one is missing outside `make test`).
.PHONY: test-deps
test-deps:
	@pkgs=""; ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	  test -x /usr/bin/chromium || pkgs="$$pkgs chromium"; \
	  test -x /usr/bin/chromedriver || pkgs="$$pkgs chromium-driver"; \
	  $(APT_INSTALL)

run: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(VENV)/bin/researchloop run --topic $(TOPIC) --rounds $(ROUNDS)

# ruff; mypy on resources/ and schemas/ ([tool.mypy] in pyproject.toml); the import-layer contracts
# of .importlinter (lint-imports).
lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/mypy && $(VENV)/bin/lint-imports

# The manual (mkdocs.yml, docs/): built with --strict into build/site/; docs-reference rewrites the pages
# generated from schemas/topic.py and resources/settings.py (tests/project/test_docs.py checks both are current).
.PHONY: docs docs-reference
docs: $(VENV)/.installed
	$(VENV)/bin/mkdocs build --strict --quiet

docs-reference: $(VENV)/.installed
	$(PY) docs/gen_reference.py

# pytest's exit status fails the target (5, no tests collected, included), and so .ci/run.
test: setup test-deps lint
	$(PY) -m resources.local_llm fetch --model $(TEST_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(TEST_MODEL) $(PY) -m pytest -q -m "not extended" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# Every test, the extended cases too (further heavy cases of real parts `make test` already runs).
test-all: setup test-deps lint
	$(PY) -m resources.local_llm fetch --model $(TEST_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(TEST_MODEL) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test-fast: setup lint
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

ui: setup
	RESEARCHLOOP_LOCAL_MODEL=$${RESEARCHLOOP_LOCAL_MODEL:-$(RUN_MODEL)} $(PY) -m pipelines.ui

# Benchmarks (bench/RESULTS.md): `make bench` is the baseline and a two-round loop; `make bench-NAME
# ARGS="..."` runs `python -m bench NAME ARGS`, and `python -m bench` lists the names.
bench: setup
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(PY) -m bench run --topic $(TOPIC) --rounds $(ROUNDS)

bench-ranking-similarity: setup
	$(PY) -m bench ranking --similarity-only

bench-%: setup
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(PY) -m bench $* $(ARGS)

clean-runtime:
	find dagster_home -mindepth 1 -maxdepth 1 ! -name dagster.yaml ! -name README.md -exec rm -rf {} +
