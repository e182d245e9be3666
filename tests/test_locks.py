"""The lock files: `make reproduce` installs only what the library and the experiments need
(requirements-lock.txt), `make test` adds the test and lint tools (requirements-dev-lock.txt)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (REPO / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            package, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", package).lower()] = version
    return pins


def _names(requirements: list[str]) -> set[str]:
    return {
        re.sub(r"[-_.]+", "-", re.split(r"[<>=\[; ]", r, maxsplit=1)[0]).lower()
        for r in requirements
    }


def test_runtime_and_dev_locks_split_what_each_target_needs():
    runtime, dev = _pins("requirements-lock.txt"), _pins("requirements-dev-lock.txt")
    assert not set(runtime) & set(dev), "a package pinned in both locks"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert _names(project["dependencies"]) | _names(extras["data"]) <= set(runtime)
    assert _names(extras["dev"]) <= set(dev)
    # The issue: `make reproduce` installed pytest, hypothesis and ipykernel.
    assert not {"pytest", "hypothesis", "ipykernel", "ruff", "mypy"} & set(runtime)
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^install: \$\(VENV\)/\.installed$", makefile, re.M)
    assert re.search(r"^\$\(VENV\)/\.installed:.*\n(\t.*\n)*\t.*-r \$\(LOCK\)\n", makefile, re.M)
    assert re.search(r"^\$\(VENV\)/\.installed-dev:.*\n\t.*-r \$\(DEV_LOCK\)", makefile, re.M)


def _make_dry_run(workdir: Path, target: str) -> list[str]:
    out = subprocess.run(
        ["make", "-n", target, "VENV=venv"], cwd=workdir, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_make_targets_reinstall_only_when_a_lock_or_pyproject_changed(tmp_path):
    shutil.copy(REPO / "Makefile", tmp_path)
    for name in ("requirements-lock.txt", "requirements-dev-lock.txt", "pyproject.toml"):
        (tmp_path / name).write_text("")
    fresh = _make_dry_run(tmp_path, "install-dev")
    assert sum("pip install" in line for line in fresh) == 4  # pip itself, lock, package, dev
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    for name in ("bin/python", ".installed", ".installed-dev"):
        (tmp_path / "venv" / name).touch()
    assert not any("pip" in line for line in _make_dry_run(tmp_path, "install-dev"))
    future = time.time() + 10
    os.utime(tmp_path / "requirements-dev-lock.txt", (future, future))
    assert sum("pip install" in line for line in _make_dry_run(tmp_path, "install-dev")) == 1
    os.utime(tmp_path / "pyproject.toml", (future + 10, future + 10))
    assert sum("pip install" in line for line in _make_dry_run(tmp_path, "install-dev")) == 3
