# Quick start: `make reproduce` (all tables/figures into results/) and `make test`.
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

test: install-dev
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Regenerate the lock file from pyproject.toml's lower bounds (run on a machine with the registry).
lock: $(PY)
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip freeze --exclude-editable | grep -v '^-e' > $(LOCK)

clean:
	rm -rf $(VENV) build *.egg-info
