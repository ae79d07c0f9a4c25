# Two entry points on a fresh machine: `make demo` (the main job on embedded defaults)
# and `make test` (the test suite, with the PostgreSQL service the store tests use).
PY ?= python3
VENV := .venv

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q "torch==2.13.0"
	$(VENV)/bin/pip install -q -e ".[test]"
	touch $@

.PHONY: install demo test lint docs
install: $(VENV)/.installed

demo: install
	$(VENV)/bin/kiln optimize row_softmax

test: install
	bash -c 'set -e; if [ -x .ci/services ]; then . .ci/services; fi; $(VENV)/bin/python -m pytest -q'

# The documentation site, strict: a broken link, a missing page or a generated page out of step fails it.
docs: install
	$(VENV)/bin/python scripts/docs_pages.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict  # not -q: it hides the warnings strict mode fails on

# ruff (lint and format) over the tree, mypy over the package (strict on guard, memory, store, isolation).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
