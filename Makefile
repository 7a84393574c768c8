# The two commands a user needs. Both create .venv and install what they need on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test browser bench bench-parse clean

run: $(VENV)/.runtime
	$(BIN)/gunicorn -c gunicorn.conf.py app:app

test: $(VENV)/.test browser
	$(BIN)/ruff check toolproxy tests app.py gunicorn.conf.py bench
	$(BIN)/mypy --strict toolproxy
	$(BIN)/pytest

bench: $(VENV)/.test
	$(BIN)/python bench/overhead.py

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

# The dashboard's tests drive Debian's Chromium (no browser download: this network allows none).
browser:
	@command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; }

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
