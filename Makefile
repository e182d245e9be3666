# Quick start: `make reproduce` (all tables/figures of the quick profile into results/) and `make test`
# (CI, .ci/run: `make test`, then `make test-slow`).
# `make reproduce ARGS="--profile smoke"` writes results-smoke/ (git-ignored), never results/.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := requirements-lock.txt
DEV_LOCK := requirements-dev-lock.txt

.PHONY: reproduce lint test test-slow check docs install install-dev bench-env wheel lock clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installs the exact versions CI ran with (requirements-lock.txt: what the library and the
# experiments need), then the package itself; install-dev adds the test and lint tools and the
# framework adapters (requirements-dev-lock.txt), which `make reproduce` does not need.
# Each install leaves a stamp in the venv, so a target reinstalls only when a lock file or
# pyproject.toml changed (the package is installed editable: code edits need no reinstall).
install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed: $(LOCK) pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed $(DEV_LOCK)
	$(PY) -m pip install --quiet -r $(LOCK) -r $(DEV_LOCK)
	touch $@

# The optional benchmark environment (benchmarks/real_models.py's Opacus rows): both locks, dpprep
# and torch's CPU build with Opacus (benchmarks/requirements-opacus.txt), in a venv of its own: the
# project's locks do not carry torch. Run a benchmark there: .venv-bench/bin/python benchmarks/...
BENCH_VENV ?= .venv-bench
bench-env: $(BENCH_VENV)/.installed

$(BENCH_VENV)/.installed: $(LOCK) $(DEV_LOCK) pyproject.toml benchmarks/requirements-opacus.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet -r $(LOCK) -r $(DEV_LOCK)
	# torch in its own resolve: its sympy needs an older mpmath than the lock's (not dpprep's)
	$(BENCH_VENV)/bin/pip install --quiet -r benchmarks/requirements-opacus.txt
	$(BENCH_VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

reproduce: install
	$(PY) scripts/run_all.py $(ARGS)

# The documentation site into docs/_build/html (open its index.html); warnings are errors. The tests
# build it afresh too (tests/test_docs_site.py) and open its pages in headless Chromium.
docs: install-dev
	$(PY) -m sphinx -b html -W --keep-going -q docs docs/_build/html
	@echo "docs: open docs/_build/html/index.html"

# A wheel of dpprep and its experiments in dist/, for a machine without this checkout (Colab: upload
# it, and a notebook's first cell installs it).
wheel: | $(PY)
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .
	@ls dist/dpprep-*.whl

# Format check and lint (ruff: code at 100 columns; notebooks and the docs' examples at 88), type-check
# (mypy) and the package's import layers (import-linter's contracts); paths and settings in
# pyproject.toml. `$(PY) -m ruff format .` formats.
lint: install-dev
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

# The tests run in parallel (pytest-xdist: a worker per core, at most 4; a test file stays on one
# worker, so its fixtures and compilations are shared). `make test`: lint, then every test but the
# slow tier (marked `slow`: the smoke profile's end-to-end run and the tests reading it, the
# notebooks, the long audits and trainings); `make test-slow`: that tier alone; `make check`: lint
# and both tiers in one pytest (CI, .ci/run, runs make test, then make test-slow). PYTEST_ARGS adds pytest flags (`-n 0`: one process).
PYTEST := $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile

test: lint
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

test-slow: install-dev
	$(PYTEST) -m slow $(PYTEST_ARGS)

check: lint
	$(PYTEST) $(PYTEST_ARGS)

# Regenerate the lock file: the newest versions pyproject.toml allows, resolved in a throwaway venv
# so nothing installed by hand leaks in (needs the package registry). With the data extra: xlrd reads
# credit_default's canonical download, which `make reproduce` may fetch.
# The dev lock holds what the dev extra adds on top (the runtime resolved under the full set's pins).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet -e ".[dev,data]"
	.lock-venv/bin/pip freeze --exclude-editable | grep -v -e '^-e' -e '^dpprep' | sort > .lock-all.txt
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet -c .lock-all.txt -e ".[data]"
	.lock-venv/bin/pip freeze --exclude-editable | grep -v -e '^-e' -e '^dpprep' | sort > $(LOCK)
	comm -13 $(LOCK) .lock-all.txt > $(DEV_LOCK)
	rm -rf .lock-venv .lock-all.txt

clean:
	rm -rf $(VENV) build dist *.egg-info docs/_build
