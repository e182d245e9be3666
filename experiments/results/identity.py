"""What decides a computation, recorded with every result: the code's digest and the installed
stack.

A unit of work is keyed on its config and on the digest of the code that computes it
(:func:`experiment_digest`: the package ``dpprep/`` and the experiment's import closure, without
cost models, figures and report notes); every table row carries the provenance of the run that produced it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import platform
import time
from pathlib import Path
from typing import Any, Iterable

from dpprep import files
from dpprep.files import (
    atomic_write_bytes,  # noqa: F401 (re-exported)
)

# Every package a result can depend on: the engine, the accountants, the auditor's statistics
# (jax-privacy) and the Sepsis rebalancing (imbalanced-learn, scikit-learn).
_TRACKED_PACKAGES = (
    "dpprep",
    "jax",
    "jaxlib",
    "optax",
    "numpy",
    "scipy",
    "pandas",
    "dp-accounting",
    "jax-privacy",
    "imbalanced-learn",
    "scikit-learn",
)


@functools.lru_cache(maxsize=None)
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not-installed"
    return versions


# The code whose edits must invalidate cached units: the package and the experiments beside it.
_SOURCE_DIRS = ("dpprep", "experiments")


def tree_digest(root: Path | str, subdirs: Iterable[str] = _SOURCE_DIRS) -> str:
    """:func:`dpprep.files.tree_digest` of ``subdirs`` (default: the package and experiments)."""
    return files.tree_digest(root, subdirs)


@functools.lru_cache(maxsize=None)
def source_digest() -> str:
    """The digest of this checkout's ``dpprep/`` and ``experiments/`` sources (once per process)."""
    return tree_digest(Path(__file__).resolve().parents[2])


# The registry and runner (experiments/__init__.py and runner.py: which profile, where to write)
# are not part of any experiment's computation; every experiment imports them, so keying on them
# would tie them all again.
_RUNNER = {"experiments/__init__.py", "experiments/runner.py"}
# What never feeds a unit: an experiment's cost model (``cost.py``, read by ``--plan`` and
# ``--validate`` only) and its figures (``plots.py`` and the shared ``experiments/plotting.py``,
# drawn from finished units). Editing them leaves cached units valid; ``tests/experiments``
# checks that only the modules allowed to import them do.
NOT_KEYED = ("cost.py", "plots.py", "notes.py")
_PLOTTING = "experiments/plotting.py"


def _keyed(relpath: str) -> bool:
    return relpath != _PLOTTING and Path(relpath).name not in NOT_KEYED


def module_file(root: Path, module: str) -> str | None:
    """The file of the dotted ``experiments`` module ``module`` under ``root`` (``a/b.py`` or the
    package's ``a/b/__init__.py``), or None when there is none."""
    parts = module.split(".")
    if parts[0] != "experiments":
        return None
    for relpath in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if (root / relpath).is_file():
            return relpath
    return None


def _module_name(relpath: str) -> str:
    parts = Path(relpath).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_experiment_files(root: Path, relpath: str) -> set[str]:
    """The ``experiments`` files that ``relpath`` imports directly (absolute or relative, at any
    depth), with the ``__init__.py`` of every package on the way, as importing does."""
    import ast

    tree = ast.parse((root / relpath).read_text(), filename=relpath)
    package = _module_name(relpath)
    if not relpath.endswith("__init__.py"):
        package = package.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            names.add(base)
            # ``from experiments import results`` names a module too
            names.update(f"{base}.{alias.name}" for alias in node.names)
    found = set()
    for name in names:
        parts = name.split(".")
        for depth in range(2, len(parts) + 1):  # each package on the way is imported too
            file = module_file(root, ".".join(parts[:depth]))
            if file is not None:
                found.add(file)
    return found


def experiment_sources(module: str, root: Path | str | None = None) -> tuple[str, ...]:
    """The sources whose edits may change the units of the experiment ``module`` (dotted, e.g.
    ``"experiments.audit"``): the package ``dpprep/``, the experiment's module and every
    ``experiments`` module it imports, transitively, except the registry and runner
    (``experiments/__init__.py``, ``runner.py``) and what never feeds a unit (:data:`NOT_KEYED`:
    cost models, figures and report notes). Editing one experiment thus leaves the others' cached units valid,
    while an edit to the package or to a shared helper (``experiments.results``) invalidates
    every experiment that uses it."""
    root = Path(__file__).resolve().parents[2] if root is None else Path(root)
    start = module_file(root, module) if module.startswith("experiments.") else None
    if start is None:
        raise ValueError(f"no experiment module {module.replace('.', '/')} under {root}")
    seen, todo = {start}, [start]
    while todo:
        for dep in _imported_experiment_files(root, todo.pop()) - seen - _RUNNER:
            seen.add(dep)
            if _keyed(dep):
                todo.append(dep)
    return ("dpprep", *sorted(file for file in seen if _keyed(file)))


@functools.lru_cache(maxsize=None)
def experiment_digest(module: str) -> str:
    """:func:`tree_digest` of :func:`experiment_sources` (once per process): what ``run_all`` keys
    the units of the experiment module ``module`` on."""
    root = Path(__file__).resolve().parents[2]
    return tree_digest(root, experiment_sources(module, root))


def data_identity(dataset: Any) -> str:
    """What a unit computed from ``dataset`` (a :class:`dpprep.data.Dataset` from
    :func:`dpprep.data.load`, which verifies registered files by default) adds to its key, so that
    another input file recomputes it: ``""`` for a registered dataset (every file's sha256 is in
    :mod:`dpprep.data.registry`, which the code digest covers, and the loader checked it), else
    ``"@"`` and a digest of its files' contents (a user-supplied file, e.g.
    ``cifar100_features``: replacing it changes the key). Units that read no data file, and those
    of registered datasets, keep their keys."""
    from dpprep.data import download
    from dpprep.data.registry import DATASET_FILES

    if dataset.name in DATASET_FILES:
        return ""
    digest = hashlib.sha256()
    for path in dataset.files:
        digest.update(download.file_sha256(path).encode())
    return "@" + digest.hexdigest()[:16]


def code_identity(source: str | None = None) -> dict[str, Any]:
    """What decides a computation besides its config: our source (``source``, a digest; default
    the whole tree's :func:`source_digest`) and the installed stack."""
    return {"source": source_digest() if source is None else source, "versions": package_versions()}


def provenance(source: str | None = None, seconds: float | None = None) -> dict[str, Any]:
    """:func:`code_identity` plus the time (UTC), for a record computed now, and how long its
    computation took (``seconds``, when known: what ``run_all --plan`` reads as measured cost)."""
    record = code_identity(source) | {
        "computed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    }
    return record if seconds is None else record | {"seconds": round(float(seconds), 3)}


# When and how long: recorded in the unit file, left out of the rows (a regenerated table stays
# byte-identical when nothing changed).
_WHEN = ("computed", "seconds")


def provenance_json(record: dict[str, Any] | None = None) -> str:
    """The code that produced a row, as compact JSON for a ``versions`` column: ``record``'s (e.g.
    a cached unit's, from :meth:`UnitStore.provenance`), else this code's. The time a unit was
    computed stays in its unit file, so regenerated tables are byte-identical when nothing changed.
    """
    identity = (
        code_identity() if record is None else {k: v for k, v in record.items() if k not in _WHEN}
    )
    return json.dumps(identity, sort_keys=True, separators=(",", ":"))


def config_json(config: Any) -> str:
    """A frozen-dataclass (or dict) config as compact, sorted JSON, for a ``config`` column."""
    if dataclasses.is_dataclass(config):
        config = dataclasses.asdict(config)
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
