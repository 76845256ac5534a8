# The two commands of the quick start: `make demo` and `make test`.
# Each creates .venv on first use and installs what it needs into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ghost needs Python 3.11 or newer: set PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/ghost demo --out runs/demo.mcap

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy src

test: lint
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-test
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) runs .mypy_cache .pytest_cache .ruff_cache .hypothesis
