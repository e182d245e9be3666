"""Writing results: atomic files, provenance, resumable units of work and paper comparisons.

Every experiment writes through these helpers so that (i) an interrupted run never leaves a
half-written file, (ii) a re-run skips units of work already finished, and (iii) every result row
records the seed, config and package versions that produced it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

_TRACKED_PACKAGES = ("dpprep", "jax", "jaxlib", "optax", "numpy", "scipy", "pandas", "dp-accounting")


@functools.lru_cache(maxsize=None)
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not-installed"
    return versions


def provenance_json() -> str:
    """Package versions as a compact JSON string, for a ``versions`` column of a results table."""
    return json.dumps(package_versions(), sort_keys=True, separators=(",", ":"))


def config_json(config: Any) -> str:
    """A frozen-dataclass (or dict) config as compact, sorted JSON, for a ``config`` column."""
    if dataclasses.is_dataclass(config):
        config = dataclasses.asdict(config)
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Writes ``data`` to ``path`` via a temporary file and ``os.replace`` (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_csv(frame: pd.DataFrame, path: Path | str) -> None:
    atomic_write_text(path, frame.to_csv(index=False))


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> None:
    """Saves a matplotlib figure atomically (PNG by the path's suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        fig.savefig(tmp, **({"dpi": 130, "bbox_inches": "tight"} | kwargs))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _unit_filename(key: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", key)[:80]
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    return f"{slug}-{digest}.json"


class UnitStore:
    """Resumable units of work: ``store.run(key, fn)`` computes ``fn()`` once and remembers it.

    Records are JSON dicts kept under ``directory`` (one file per unit, written atomically), so a
    killed run resumes where it stopped; ``fresh=True`` ignores (and overwrites) what exists.
    """

    def __init__(self, directory: Path | str, *, fresh: bool = False):
        self.directory = Path(directory)
        self.fresh = fresh

    def _path(self, key: str) -> Path:
        return self.directory / _unit_filename(key)

    def load(self, key: str) -> dict | None:
        path = self._path(key)
        if self.fresh or not path.exists():
            return None
        record = json.loads(path.read_text())
        return record["value"] if record.get("key") == key else None

    def save(self, key: str, value: dict) -> None:
        atomic_write_text(self._path(key), json.dumps({"key": key, "value": value}, default=float))

    def run(self, key: str, compute: Callable[[], dict]) -> dict:
        cached = self.load(key)
        if cached is not None:
            return cached
        value = compute()
        self.save(key, value)
        return value

    def run_many(self, items: Iterable[tuple[str, Callable[[], dict]]]) -> list[dict]:
        """``[self.run(key, compute) for key, compute in items]``, in order (the interface
        :func:`dpprep.sweeps.run_groups` drives)."""
        return [self.run(key, compute) for key, compute in items]


class Progress:
    """Line-oriented progress on stderr (works in CI logs and notebooks alike)."""

    def __init__(self, prefix: str, *, stream=None, quiet: bool = False):
        self.prefix = prefix
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self._start = time.perf_counter()

    def __call__(self, message: str) -> None:
        if not self.quiet:
            elapsed = time.perf_counter() - self._start
            print(f"[{self.prefix} {elapsed:7.1f}s] {message}", file=self.stream, flush=True)

    def track(self, items: Iterable[Any], label: str) -> Iterable[Any]:
        items = list(items)
        for i, item in enumerate(items, 1):
            self(f"{label} {i}/{len(items)}: {item}")
            yield item


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One paper (or spec) number next to ours, for REPORT.md.

    ``status`` is "pass" or "miss" for a number with a tolerance, "info" for a reported value with
    no target (e.g. a quantity the paper does not state).
    """

    quantity: str
    paper: str
    measured: str
    tolerance: str
    status: str
    note: str = ""

    @classmethod
    def numeric(
        cls,
        quantity: str,
        paper: float,
        measured: float,
        *,
        rel_tol: float | None = None,
        abs_tol: float | None = None,
        note: str = "",
        digits: int = 6,
    ) -> "Comparison":
        if rel_tol is None and abs_tol is None:
            raise ValueError("give rel_tol and/or abs_tol")
        ok = math.isfinite(measured) and math.isclose(
            measured, paper, rel_tol=rel_tol or 0.0, abs_tol=abs_tol or 0.0
        )
        tol = " or ".join(
            t for t in (f"rel {rel_tol:g}" if rel_tol else "", f"abs {abs_tol:g}" if abs_tol else "") if t
        )
        return cls(quantity, f"{paper:.{digits}g}", f"{measured:.{digits}g}", tol, "pass" if ok else "miss", note)

    @classmethod
    def claim(cls, quantity: str, paper: str, measured: str, holds: bool, note: str = "") -> "Comparison":
        """A qualitative claim (e.g. an ordering) that our run either confirms or not."""
        return cls(quantity, paper, measured, "qualitative", "pass" if holds else "miss", note)

    @classmethod
    def info(cls, quantity: str, measured: str, note: str = "", paper: str = "—") -> "Comparison":
        return cls(quantity, paper, measured, "—", "info", note)


def comparisons_frame(comparisons: Iterable[Comparison]) -> pd.DataFrame:
    rows = [dataclasses.asdict(c) for c in comparisons]
    columns = [f.name for f in dataclasses.fields(Comparison)]
    return pd.DataFrame(rows, columns=columns)
