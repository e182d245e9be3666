"""Writing results: atomic files, provenance, resumable units of work and paper comparisons.

Every experiment writes through these helpers so that (i) an interrupted run never leaves a
half-written file, (ii) a re-run skips units of work already finished by the same code, and (iii)
every result row records the seed, config and provenance (source digest, package versions, time)
of the computation that produced it.
"""

from __future__ import annotations

import contextlib
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
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import jax
import numpy as np
import pandas as pd

from dpprep import files, sweeps
from dpprep.models import Array, Params
from dpprep.files import (
    atomic_write_bytes,  # noqa: F401 (re-exported)
    atomic_write_text,
    umask_mode,
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
    return tree_digest(Path(__file__).resolve().parents[1])


# The runner (experiments/__init__.py: which profile, where to write) is not part of any
# experiment's computation; every experiment imports it, so keying on it would tie them all again.
_RUNNER = "experiments/__init__.py"
# What never feeds a unit: an experiment's cost model (``cost.py``, read by ``--plan`` and
# ``--validate`` only) and its figures (``plots.py`` and the shared ``experiments/plotting.py``,
# drawn from finished units). Editing them leaves cached units valid; ``tests/experiments``
# checks that only the modules allowed to import them do.
NOT_KEYED = ("cost.py", "plots.py")
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
    ``experiments`` module it imports, transitively, except the runner ``experiments/__init__.py``
    and what never feeds a unit (:data:`NOT_KEYED`: cost models and figures). Editing one
    experiment thus leaves the others' cached units valid, while an edit to the package or to a
    shared helper (``results.py``) invalidates every experiment that uses it."""
    root = Path(__file__).resolve().parents[1] if root is None else Path(root)
    start = module_file(root, module) if module.startswith("experiments.") else None
    if start is None:
        raise ValueError(f"no experiment module {module.replace('.', '/')} under {root}")
    seen, todo = {start}, [start]
    while todo:
        for dep in _imported_experiment_files(root, todo.pop()) - seen - {_RUNNER}:
            seen.add(dep)
            if _keyed(dep):
                todo.append(dep)
    return ("dpprep", *sorted(file for file in seen if _keyed(file)))


@functools.lru_cache(maxsize=None)
def experiment_digest(module: str) -> str:
    """:func:`tree_digest` of :func:`experiment_sources` (once per process): what ``run_all`` keys
    the units of the experiment module ``module`` on."""
    root = Path(__file__).resolve().parents[1]
    return tree_digest(root, experiment_sources(module, root))


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
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _unit_filename(key: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", key)[:80]
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    return f"{slug}-{digest}.json"


def _canonical(payload: dict) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=float)


def _checksum(payload: dict) -> str:
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


class CorruptUnit(ValueError):
    """A unit file that is not a record this module wrote (truncated, binary or edited)."""


def read_unit(path: Path | str) -> dict:
    """A unit file's record ``{"key", "provenance", "value"}``, its checksum verified."""
    path = Path(path)
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
        checksum = record.pop("checksum")
        ok = set(record) == {"key", "provenance", "value"} and checksum == _checksum(record)
    # UnicodeDecodeError is a ValueError; OSError: a directory (or unreadable file) in its place
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as err:
        raise CorruptUnit(f"unit file {path} is unreadable ({type(err).__name__}: {err})") from err
    if not ok:
        raise CorruptUnit(f"unit file {path} fails its checksum (edited or damaged)")
    return record


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` (1-based, 1 ≤ K ≤ N) as ``(K, N)``."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise ValueError(f"shard must look like K/N (e.g. 2/8), got {text!r}")
    k, n = int(match[1]), int(match[2])
    if not 1 <= k <= n:
        raise ValueError(f"shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


class UnitsElsewhere(RuntimeError):
    """Shard mode: this shard's units are done, the rest of a grid belongs to other shards."""

    def __init__(self, pending: dict[int, int], shard: tuple[int, int]):
        self.pending, self.shard = dict(sorted(pending.items())), shard
        where = ", ".join(f"{count} in shard {k}/{shard[1]}" for k, count in self.pending.items())
        super().__init__(f"{sum(pending.values())} unit(s) left to other shards ({where})")


class MissingUnits(RuntimeError):
    """Merge mode: grid units that no shard delivered (or only from other code)."""


class UnitStore:
    """Resumable units of work: ``store.run(key, fn)`` computes ``fn()`` once and remembers it.

    Records are JSON files under ``directory`` (one per unit, written atomically), so a killed run
    resumes where it stopped. A record holds its key, value, provenance (source digest, package
    versions, time computed) and a checksum; it is reused only by the same code (same source digest
    and versions), so an edit to the code or an upgrade recomputes it. ``source`` is the digest the
    units are keyed on: ``run_all`` passes :func:`experiment_digest` (the package and the
    experiment's own modules), the default is the whole tree's :func:`source_digest`. A
    damaged or edited file is named in a warning and recomputed. ``fresh=True`` ignores what exists.

    Grids go through :meth:`run_many`, which is what ``run_all --shard K/N`` spreads over machines:
    with ``shard=(K, N)`` it computes only its slice and raises :class:`UnitsElsewhere` when other
    slices are missing; with ``merge=N`` (assembling N shards) it computes none of them and raises
    :class:`MissingUnits` naming each missing key and its shard.
    :meth:`run` always computes (meant for cheap analytic units every shard can redo).
    Every unit computed or loaded is reported to ``progress`` (a :class:`Progress`), if given.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        fresh: bool = False,
        shard: tuple[int, int] | None = None,
        merge: int | None = None,
        progress: "Progress | None" = None,
        source: str | None = None,
    ):
        if shard is not None:
            k, n = shard
            if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
                raise ValueError(f"shard must be (K, N) with 1 <= K <= N, got {shard!r}")
            if merge is not None:
                raise ValueError(
                    "shard and merge exclude each other: merge assembles every shard's units"
                )
        if merge is not None and not (isinstance(merge, int) and merge >= 1):
            raise ValueError(f"merge must be the number of shards (>= 1), got {merge!r}")
        self.directory = Path(directory)
        self.fresh = fresh
        self.shard = shard
        self.merge = merge
        self.progress = progress
        self.source = source  # the code digest units are keyed on (None: the whole tree's)
        self._provenance: dict[str, dict] = {}

    def _path(self, key: str) -> Path:
        return self.directory / _unit_filename(key)

    def load(self, key: str) -> dict | None:
        """The value of a unit finished by this code, or None (absent, stale or damaged)."""
        path = self._path(key)
        # nothing this module writes: move it aside, or the unit could never be saved
        if path.is_dir():
            aside = path.with_name(f"{path.name}.not-a-unit-{os.getpid()}-{time.time_ns()}")
            path.rename(aside)
            warnings.warn(
                f"unit file {path} is a directory, not a unit; moved it to {aside.name} and"
                " recomputing the unit",
                stacklevel=2,
            )
            return None
        if self.fresh or not path.exists():
            return None
        try:
            record = read_unit(path)
        except CorruptUnit as err:
            warnings.warn(f"{err}; recomputing it", stacklevel=2)
            return None
        if record["key"] != key or not _same_code(record["provenance"], self.source):
            return None
        self._provenance[key] = record["provenance"]
        return record["value"]

    def save(self, key: str, value: dict, seconds: float | None = None) -> dict:
        """Records ``value`` as computed now by this code (in ``seconds``, when given); returns it
        as a reload would (JSON types)."""
        # Key order is kept (tables built from values keep their column order); the checksum is
        # over the canonical (sorted) form, so it does not depend on it.
        payload = json.loads(
            json.dumps(
                {"key": key, "provenance": provenance(self.source, seconds), "value": value},
                separators=(",", ":"),
                default=float,
            )
        )
        atomic_write_text(self._path(key), json.dumps(payload | {"checksum": _checksum(payload)}))
        self._provenance[key] = payload["provenance"]
        return payload["value"]

    def provenance(self, key: str) -> dict:
        """Provenance of a unit this store ran or loaded: when and by which code it was computed."""
        if key not in self._provenance:
            raise KeyError(f"unit {key!r} was not run or loaded by this store")
        return self._provenance[key]

    def run(self, key: str, compute: Callable[[], dict]) -> dict:
        cached = self.load(key)
        if cached is not None:
            self._report(True, 0.0)
            return cached
        start = time.perf_counter()
        computed = compute()
        seconds = time.perf_counter() - start
        # The JSON round trip makes a first run and a resumed one return identical values.
        value = self.save(key, computed, seconds)
        self._report(False, seconds)
        return value

    def _report(self, cached: bool, seconds: float) -> None:
        if self.progress is not None:
            self.progress.unit(cached=cached, seconds=seconds)

    def _run_step(
        self,
        key: str,
        compute: Callable[[], dict],
        keys: Sequence[str],
        index: int,
        outer: bool,
        costs: Sequence[float] | None = None,
    ) -> dict:
        """:meth:`run` as step ``index`` of the grid ``keys`` (a step of the bar when ``outer``;
        ``costs``: the keys' costs, for the estimate)."""
        before = self.progress.computed if outer else 0
        start = time.perf_counter()
        value = self.run(key, compute)
        if outer:
            # For the estimate: the rest of the grid that has no unit file yet (fresh: all of it),
            # in order.
            later = range(index + 1, len(keys))
            rest = lambda: [  # noqa: E731
                1.0 if costs is None else costs[j]
                for j in later
                if self.fresh or not self._path(keys[j]).exists()
            ]
            self.progress.step(
                computed=self.progress.computed > before,
                seconds=time.perf_counter() - start,
                remaining=rest,
                cost=None if costs is None else costs[index],
            )
        return value

    def shard_of(self, keys: Sequence[str], n: int) -> dict[str, int]:
        """Each key's shard (1-based) of ``n``: round robin over the keys sorted by digest, so the
        split is balanced within one unit and depends on the set of keys only (not their order)."""
        ranked = sorted(keys, key=lambda k: hashlib.sha256(k.encode()).hexdigest())
        return {k: i % n + 1 for i, k in enumerate(ranked)}

    def run_many(
        self,
        items: Sequence[tuple[str, Callable[[], dict]]],
        *,
        costs: Sequence[float] | None = None,
    ) -> list[dict]:
        """``[run(key, compute) for key, compute in items]``, spread over shards in shard mode.
        ``costs``: each item's relative cost (e.g. its size), which the progress ETA weights by.

        In shard mode every shard reaches the same call with the same keys; it computes (or loads)
        its own slice first, then raises :class:`UnitsElsewhere` if units of other slices are not in
        ``directory`` yet. An experiment should therefore submit a grid in one call: a later
        ``run_many`` is not reached while an earlier one has units pending elsewhere.
        """
        keys = [key for key, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError("items must have distinct keys")
        with contextlib.ExitStack() as stack:
            outer = self.progress is not None and stack.enter_context(
                self.progress.grid(len(items), costs=costs)
            )
            if self.shard is None and self.merge is None:
                return [
                    self._run_step(key, compute, keys, i, outer, costs)
                    for i, (key, compute) in enumerate(items)
                ]
            n = self.shard[1] if self.shard else self.merge
            owner = self.shard_of(keys, n)
            values: dict[str, dict] = {}
            mine = [
                (key, compute)
                for key, compute in items
                if self.shard is not None and owner[key] == self.shard[0]
            ]
            mine_keys = [key for key, _ in mine]
            cost_of = dict(zip(keys, costs)) if costs is not None else None
            mine_costs = None if cost_of is None else [cost_of[key] for key in mine_keys]
            for i, (key, compute) in enumerate(mine):
                values[key] = self._run_step(key, compute, mine_keys, i, outer, mine_costs)
            missing = []
            for key in keys:
                if key not in values:
                    cached = self.load(key)
                    if cached is None:
                        missing.append(key)
                    else:
                        values[key] = cached
                        self._report(True, 0.0)
                        if outer:
                            self.progress.step(computed=False, seconds=0.0)
        if missing and self.shard is not None:
            pending: dict[int, int] = {}
            for key in missing:
                pending[owner[key]] = pending.get(owner[key], 0) + 1
            raise UnitsElsewhere(pending, self.shard)
        if missing:
            listed = ", ".join(f"{k!r} (shard {owner[k]}/{n})" for k in missing[:5])
            raise MissingUnits(
                f"{len(missing)} of {len(keys)} grid unit(s) missing from {self.directory} (not"
                f" delivered by their shard, or computed by other code): {listed}"
                + (" ..." if len(missing) > 5 else "")
            )
        return [values[key] for key in keys]


def _same_code(record_provenance: dict, source: str | None = None) -> bool:
    identity = code_identity(source)
    return all(record_provenance.get(field) == value for field, value in identity.items())


def _duration(seconds: float) -> str:
    """``45 s``, ``3.2 min`` or ``1.5 h``: a readable length of time."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _notebook_widgets() -> bool:
    """In a Jupyter kernel that can draw tqdm's widget bar (ipywidgets installed)."""
    import importlib.util

    return "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is not None


@dataclasses.dataclass
class _Grid:
    """The outermost grid (or loop) now running, as its time-left estimate sees it."""

    label: str  # what one step is ("unit", or a loop's label)
    steps: int
    # each step's cost as the experiment states it (its size); None: assumed equal
    costs: list[float] | None
    started: float  # when the running step started
    next_cost: float  # cost of the step running now (the first still to compute)
    left: float  # cost of the steps still to compute, the running one included
    left_steps: int  # how many steps that is
    seconds: float = 0.0  # time the computed steps took ...
    cost: float = 0.0  # ... and their cost: seconds / cost is the measured rate
    computed: int = 0  # computed (not loaded) steps so far

    def mean_cost(self) -> float:
        return 1.0 if self.costs is None else sum(self.costs) / max(len(self.costs), 1)


class Progress:
    """Progress of one experiment: a bar with units done/total, elapsed time and ETA (tqdm) on a
    terminal or in Jupyter (with ipywidgets); elsewhere (CI logs, pipes, pytest capture, kernels
    without widgets) a plain line at most every ``interval`` seconds, never a carriage return.

    The bar counts steps: each item of the outermost :meth:`track` loop or ``UnitStore.run_many``
    grid, and each ``UnitStore.run`` outside of them (the total then grows as they come); loops
    nested in a step do not move it. The store reports every unit it computes or loads
    (:meth:`unit`), hence the computed/cached counts; sweep engines report their chunks through
    :meth:`chunk`.

    The ETA is the running grid's: the time its computed steps took per unit of cost, times the cost
    of its steps still to compute (loaded units cost nothing). A step's cost is its size when the
    experiment states one (``costs=``: e.g. seeds × points × steps × batch size for a sweep group);
    otherwise the steps are assumed to cost the same, and the estimate says so. Before the first
    step
    of a grid is done, the running step's chunks (from its second; the first also compiles) give it.
    Every estimate line carries one ETA and its basis. Once per grid, when a first estimate exceeds
    ``long_after`` seconds, one line says so ("N of M units left ≈ T (from ...)").
    Messages (``progress("...")``) are details, shown only when ``verbose``; :meth:`note` lines
    always are. ``quiet`` shows nothing (the counts are kept). ``clock`` (seconds) is for tests.
    """

    def __init__(
        self,
        prefix: str,
        *,
        stream=None,
        quiet: bool = False,
        verbose: bool = True,
        label: str | None = None,
        interval: float = 30.0,
        long_after: float = 30.0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.prefix = prefix
        self.label = label or prefix
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.verbose = verbose
        self.interval = interval
        self.long_after = long_after
        self.clock = clock
        self.computed = 0  # units computed now
        self.cached = 0  # units loaded from earlier runs
        self.total = 0  # steps the bar expects (grows with each grid, loop or lone unit)
        self.done = 0
        self._level = 0  # nesting depth of grids and loops: only the outermost moves the bar
        self._grid: _Grid | None = None  # the outermost grid now running (None between grids)
        self._forecast = (
            False  # the running grid's (or lone sweep's) estimate line is printed (or not needed)
        )
        # The running step's sweep: chunks done, total, when the latest and the first finished.
        self._chunk: tuple[int, int, float, float | None] | None = None
        self._mode = (
            "off"
            if quiet
            else (
                "notebook"
                if _notebook_widgets() and self.stream is sys.stderr
                else "bar"
                if _isatty(self.stream)
                else "lines"
            )
        )
        self._bar = None
        self._chunk_started = self._start = self._last_line = self.clock()

    # -- lines -------------------------------------------------------------------------------------
    def _print(self, message: str) -> None:
        if self._mode == "off":
            return
        line = f"[{self.prefix} {self.clock() - self._start:7.1f}s] {message}"
        if self._bar is not None:
            self._bar.write(line, file=self.stream)  # above the bar, which is redrawn below
        else:
            print(line, file=self.stream, flush=True)

    def __call__(self, message: str) -> None:
        """A detail line (which unit, which group): shown only when ``verbose``."""
        if self.verbose:
            self._print(message)

    def note(self, message: str) -> None:
        """A line shown whenever anything is (e.g. an estimate of a long grid's time)."""
        self._print(message)

    def counts(self) -> str:
        return f"{self.computed} computed, {self.cached} cached"

    # -- the estimate ------------------------------------------------------------------------------
    def _running_chunks(self, now: float) -> tuple[float, float] | None:
        """The running step's sweep: (seconds it has left, seconds it will have taken), projected
        from its chunks after the first (which also compiles); None before its second chunk."""
        if self._chunk is None:
            return None
        done, total, latest, first = self._chunk
        if first is None or done < 2 or done >= total:
            return None
        per_chunk = (latest - first) / (done - 1)
        left = max((total - done) * per_chunk - (now - latest), 0.0)
        started = self._grid.started if self._grid is not None else self._chunk_started
        return left, (now - started) + left

    def time_left(self) -> tuple[float, str] | None:
        """``(seconds, basis)``: the running grid's time left and what the estimate rests on, or
        None while there is nothing to go on (or nothing left)."""
        now = self.clock()
        chunks = self._running_chunks(now)
        grid = self._grid
        if grid is None:  # a lone step's sweep: only that step
            return (
                None
                if chunks is None
                else (chunks[0], "this unit, from its chunks after the first")
            )
        if grid.left_steps <= 0:
            return None
        sized = "weighted by size" if grid.costs is not None else "assuming equal cost"
        if grid.computed:
            rate = grid.seconds / max(grid.cost, 1e-12)
            basis = (
                f"from {grid.computed} computed {grid.label}{'s' if grid.computed > 1 else ''},"
                f" {sized}"
            )
            if chunks is not None:  # the running step from its own chunks, the rest from the rate
                return chunks[0] + rate * max(grid.left - grid.next_cost, 0.0), basis
            return max(rate * grid.left - (now - grid.started), 0.0), basis
        if chunks is not None:  # the first step is still running: its chunks give the rate
            rate = chunks[1] / max(grid.next_cost, 1e-12)
            rest = rate * max(grid.left - grid.next_cost, 0.0)
            return chunks[0] + rest, f"from the first {grid.label}'s chunks, {sized}"
        return None

    def _forecast_once(self) -> None:
        """The line that says, once per grid, that what is left will take long."""
        if self._forecast:
            return
        estimate = self.time_left()
        if estimate is None:
            return
        self._forecast = True
        seconds, basis = estimate
        if seconds <= self.long_after:
            return
        grid = self._grid
        if grid is None:
            done, total = self._chunk[:2] if self._chunk else (0, 0)
            self.note(f"{total - done} of {total} chunks left ≈ {_duration(seconds)} ({basis})")
        else:
            plural = "s" if grid.steps > 1 else ""
            self.note(
                f"{grid.left_steps} of {grid.steps} {grid.label}{plural} left ≈"
                f" {_duration(seconds)} ({basis})"
            )

    # -- the bar -----------------------------------------------------------------------------------
    def _refresh(self) -> None:
        estimate = self.time_left()
        eta = [] if estimate is None else [f"ETA ~{_duration(estimate[0])}"]
        postfix = ", ".join(
            ([self.counts()] if self.computed or self.cached else [])
            + ([] if self._chunk is None else [f"chunk {self._chunk[0]}/{self._chunk[1]}"])
        )
        now = self.clock()
        if self._mode in ("bar", "notebook"):
            if self._bar is not None and now - self._last_line < 0.2 and self.done < self.total:
                return  # at most five redraws a second
            self._last_line = now
            if self._bar is None:
                if self._mode == "bar":
                    from tqdm import tqdm
                else:
                    from tqdm.auto import tqdm
                # tqdm's own ETA (steps/s) is left out: steps differ in cost, and the bar shows
                # ours.
                self._bar = tqdm(
                    total=self.total,
                    desc=self.label,
                    unit="unit",
                    file=self.stream,
                    leave=False,
                    dynamic_ncols=True,
                    mininterval=0.5,
                    bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
                )
            self._bar.total = self.total
            self._bar.n = self.done
            self._bar.set_postfix_str(
                ", ".join(([postfix] if postfix else []) + eta), refresh=False
            )
            self._bar.refresh()
        elif self._mode == "lines":
            if now - self._last_line < self.interval:
                return
            self._last_line = now
            self._print(
                f"{self.done}/{self.total} units"
                + (f" ({postfix})" if postfix else "")
                + (f", {eta[0]}" if eta and self.done < self.total else "")
            )

    def _grow(self, steps: int) -> None:
        self.total += steps
        self._refresh()

    def _advance(
        self,
        computed: bool,
        seconds: float,
        remaining: "int | Sequence[float] | Callable | None" = None,
        cost: float | None = None,
    ) -> None:
        self.done += 1
        grid = self._grid
        if grid is not None and self._level > 0:
            cost = grid.next_cost if cost is None else float(cost)
            if computed:
                grid.computed += 1
                grid.seconds += seconds
                grid.cost += cost
            rest = remaining() if callable(remaining) else remaining
            if rest is None:  # this step is no longer left, whichever it was
                grid.left, grid.left_steps = max(grid.left - cost, 0.0), max(grid.left_steps - 1, 0)
            elif isinstance(rest, int):
                grid.left, grid.left_steps = rest * grid.mean_cost(), rest
            else:
                rest = [float(c) for c in rest]
                grid.left, grid.left_steps = sum(rest), len(rest)
            if isinstance(rest, list) and rest:
                grid.next_cost = rest[0]
            elif grid.costs is not None and self.done < self.total and grid.steps > 0:
                grid.next_cost = grid.mean_cost()
            grid.started = self.clock()
            self._chunk = None
            if computed:
                self._forecast_once()
        else:  # a lone step: the next lone sweep may say it is long, too
            self._chunk, self._forecast = None, False
        self._refresh()

    @contextlib.contextmanager
    def grid(self, steps: int, *, costs: Sequence[float] | None = None, label: str = "unit"):
        """A grid or loop of ``steps`` steps; yields whether it is the outermost (the one that moves
        the bar through :meth:`step`). ``costs``: each step's relative cost (e.g. its size), which
        the ETA weights the steps by; without them the steps are assumed to cost the same."""
        outer = self._level == 0
        if outer:
            if costs is not None:
                costs = [float(c) for c in costs]
                if len(costs) != steps or not all(math.isfinite(c) and c > 0 for c in costs):
                    raise ValueError(
                        f"costs must be {steps} positive finite numbers, got {costs!r}"
                    )
            first = costs[0] if costs else 1.0
            self._grid = _Grid(
                label,
                steps,
                costs,
                self.clock(),
                first,
                sum(costs) if costs else float(steps),
                steps,
            )
            self._forecast = False
            self._chunk = None
            self._grow(steps)
        self._level += 1
        try:
            yield outer
        finally:
            self._level -= 1
            if outer:
                self._grid = None

    def step(
        self,
        *,
        computed: bool,
        seconds: float,
        remaining: "int | Sequence[float] | Callable | None" = None,
        cost: float | None = None,
    ) -> None:
        """One step of the outermost grid is done (``computed`` now or loaded, in ``seconds``).
        ``remaining``: the steps still to compute after it, as a count or as their costs in the
        order they will run, or a function returning either (asked once); ``cost``: this step's
        cost (its grid's stated cost; default: the running step's)."""
        self._advance(computed, seconds, remaining, cost)

    def unit(self, *, cached: bool, seconds: float = 0.0) -> None:
        """A unit of work was loaded (``cached``) or computed in ``seconds``: counted; outside a
        grid or loop it is a step of its own."""
        if cached:
            self.cached += 1
        else:
            self.computed += 1
        if self._level == 0:
            self.total += 1
            self._advance(not cached, seconds)

    def chunk(self, done: int, total: int) -> None:
        """Sweep engines' callback: ``done`` of ``total`` compiled chunks finished (0 when
        starting).
        The running step's time left is projected from its chunks after the first (which also
        compiles).
        """
        now = self.clock()
        if done == 0 or self._chunk is None:
            self._chunk_started = now
            self._chunk = (done, total, now, None)
        elif (done, total) == self._chunk[:2]:
            pass  # told again: the chunk still finished when first told
        else:
            self._chunk = (done, total, now, now if done == 1 else self._chunk[3])
        if done == 2 < total and (self._grid is None or self._grid.computed == 0):
            self._forecast_once()
        if total > 1:
            self._refresh()

    def track(
        self, items: Iterable[Any], label: str, *, costs: Sequence[float] | None = None
    ) -> Iterable[Any]:
        """Yields ``items``, one step each (a detail line per item when ``verbose``); ``costs``:
        each item's relative cost, for the ETA (see :meth:`grid`)."""
        items = list(items)
        with self.grid(len(items), costs=costs, label=label) as outer:
            for i, item in enumerate(items, 1):
                self(f"{label} {i}/{len(items)}: {item}")
                before, start = (self.computed, self.cached), self.clock()
                yield item
                if outer:
                    # computed unless the step only loaded units
                    computed = self.computed > before[0] or self.cached == before[1]
                    self._advance(
                        computed,
                        self.clock() - start,
                        len(items) - i if costs is None else list(costs[i:]),
                        None if costs is None else costs[i - 1],
                    )

    def close(self) -> None:
        """Removes the bar (the caller prints its one line per experiment)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


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
            t
            for t in (f"rel {rel_tol:g}" if rel_tol else "", f"abs {abs_tol:g}" if abs_tol else "")
            if t
        )
        return cls(
            quantity,
            f"{paper:.{digits}g}",
            f"{measured:.{digits}g}",
            tol,
            "pass" if ok else "miss",
            note,
        )

    @classmethod
    def claim(
        cls, quantity: str, paper: str, measured: str, holds: bool, note: str = ""
    ) -> "Comparison":
        """A qualitative claim (e.g. an ordering) that our run either confirms or not."""
        return cls(quantity, paper, measured, "qualitative", "pass" if holds else "miss", note)

    @classmethod
    def info(cls, quantity: str, measured: str, note: str = "", paper: str = "—") -> "Comparison":
        return cls(quantity, paper, measured, "—", "info", note)


def comparisons_frame(comparisons: Iterable[Comparison]) -> pd.DataFrame:
    rows = [dataclasses.asdict(c) for c in comparisons]
    columns = [f.name for f in dataclasses.fields(Comparison)]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------------------------------
# Grids of static groups (one resumable unit per group)


@dataclasses.dataclass(frozen=True)
class SweepUnit:
    """A grid unit whose work is sweeps of :mod:`dpprep.sweeps`: ``unit()`` computes it (what a
    store's ``run_many`` calls); ``unit(max_steps=2, first_chunk_only=True)`` runs the same sweeps
    at the same compiled shapes (seeds, chunk size, batch padding, features) with fewer steps and
    one chunk each, which ``run_all --validate`` uses (:class:`experiments.planning.ValidateStore`)
    to check a large profile before paying for it; those values are meaningless and never saved.
    ``compute`` takes the two as keywords and passes them to every sweep it runs. ``shape``: what
    decides its compiled program once the steps are cut (units with equal shapes are validated
    once), or None (always run)."""

    compute: Callable[..., dict]
    shape: Any = None

    def __call__(self, **limits: Any) -> dict:
        return self.compute(**limits)


def run_groups(
    groups: Sequence[sweeps.Group],
    params0: Params,
    data: tuple[Any, Any],
    keys: Array,
    store: Any,
    *,
    eval_data: tuple[Any, Any],
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Evaluate every group's ``keys × points`` through ``store.run_many`` (one unit per group:
    an interrupted grid resumes at the first unfinished group; with ``run_all --shard`` the
    groups are spread over machines). Groups that share a config shape reuse one compilation.
    Returns, per group, ``{"evaluation": nested lists with leading axes (seeds, points)}``.
    ``progress`` gets a line per group computed; one with a ``chunk`` method (a
    :class:`Progress`) is also told of each chunk, unless ``options`` give ``on_chunk``.
    ``options`` go to :func:`dpprep.sweeps.sweep_points` (``chunk_size``, ``memory_budget``,
    ``devices``, ``on_chunk``).
    ``store``: anything with ``run_many(items, costs=...)``; the costs (:func:`group_cost`) weight
    the ETA.
    Each item's callable is a :class:`SweepUnit` (``run_all --validate`` runs it cut short)."""
    if not groups:
        raise ValueError("groups must not be empty")
    if len({g.key for g in groups}) != len(groups):
        raise ValueError("group keys must be distinct")
    if "on_chunk" not in options and callable(getattr(progress, "chunk", None)):
        # getattr check above
        options = options | {"on_chunk": progress.chunk}  # type: ignore[union-attr]

    def unit(i: int, group: sweeps.Group, **limits: Any) -> dict[str, Any]:
        if progress is not None:
            progress(f"group {i + 1}/{len(groups)}: {group.key}")
        result = sweeps.sweep_points(
            group.config,
            params0,
            data,
            keys,
            group.points,
            eval_data=eval_data,
            return_params=False,
            per_seed=group.per_seed,
            **options,
            **limits,
        )
        return {
            "evaluation": jax.tree_util.tree_map(
                lambda a: np.asarray(a).tolist(), result.evaluation
            )
        }

    n = int(np.shape(jax.tree_util.tree_leaves(data[0])[0])[0])
    costs = [group_cost(g, n, int(np.shape(keys)[0])) for g in groups]
    return store.run_many(
        [
            (
                g.key,
                SweepUnit(
                    functools.partial(unit, i, g),
                    _sweep_shape(g, n, (data, eval_data), keys, options),
                ),
            )
            for i, g in enumerate(groups)
        ],
        costs=None if None in costs else costs,
    )


def _sweep_shape(
    group: sweeps.Group, n: int, data: Any, keys: Array, options: dict[str, Any]
) -> Any:
    """What decides ``group``'s compiled program once validation cuts its steps: its static config
    but the step count (steps, epochs), its plan but steps, the swept names and point count, the
    shapes of ``data`` (training and evaluation) and keys, and the sweep options; None when it
    cannot be told here (run it)."""
    try:
        plan = group.config.plan.execution
        config = tuple(
            (f.name, getattr(group.config, f.name))
            for f in dataclasses.fields(group.config)
            if f.name not in ("hyper", "plan")
        )
        shape = (
            config,
            tuple(
                (f.name, getattr(plan, f.name))
                for f in dataclasses.fields(plan)
                if f.name != "steps"
            ),
            tuple(group.points),
            max((int(np.shape(v)[0]) for v in group.points.values() if np.ndim(v) > 0), default=1),
            group.per_seed,
            tuple(np.shape(leaf) for leaf in jax.tree_util.tree_leaves(data)),
            np.shape(keys),
            tuple(sorted((k, repr(v)) for k, v in options.items() if k != "on_chunk")),
        )
        hash(shape)
    except (ValueError, TypeError, AttributeError):
        return None
    return shape


def group_cost(group: sweeps.Group, n: int, seeds: int) -> float | None:
    """A group's size, for progress estimates: seeds × points × steps × batch size, the examples its
    sweep passes through (groups of a grid differ in all four; time is about proportional to it
    once compiled). None when the group's plan cannot be made here (its sweep will say why)."""
    try:
        plan = group.config.plan.execution
    except (ValueError, TypeError, AttributeError):
        return None
    points = max((int(np.shape(v)[0]) for v in group.points.values() if np.ndim(v) > 0), default=1)
    return float(seeds * points * plan.steps * max(plan.batch_size, 1))
