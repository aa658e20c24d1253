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
# axe-core, run on every page by tests/browser/test_accessibility.py (injected by Playwright)
AXE_VERSION := 4.14.1
AXE_DIR := .tools/axe
# Lighthouse for bench/lighthouse.py (`make bench` only); 12.x is the last line that runs on
# Node 20 (13 needs Node 22).
LIGHTHOUSE_VERSION := 12.8.2
LIGHTHOUSE := $(CURDIR)/.tools/lighthouse/node_modules/lighthouse/package.json
PORT ?= 3000
BACKENDS ?= 2
WORKERS ?= 2
# run-scaled's workers: lease per instance and idle poll (s); empty: the worker's defaults
LEASE ?=
POLL ?=
TEST_WORKERS ?= 3

# Reflex would download bun itself, which cannot work here: use the one from npm.
export REFLEX_BUN_PATH := $(BUN)
# With PYTHONDONTWRITEBYTECODE set (some machines' environments set it), every Python
# process compiles every module it imports from source: several seconds of CPU for each
# server, worker and command the tests and `make run-scaled` start. Ours keep bytecode
# (__pycache__/ is ignored by git).
unexport PYTHONDONTWRITEBYTECODE
# Reflex picks its npm registry by timing registry.npmjs.org against a mirror, and prints
# "Failed to connect" for the one it cannot reach: give it the registry npm is set up with.
REFLEX_ENV = NPM_CONFIG_REGISTRY="$${NPM_CONFIG_REGISTRY:-$$(npm config get registry 2>/dev/null)}"
WEB_STAMP := .web/reflex.json
REFLEX_RUN = $(VENV)/bin/reflex run --env prod --single-port --frontend-port $(PORT) \
	--backend-port $(PORT)

.PHONY: help venv install bun chromium fonts axe caddy lighthouse db run run-scaled test soak bench \
	lint messages clean distclean

help:
	@echo "make run        set up and serve the app on http://localhost:$(PORT)"
	@echo "make run-scaled $(BACKENDS) backends + $(WORKERS) workers on PostgreSQL and Redis," \
		"under supervisord (BACKENDS=N WORKERS=M LEASE=S POLL=S)"
	@echo "make test       set up (browser included) and run the whole test suite" \
		"(TEST_WORKERS=N processes, default $(TEST_WORKERS))"
	@echo "make soak       the long crash test (20 kills of the server under load), then the" \
		"paper flow scaled out for 10 minutes, workers and backends killed meanwhile" \
		"(SOAK_ARGS=\"--minutes M --rate R\")"
	@echo "make bench      bpflow against SpiffWorkflow and DBOS (installs the bench extra)," \
		"then Lighthouse's mobile preset on /guest and /flows (installs npm lighthouse)"
	@echo "make lint       ruff check, the layer contracts (lint-imports), mypy"
	@echo "make messages   the texts of the web app and the services' messages into the" \
		"catalogs (bpflow_app/locale/*.po)"
	@echo "make install    create $(VENV) and install bpflow with its dev extras"
	@echo "make bun        install bun $(BUN_VERSION) under .tools/ (used by Reflex)"
	@echo "make chromium   install Debian's chromium if $(CHROMIUM) is missing"
	@echo "make fonts      install Debian's fonts-noto-cjk (Chinese pages in the browser tests)"
	@echo "make axe        install axe-core $(AXE_VERSION) under $(AXE_DIR)/ (accessibility tests)"
	@echo "make caddy      install Debian's caddy (the deployment's web entry point, its tests)"
	@echo "make clean      remove build output (.web, .states, test-output)"

venv install: $(INSTALL_STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# -qq: pip's errors only (its warnings about index locations of this machine's pip
# configuration that have no uv are not ours).
$(UV): | $(PY)
	$(PY) -m pip install -qq --disable-pip-version-check uv

# Re-runs only when pyproject.toml changes; uv makes a full install take seconds.
$(INSTALL_STAMP): pyproject.toml | $(UV)
	$(UV) pip install --python $(PY) -e '.[dev]' \
		|| $(PY) -m pip install -qq -e '.[dev]'
	@touch $@

bun: $(BUN)

# bun's postinstall script (it puts the binary in place) is run by hand: npm may not allow
# install scripts, and warns when it skips one. --loglevel=error: npm's errors only (not its
# warnings about settings of this machine's own npm configuration).
$(BUN):
	npm install --prefix .tools --no-audit --no-fund --ignore-scripts --loglevel=error \
		bun@$(BUN_VERSION)
	@cd .tools/node_modules/bun && node install.js
	@echo "bun $$("$@" --version) at $@"

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get install -y chromium \
			|| { $$sudo apt-get update && $$sudo apt-get install -y chromium; }; \
	fi

# The Chinese pages need a CJK font (assets/styles.css names Noto Sans CJK SC first);
# without one Chromium draws boxes, and the screenshots of the browser tests show them.
fonts:
	@if ! dpkg-query -W -f='$${Status}' fonts-noto-cjk 2>/dev/null | grep -q "ok installed"; then \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get install -y --no-install-recommends fonts-noto-cjk \
			|| { $$sudo apt-get update \
				&& $$sudo apt-get install -y --no-install-recommends fonts-noto-cjk; }; \
	fi

# The web entry point of the deployment recipes (deploy/Caddyfile), run by its tests.
caddy:
	@if ! command -v caddy >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get install -y --no-install-recommends caddy \
			|| { $$sudo apt-get update \
				&& $$sudo apt-get install -y --no-install-recommends caddy; }; \
	fi

# A prefix of its own (bun's install under .tools/ is left as it is); installed again when
# AXE_VERSION changes.
axe:
	@if [ "$$(node -p 'require("./$(AXE_DIR)/node_modules/axe-core/package.json").version' \
			2>/dev/null)" != "$(AXE_VERSION)" ]; then \
		npm install --prefix $(AXE_DIR) --no-audit --no-fund --ignore-scripts \
			--loglevel=error --save-exact axe-core@$(AXE_VERSION); \
	fi

# The database is created or migrated and the example templates whose names are unknown added
# on every start (both no-ops when nothing changed; what an admin uploaded stays); the first
# start also adds demo users.
db: install
	$(VENV)/bin/bpflow db upgrade
	$(VENV)/bin/bpflow import --new-only upload/workflow
	$(VENV)/bin/bpflow seed-demo

# Reflex sets up .web/ on its first start and then says to run `reflex run`, which is what
# make run is doing: it is set up here beforehand, its output shown only if it fails.
$(WEB_STAMP): $(INSTALL_STAMP) | $(BUN)
	@echo "setting up the Reflex frontend in .web/"
	@out=$$($(REFLEX_ENV) $(VENV)/bin/reflex init --no-agents --loglevel warning 2>&1) \
		|| { echo "$$out"; exit 1; }
	@touch $@

# The example templates call 127.0.0.1:9000, which the egress guard refuses unless allowed.
run: install bun db $(WEB_STAMP)
	@echo "$(REFLEX_RUN)"
	@BPFLOW_EGRESS_ALLOW="$${BPFLOW_EGRESS_ALLOW-127.0.0.1}" $(REFLEX_ENV) $(REFLEX_RUN)

# Scale-out on this machine (docs/operations.md#make-run-scaled): BACKENDS backend processes
# on PORT, WORKERS `bpflow worker`s (LEASE and POLL passed to them), each a program of
# supervisord, on the PostgreSQL of DATABASE_URL (default
# postgresql://postgres@127.0.0.1:5432/bpflow, created when missing) and the Redis of
# REFLEX_REDIS_URL (default redis://127.0.0.1:6379). The database is prepared as for run.
run-scaled: install bun $(WEB_STAMP)
	@$(REFLEX_ENV) $(PY) -m bpflow.scaled --backends $(BACKENDS) --workers $(WORKERS) \
		--port $(PORT) $(if $(LEASE),--lease $(LEASE)) $(if $(POLL),--poll $(POLL))

# TEST_WORKERS pytest-xdist workers (TEST_WORKERS=0: one process). The tests that start
# servers run as two chains, tests/browser/ in one worker and tests/scaled/ in another,
# each one after the other, while the others share the rest (tests/conftest.py). The 25 slowest tests are listed at the end.
# The suite must stay under 12 minutes on 2 cores (10 min 51 s on a fresh clone:
# bench/RESULTS.md, "The test suite").
test: install bun chromium fonts axe caddy
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=25

# Two soaks, one after the other: the crash test (20 kills of the server under load) and
# the paper flow in scale-out mode (bench/soak.py: 2 backends, 2 workers, a PostgreSQL
# database of its own, Redis) with a worker and the backends killed during it, which fails
# on any error (besides requests in flight at a kill), on a fault not recovered from or
# on a process whose memory grows more than 10 % after the first minute. The second needs PostgreSQL and Redis at their
# default addresses (DATABASE_URL is not its: it makes a database of its own on
# BENCH_PG_URL); SOAK_ARGS passes options to it (`bench/soak.py --help`).
soak: install
	BPFLOW_SOAK=1 $(PY) -m pytest -q tests/store/test_crash.py
	$(PY) bench/soak.py $(SOAK_ARGS)

# npm lighthouse under .tools/lighthouse (its own prefix: bun's stays as it is), for the bench
# only. Install scripts are not needed (Chromium is Debian's).
lighthouse: $(LIGHTHOUSE)

$(LIGHTHOUSE):
	npm install --prefix .tools/lighthouse --no-audit --no-fund --ignore-scripts \
		--loglevel=error lighthouse@$(LIGHTHOUSE_VERSION)

# The peers are pinned in the `bench` extra, installed here only: `make test` does not need
# them, nor Lighthouse. LIGHTHOUSE_ARGS passes options to bench/lighthouse.py.
bench: install bun chromium lighthouse
	$(UV) pip install --python $(PY) -e '.[dev,bench]' \
		|| $(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/peers.py $(BENCH_ARGS)
	$(REFLEX_ENV) $(PY) bench/lighthouse.py $(LIGHTHOUSE_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy engine bpflow

# The texts marked in $(MESSAGES_FROM) (babel.cfg: the web app's, and the messages of the
# services and the API) added to every catalog, those no longer in the code marked obsolete
# (#~); then translate the new entries of zh_CN. The .po files themselves are read
# (bpflow/catalogs.py): nothing is compiled. docs/languages.md.
LOCALES := bpflow_app/locale
MESSAGES_FROM := bpflow_app bpflow engine
messages: install
	@pot=$$(mktemp --suffix=.pot) && trap 'rm -f "$$pot"' EXIT && \
	$(VENV)/bin/pybabel -q extract -F babel.cfg --add-location=file --sort-by-file \
		--project=bpflow --copyright-holder=bpflow -o "$$pot" $(MESSAGES_FROM) && \
	$(VENV)/bin/pybabel -q update -i "$$pot" -d $(LOCALES) --no-fuzzy-matching

clean:
	rm -rf .web .states test-output

distclean: clean
	rm -rf $(VENV) .tools
