# Taskfinder: the two commands of the README.
#   make run    set up, migrate the embedded SQLite database, load the demo catalog, serve on localhost
#   make test   set up (with the local LLM) and run the whole test suite (3 worker processes)
#   make serve-prod   production serving: migrate, then gunicorn with WEB_CONCURRENCY workers
#                     (ops/gunicorn.conf.py) and Prometheus metrics aggregated over the workers.
#                     Admin sessions: SECRET_KEY, or else ONE key for every worker, generated once
#                     in TASKFINDER_DATA_DIR/secret_key (mode 0600) by the gunicorn master; never a
#                     random key per worker. Several hosts: set SECRET_KEY (docs/security.md).
# The interpreter the virtualenv is made from (a new .venv only; `make clean` drops an old one):
# Debian's CPython 3.11 where its venv module is installed (package python3.11-venv), else
# python3. Debian builds it with profile-guided and link-time optimisation; the python3 our
# machines put first on PATH (pyenv's 3.11.7) is built without either. On the AMD EPYC Zen 4 VM,
# `make test` by turns in one worktree: 326 s and 331 s (user 526 and 533 s) with pyenv's, 293 s and
# 299 s (user 459 and 470 s) with Debian's; architecture.md's fixed loop 1.66-1.81 against 1.26-1.36 CPU s
# (docs/architecture.md, "The interpreter"). Override with PYTHON=...
DEBIAN_PYTHON := /usr/bin/python3.11
PYTHON ?= $(shell $(DEBIAN_PYTHON) -c 'import sys, ensurepip, venv; sys.exit(sys.version_info[:2] != (3, 11))' \
	    2>/dev/null && echo $(DEBIAN_PYTHON) || echo python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip -q --disable-pip-version-check
# Packages install through uv (PyPI's pip-compatible installer, pinned below) where it installs,
# else through pip: `make setup-dev llm` from a fresh clone took 50.7 s with pip and 19.1 s with
# uv (its own install and the bytecode compilation included), both with empty caches
# (docs/architecture.md, "Set-up"). Bytecode is compiled at install as pip does: this project's
# machines set PYTHONDONTWRITEBYTECODE, so a library left without .pyc files would be compiled
# again in every process that imports it.
UV_VERSION := 0.13.9
UV     := $(VENV)/bin/uv
install = { [ -x $(UV) ] && UV_LINK_MODE=copy $(UV) pip install -q --compile-bytecode --python $(PY) -r $(1); } || \
	  $(PIP) install -r $(1)

# prometheus_client's multiprocess directory (wiped at each start); override to move it.
PROMETHEUS_MULTIPROC_DIR ?= $(CURDIR)/instance/prometheus-multiproc

.PHONY: run serve-prod test setup setup-dev llm browser axe serve-llm clean

run: setup
	$(PY) app.py load-demo
	DEMO_ROLE_SWITCHER=$${DEMO_ROLE_SWITCHER:-1} OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-1} $(PY) app.py serve

serve-prod: setup
	$(PY) app.py db upgrade
	PROMETHEUS_MULTIPROC_DIR=$(PROMETHEUS_MULTIPROC_DIR) $(VENV)/bin/gunicorn -c ops/gunicorn.conf.py

# The suite runs on PYTEST_WORKERS processes (pytest-xdist; 1: in this process, e.g. for pdb): three on
# our two cores, one of them running the browser tests, which mostly wait (tests/conftest.py, BROWSER_GROUP).
# It writes bytecode though our machines set PYTHONDONTWRITEBYTECODE: every worker collects the
# whole suite (pytest rewrites the 137 test modules' asserts) and ~45 processes the tests start
# (servers, gunicorn workers, the command line) import the project's modules; otherwise each did
# both from source. The first process writes the .pyc files (ignored by git), the rest read them:
# one process's collection 9.5 s -> 4.0 s; the suite 321 s -> 307 s from a tree without them and
# 287 s with them (docs/architecture.md, "Three workers, the browser tests on one of them").
PYTEST_WORKERS ?= 3

test: setup-dev llm browser axe
	@t0=$$(date +%s); PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q $(if $(filter 1,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup) $(PYTEST_ARGS); \
	  rc=$$?; echo "make test: the suite took $$(( $$(date +%s) - t0 )) s"; exit $$rc

setup: $(VENV)/.runtime

setup-dev: $(VENV)/.dev

llm: $(VENV)/.llm

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install uv==$(UV_VERSION) || echo "note: uv did not install; installing with pip"

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	$(call install,requirements.txt)
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(call install,requirements-dev.txt)
	touch $@

$(VENV)/.llm: requirements-llm.txt $(VENV)/.runtime
	$(call install,requirements-llm.txt)
	touch $@

# Browser tests drive Debian's Chromium headless shell (never a downloaded browser; a plain
# chromium serves too: tests/browser/conftest.py); promtool (Debian's prometheus package) checks
# the alert rules. Installed here when missing and we may (root); otherwise the tests that need
# them say so and skip.
browser:
	@command -v chromium-headless-shell >/dev/null && command -v promtool >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && { apt-get install -y -q chromium-headless-shell prometheus >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q chromium-headless-shell prometheus >/dev/null; }; } || \
	    echo "note: install Debian's chromium-headless-shell and prometheus packages to run the browser and promtool tests"; }

# axe-core (npm registry, pinned; not vendored) for the widget's accessibility test; without npm
# that one check skips (tests/browser/test_widget.py).
AXE_VERSION := 4.14.1
axe:
	@[ -f .axe/node_modules/axe-core/axe.min.js ] || { command -v npm >/dev/null && \
	  npm install -q --no-save --no-audit --no-fund --prefix .axe axe-core@$(AXE_VERSION) >/dev/null 2>&1; } || \
	  echo "note: install npm to run the widget's axe-core accessibility check"

serve-llm: llm
	$(PY) app.py llm serve

clean:
	rm -rf $(VENV) instance .pytest_cache
