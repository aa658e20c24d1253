# bpflow set-up chain. `make run` serves the app on http://localhost:3000; `make test` runs
# the whole suite, real-browser tests included. Both set up everything they need.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
INSTALL_STAMP := $(VENV)/.bpflow-installed
BUN_VERSION := 1.4.4
BUN := $(CURDIR)/.tools/node_modules/bun/bin/bun.exe
CHROMIUM := /usr/bin/chromium
PORT ?= 3000

# Reflex would download bun itself, which cannot work here: use the one from npm.
export REFLEX_BUN_PATH := $(BUN)

.PHONY: help venv install bun chromium db run test soak bench lint clean distclean

help:
	@echo "make run        set up and serve the app on http://localhost:$(PORT)"
	@echo "make test       set up (browser included) and run the whole test suite"
	@echo "make soak       the long crash test (20 kills of the server under load)"
	@echo "make bench      bpflow against SpiffWorkflow and DBOS (installs the bench extra)"
	@echo "make lint       ruff check"
	@echo "make install    create $(VENV) and install bpflow with its dev extras"
	@echo "make bun        install bun $(BUN_VERSION) under .tools/ (used by Reflex)"
	@echo "make chromium   install Debian's chromium if $(CHROMIUM) is missing"
	@echo "make clean      remove build output (.web, .states, test-output)"

venv install: $(INSTALL_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(UV): | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check uv

# Re-runs only when pyproject.toml changes; uv makes a full install take seconds.
$(INSTALL_STAMP): pyproject.toml | $(UV)
	$(UV) pip install --python $(PY) -e '.[dev]' \
		|| $(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

bun: $(BUN)

# npm may skip bun's postinstall script (install scripts not allowed); run it by hand then.
$(BUN):
	npm install --prefix .tools --no-audit --no-fund bun@$(BUN_VERSION)
	@"$@" --version >/dev/null 2>&1 || (cd .tools/node_modules/bun && node install.js)
	@echo "bun $$("$@" --version) at $@"

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get install -y chromium \
			|| { $$sudo apt-get update && $$sudo apt-get install -y chromium; }; \
	fi

# The database is created or migrated and the example templates whose names are unknown added
# on every start (both no-ops when nothing changed; what an admin uploaded stays); the first
# start also adds demo users.
db: install
	$(VENV)/bin/bpflow db upgrade
	$(VENV)/bin/bpflow import --new-only upload/workflow
	$(VENV)/bin/bpflow seed-demo

# The example templates call 127.0.0.1:9000, which the egress guard refuses unless allowed.
run: install bun db
	BPFLOW_EGRESS_ALLOW="$${BPFLOW_EGRESS_ALLOW-127.0.0.1}" \
		$(VENV)/bin/reflex run --env prod --single-port --frontend-port $(PORT) --backend-port $(PORT)

test: install bun chromium
	$(PY) -m pytest -q

soak: install
	BPFLOW_SOAK=1 $(PY) -m pytest -q tests/store/test_crash.py

# The peers are pinned in the `bench` extra, installed here only: `make test` does not need them.
bench: install
	$(UV) pip install --python $(PY) -e '.[dev,bench]' \
		|| $(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/peers.py $(BENCH_ARGS)

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf .web .states test-output

distclean: clean
	rm -rf $(VENV) .tools
