# learnserve — make targets. Every target creates/reuses .venv and installs what it needs:
# `make serve` the runtime only (`pip install -e .`), `make test`/`lint` the test extra,
# `make bench` the bench extra. Each install is stamped with pyproject.toml's checksum.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
DATA_DIR ?= ./data
SUM := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(SUM)
TEST_STAMP := $(VENV)/.installed-test-$(SUM)

.PHONY: venv test-venv warmup serve system-deps test test-slow lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	rm -f $(VENV)/.installed-[0-9]*; touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-test-*; touch $(TEST_STAMP)

venv: $(STAMP)

test-venv: $(TEST_STAMP)

# Compile the numba kernels ahead (progress on stderr; a few seconds once cached), so the
# service is ready as soon as it listens instead of answering 503 while it compiles.
warmup: venv
	$(BIN)/learnserve warmup

serve: warmup
	$(BIN)/learnserve serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# System services the tests run for real (redis-server, prometheus, docker-compose validation).
system-deps:
	@command -v redis-server >/dev/null || (apt-get update -qq && apt-get install -y -qq redis-server) || echo "warning: could not install redis-server; Redis tests will skip"
	@command -v docker-compose >/dev/null || (apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose) || echo "warning: could not install docker-compose; compose validation tests will skip"
	@command -v prometheus >/dev/null || (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus) || echo "warning: could not install prometheus; dashboard query tests will skip"

# The kernels are compiled first (in parallel, with progress): tests that start servers
# then find them cached instead of racing their readiness timeouts against a cold compile.
test: test-venv system-deps
	$(BIN)/lint-imports --no-cache
	$(BIN)/learnserve warmup
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: test-venv system-deps
	$(BIN)/learnserve warmup
	$(BIN)/python -m pytest -q -m slow

lint: test-venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

format: test-venv
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: venv
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python bench/online.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
