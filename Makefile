# Two commands for a person: `make run` (everything on one machine) and `make test`.
# The venv is (re)built only when a requirements file changes: the stamp file records it.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: venv run lint format test bench bench-scale clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

run: venv
	$(VENV)/bin/flask --app webapp dev

# Formatting, lint and types (configured in pyproject.toml), run first by `make test`: a CI run
# fails on them in seconds instead of after the suite.
lint: venv
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# What `lint` asks for, done: the formatter, then the linter's safe fixes (the rest is by hand).
format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Two processes: the tests that mostly wait on timers beside the rest (tests/conftest.py).
test: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

bench: venv
	$(VENV)/bin/python -m bench

# The knowledge base at a million chunks, and its search beside tantivy's in English and Chinese
# (bench.search_scale): kept apart from `make bench`, it takes hours. Sized to the machine with
# ARGS, e.g. `make bench-scale ARGS="--chunks 50000"` (python -m bench.knowledge_base --help).
bench-scale: venv
	$(VENV)/bin/python -m bench.knowledge_base $(ARGS)

clean:
	rm -rf $(VENV) instance
