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
# Every package of the venv, direct and indirect, pinned with its sha256 hashes; generated from
# pyproject.toml (the one place versions are declared) by `make lock`.
LOCK := requirements.lock

.PHONY: setup system-deps lock lint run test test-fast ui bench clean-runtime

setup: $(VENV)/.installed system-deps

# pip checks every file against the lock's hashes (pip itself included: the lock upgrades the
# venv's bundled pip); torch is the CPU wheel 2.13.0+cpu that pip finds on this machine's disk
# (find-links in pip's configuration). pip-sync (pip-tools, from the lock) then removes what an
# older venv holds beyond the lock. The project itself goes in editable, with no dependencies and
# no build isolation (its build back-end, setuptools, comes from the lock too).
$(VENV)/.installed: $(LOCK) pyproject.toml
	@echo "== creating $(VENV) and installing the locked packages (a few minutes the first time)"
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r $(LOCK)
	$(VENV)/bin/pip-sync -q $(LOCK)
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
# browser tests (tests/system_deps.py installs or skips when one is missing outside `make test`).
.PHONY: test-deps
test-deps:
	@pkgs=""; ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	  test -x /usr/bin/chromium || pkgs="$$pkgs chromium"; \
	  test -x /usr/bin/chromedriver || pkgs="$$pkgs chromium-driver"; \
	  $(APT_INSTALL)

run: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(VENV)/bin/researchloop run --topic $(TOPIC) --rounds $(ROUNDS)

lint: setup
	$(VENV)/bin/ruff check .

# The manual (mkdocs.yml, docs/): built with --strict into build/site/; docs-reference rewrites the pages
# generated from schemas/topic.py and resources/settings.py (tests/test_docs.py checks both are current).
.PHONY: docs docs-reference
docs: $(VENV)/.installed
	$(VENV)/bin/mkdocs build --strict --quiet

docs-reference: $(VENV)/.installed
	$(PY) docs/gen_reference.py

# pytest's exit status fails the target (5, no tests collected, included), and so .ci/run.
test: setup test-deps lint
	$(PY) -m resources.local_llm fetch --model $(TEST_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(TEST_MODEL) $(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: setup lint
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

ui: setup
	RESEARCHLOOP_LOCAL_MODEL=$${RESEARCHLOOP_LOCAL_MODEL:-$(RUN_MODEL)} $(PY) -m pipelines.ui

bench: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(PY) -m bench.run_bench

# one benchmark: make bench-ranking | bench-filtering | bench-independence | bench-repair |
# bench-parallel | bench-topics | bench-loop | bench-null | bench-implementation | bench-speculative | bench-index (each writes its raw record and
# rewrites its own section of bench/RESULTS.md; `make bench` writes the section make-bench)
# bench-effectiveness: `researchloop run` for 3 rounds on every shipped topic on a fresh DAGSTER_HOME (hours
# on the local model): bench/records/effectiveness.json and the section effectiveness (issue 14's goals)
# bench-sources (via bench-%): diabetes_regression for 3 rounds with each idea source alone (ranking, scipip,
# chains, brainstorm; the Idea Arena on), each on a fresh DAGSTER_HOME (hours per source on the local model):
# bench/records/sources.json and the section sources (issue 16: per source ideas, implemented, verified
# improvements, best gain, tokens per idea; Spearman of Arena ratings against measured gains)
# bench-ranking-similarity: the embedding-only ranking rules on every labelled candidate, no LLM (a minute):
# bench/records/ranking_similarity_all.json and the section ranking_similarity
bench-ranking-similarity: setup
	$(PY) -m bench.ranking_bench --similarity-only

# bench-attributes (via bench-%): the attribute mode's task / input / output answers for 4 papers of every
# development topic on the local model, copies of the title or abstract before and after the re-ask
# in two variants, the corpus summaries as they are and cut before their stated "Task: ..." (about 8 + 25 min on
# the loaded 2-core VM): bench/records/ranking_attributes.json and the section ranking_attributes

# bench-second-look: the seed rule's false- and true-improvement rates with and without the second look,
# simulated through verdicts.py (a minute, no LLM): bench/records/second_look.json and the section second_look
bench-second-look: setup
	$(PY) -m bench.second_look_bench

# bench-headroom: every one-knob move of each shipped topic's baseline, run on the topic's seeds and judged by the
# loop's verdict rule, no LLM (minutes to an hour): bench/records/headroom.json and the section headroom
bench-headroom: setup
	$(PY) -m bench.headroom_bench

# bench-embed-parallel: the real embedder's papers/s building a generated dump's embedding chunks with 1 and 2
# local workers (RESEARCHLOOP_EMBED_WORKERS; minutes, no LLM): bench/records/embed_parallel.json and the
# section embed_parallel
bench-embed-parallel: setup
	$(PY) -m bench.embed_parallel_bench

# bench-ann-real: the dump index's HNSW against the exact search on real paper embeddings (the conference
# paper lists of papercopilot/paperlists, checked out at PAPERLISTS; about an hour to embed 50k papers on
# 2 cores, resumable): bench/records/ann_real.json and the section ann_real
PAPERLISTS ?= /tmp/pl
ANN_PAPERS ?= 49152
bench-ann-real: setup
	$(PY) -m bench.ann_real_bench --lists $(PAPERLISTS) --max-papers $(ANN_PAPERS)

# bench-merge: every pair of ideas of a round that ran, in the record stores of earlier loops (STORES: comma-separated
# work folders, e.g. bench-effectiveness's --work), merged as the carry-over of a win does (seconds, no LLM, no run):
# bench/records/merge.json and the section merge; FROM_RECORD=1 .venv/bin/python -m bench.merge_bench re-renders it
bench-merge: setup
	$(PY) -m bench.merge_bench --stores $(STORES)

# bench-repair-replay: every idea earlier loops lost to an error (STORES: comma-separated work folders), given the
# mechanical repair candidates (no LLM) and a real dry run each: bench/records/repair_replay.json, section repair_replay
bench-repair-replay: setup
	$(PY) -m bench.repair_replay --stores $(STORES)

bench-%: setup
	$(PY) -m resources.local_llm fetch --model $(RUN_MODEL)
	RESEARCHLOOP_LOCAL_MODEL=$(RUN_MODEL) $(PY) -m bench.$*_bench

clean-runtime:
	find dagster_home -mindepth 1 -maxdepth 1 ! -name dagster.yaml ! -name README.md -exec rm -rf {} +
