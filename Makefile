# The two commands of the quick start: `make demo` and `make test`.
# Each creates .venv on first use and installs what it needs into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint docs bench mutation clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ghost needs Python 3.11 or newer: set PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	@touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/ghost demo --out runs/demo.mcap

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests bench examples tools
	$(BIN)/ruff format --check src tests bench examples tools
	$(BIN)/mypy src tools

test: lint
	$(BIN)/python -m pytest

# The documentation site (ADR 0029), built in strict mode: a warning is an error.
# The CLI reference is generated from argparse first; make test checks it is current.
docs: $(VENV)/.installed-test
	$(BIN)/python -m tools.cli_reference --write docs/cli.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,dev,bench]'
	@touch $@ $(VENV)/.installed $(VENV)/.installed-test

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench.run

$(VENV)/.installed-mutation: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,dev,mutation]'
	@touch $@ $(VENV)/.installed $(VENV)/.installed-test

# Mutation testing of the contract-critical modules (ADR 0014; results in docs/mutation.md).
# Not part of `make test`: a full run takes more than an hour on two cores.
# Quicker looks: make mutation MUTATION_ARGS="--module _glob" or MUTATION_ARGS="--sample 40".
MUTATION_JOBS ?= 2
mutation: $(VENV)/.installed-mutation
	$(BIN)/python -m tools.mutation --jobs $(MUTATION_JOBS) --fail-under 90 --require-reasons $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) runs site .mypy_cache .pytest_cache .ruff_cache .hypothesis
