# Quick start: `make reproduce` (all tables/figures of the quick profile into results/) and `make test`.
# `make reproduce ARGS="--profile smoke"` writes results-smoke/ (git-ignored), never results/.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOCK := requirements-lock.txt

.PHONY: reproduce test install install-dev lock clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installs the exact versions CI ran with (requirements-lock.txt), then the package itself.
install: $(PY)
	$(PY) -m pip install --quiet -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .

install-dev: install

reproduce: install
	$(PY) scripts/run_all.py $(ARGS)

# Lint (ruff) and type-check (mypy; paths and settings in pyproject.toml) before the tests.
test: install-dev
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Regenerate the lock file: the newest versions pyproject.toml allows, resolved in a throwaway venv
# so nothing installed by hand leaks in (needs the package registry). With the data extra: xlrd reads
# credit_default's canonical download, which `make reproduce` may fetch.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet -e ".[dev,data]"
	.lock-venv/bin/pip freeze --exclude-editable | grep -v -e '^-e' -e '^dpprep' > $(LOCK)
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) build *.egg-info
