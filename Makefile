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

.PHONY: venv test-venv warmup serve system-deps bench-system-deps test test-slow lint format bench clean

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

# Compile every numba kernel family ahead (progress on stderr, each family in a process of
# its own; about a second each once cached). Optional: the service compiles a kind's
# kernels itself when the first model of that kind is created or restored, in the
# background, and that model answers 503 + Retry-After until they are ready.
warmup: venv
	$(BIN)/learnserve warmup

# Answers at once: nothing is compiled before it listens (see warmup above).
serve: venv
	$(BIN)/learnserve serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# Programs the tests run for real: redis-server, docker-compose (validation only) and
# Prometheus's prometheus/promtool (rule tests, dashboard queries). Nothing is started
# or enabled: redis-server and docker-compose come from Debian's packages only when
# missing (the tests start their own redis-server on a free port); Prometheus is NOT
# installed system-wide (its package would start and enable a server at boot): its
# .deb is downloaded and unpacked into $(TOOLS), whose bin/ `make test` puts on PATH.
# A package goes in system-wide, with apt-get, only as root on Debian/Ubuntu, and each is
# announced first (what and why); otherwise it is skipped with a message saying so (the
# tests that need it skip with the reason), never attempted with sudo.
TOOLS ?= .tools
APT_INSTALL = sh -c 'pkg=$$1; why=$$2; \
	if [ "$$(id -u)" != 0 ]; then echo "system-deps: not root: $$pkg is not installed ($$why); those tests will skip (as root: make system-deps)"; exit 0; fi; \
	if ! command -v apt-get >/dev/null; then echo "system-deps: no apt-get (not Debian/Ubuntu): $$pkg is not installed ($$why); those tests will skip"; exit 0; fi; \
	echo "system-deps: installing the Debian package $$pkg system-wide (apt-get, as root): $$why"; \
	(apt-get update -qq && apt-get install -y -qq --no-install-recommends $$pkg) || echo "warning: could not install $$pkg; those tests will skip"' apt
system-deps: $(TOOLS)/bin/promtool
	@command -v redis-server >/dev/null || $(APT_INSTALL) redis-server "the Redis-store tests start their own redis-server on a free port; nothing is started or enabled"
	@command -v docker-compose >/dev/null || $(APT_INSTALL) docker-compose "the compose validation tests run docker-compose config; nothing is started"

$(TOOLS)/bin/promtool:
	@mkdir -p $(TOOLS)/deb $(TOOLS)/bin
	@if command -v promtool >/dev/null && command -v prometheus >/dev/null; then \
		ln -sf "$$(command -v promtool)" $(TOOLS)/bin/promtool; \
		ln -sf "$$(command -v prometheus)" $(TOOLS)/bin/prometheus; \
	elif (cd $(TOOLS)/deb && apt-get download prometheus >/dev/null 2>&1); then \
		dpkg -x $(TOOLS)/deb/prometheus_*.deb $(TOOLS)/root && rm -rf $(TOOLS)/deb && \
		ln -sf ../root/usr/bin/promtool $(TOOLS)/bin/promtool && \
		ln -sf ../root/usr/bin/prometheus $(TOOLS)/bin/prometheus; \
	else echo "warning: could not fetch prometheus; alert-rule and dashboard query tests will skip"; fi

# The kernels are compiled first (in parallel, with progress): tests that start servers
# then find them cached instead of racing their readiness timeouts against a cold compile.
# Two test files at a time (pytest-xdist; each file in one process, in its own order, as
# one at a time: ~10 min on 2 cores, against ~16).
# Extra pytest arguments: make test PYTEST_ARGS="-k delayed -x" (or tests/service/...;
# -n 0 runs them one at a time)
PYTEST_ARGS ?=

test: test-venv system-deps
	$(BIN)/lint-imports --no-cache
	$(BIN)/learnserve warmup
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile $(PYTEST_ARGS)

test-slow: test-venv system-deps
	$(BIN)/learnserve warmup
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

lint: test-venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

format: test-venv
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

# What the benchmarks run besides Python, never the tests: wrk (bench/http.py --load wrk,
# bench/update_path.py --load wrk / --profile), from Debian's package when missing.
bench-system-deps:
	@command -v wrk >/dev/null || $(APT_INSTALL) wrk "the benchmarks' --load wrk runs it"

bench: venv bench-system-deps
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python bench/online.py

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache
