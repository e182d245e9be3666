"""The lock files: `make reproduce` installs only what the library and the experiments need
(requirements-lock.txt), `make test` adds the test and lint tools (requirements-dev-lock.txt)."""

from __future__ import annotations

import re
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
    assert re.search(r"^install:.*\n(\t.*\n)*\t.*-r \$\(LOCK\)\n", makefile, re.M)
    assert re.search(r"^install-dev: install\n\t.*-r \$\(DEV_LOCK\)", makefile, re.M)
