# learnserve — make targets. Every target creates/reuses .venv and installs what it needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
DATA_DIR ?= ./data
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: venv serve system-deps test test-slow lint format bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

venv: $(STAMP)

serve: venv
	$(BIN)/learnserve serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# System services the tests run for real (redis-server, prometheus, docker-compose validation).
system-deps:
	@command -v redis-server >/dev/null || (apt-get update -qq && apt-get install -y -qq redis-server) || echo "warning: could not install redis-server; Redis tests will skip"
	@command -v docker-compose >/dev/null || (apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose) || echo "warning: could not install docker-compose; compose validation tests will skip"
	@command -v prometheus >/dev/null || (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus) || echo "warning: could not install prometheus; dashboard query tests will skip"

test: venv system-deps
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: venv system-deps
	$(BIN)/python -m pytest -q -m slow

lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

format: venv
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: venv
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python bench/online.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
