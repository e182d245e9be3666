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
from dpprep.files import atomic_write_bytes, atomic_write_text, umask_mode  # noqa: F401 (re-exported)

# Every package a result can depend on: the engine, the accountants, the auditor's statistics
# (jax-privacy) and the Sepsis rebalancing (imbalanced-learn, scikit-learn).
_TRACKED_PACKAGES = ("dpprep", "jax", "jaxlib", "optax", "numpy", "scipy", "pandas", "dp-accounting",
                     "jax-privacy", "imbalanced-learn", "scikit-learn")


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


def code_identity() -> dict[str, Any]:
    """What decides a computation besides its config: our source and the installed stack."""
    return {"source": source_digest(), "versions": package_versions()}


def provenance() -> dict[str, Any]:
    """:func:`code_identity` plus the time (UTC), for a record computed now."""
    return code_identity() | {"computed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def provenance_json(record: dict[str, Any] | None = None) -> str:
    """The code that produced a row, as compact JSON for a ``versions`` column: ``record``'s (e.g.
    a cached unit's, from :meth:`UnitStore.provenance`), else this code's. The time a unit was
    computed stays in its unit file, so regenerated tables are byte-identical when nothing changed."""
    identity = code_identity() if record is None else {k: v for k, v in record.items() if k != "computed"}
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
    and versions), so an edit to ``dpprep/`` or ``experiments/`` or an upgrade recomputes it. A
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
    ):
        if shard is not None:
            k, n = shard
            if not (isinstance(k, int) and isinstance(n, int) and 1 <= k <= n):
                raise ValueError(f"shard must be (K, N) with 1 <= K <= N, got {shard!r}")
            if merge is not None:
                raise ValueError("shard and merge exclude each other: merge assembles every shard's units")
        if merge is not None and not (isinstance(merge, int) and merge >= 1):
            raise ValueError(f"merge must be the number of shards (>= 1), got {merge!r}")
        self.directory = Path(directory)
        self.fresh = fresh
        self.shard = shard
        self.merge = merge
        self.progress = progress
        self._provenance: dict[str, dict] = {}

    def _path(self, key: str) -> Path:
        return self.directory / _unit_filename(key)

    def load(self, key: str) -> dict | None:
        """The value of a unit finished by this code, or None (absent, stale or damaged)."""
        path = self._path(key)
        if path.is_dir():  # nothing this module writes: move it aside, or the unit could never be saved
            aside = path.with_name(f"{path.name}.not-a-unit-{os.getpid()}-{time.time_ns()}")
            path.rename(aside)
            warnings.warn(f"unit file {path} is a directory, not a unit; moved it to {aside.name} and recomputing the unit",
                          stacklevel=2)
            return None
        if self.fresh or not path.exists():
            return None
        try:
            record = read_unit(path)
        except CorruptUnit as err:
            warnings.warn(f"{err}; recomputing it", stacklevel=2)
            return None
        if record["key"] != key or not _same_code(record["provenance"]):
            return None
        self._provenance[key] = record["provenance"]
        return record["value"]

    def save(self, key: str, value: dict) -> dict:
        """Records ``value`` as computed now by this code; returns it as a reload would (JSON types)."""
        # Key order is kept (tables built from values keep their column order); the checksum is
        # over the canonical (sorted) form, so it does not depend on it.
        payload = json.loads(json.dumps({"key": key, "provenance": provenance(), "value": value},
                                        separators=(",", ":"), default=float))
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
        # The JSON round trip makes a first run and a resumed one return identical values.
        value = self.save(key, compute())
        self._report(False, time.perf_counter() - start)
        return value

    def _report(self, cached: bool, seconds: float) -> None:
        if self.progress is not None:
            self.progress.unit(cached=cached, seconds=seconds)

    def _run_step(self, key: str, compute: Callable[[], dict], keys: Sequence[str], index: int, outer: bool) -> dict:
        """:meth:`run` as step ``index`` of the grid ``keys`` (a step of the bar when ``outer``)."""
        before = self.progress.computed if outer else 0
        start = time.perf_counter()
        value = self.run(key, compute)
        if outer:
            # For the estimate: the rest of the grid that has no unit file yet (fresh: all of it).
            rest = lambda: sum(self.fresh or not self._path(k).exists() for k in keys[index + 1:])  # noqa: E731
            self.progress.step(computed=self.progress.computed > before, seconds=time.perf_counter() - start,
                               remaining=rest)
        return value

    def shard_of(self, keys: Sequence[str], n: int) -> dict[str, int]:
        """Each key's shard (1-based) of ``n``: round robin over the keys sorted by digest, so the
        split is balanced within one unit and depends on the set of keys only (not their order)."""
        ranked = sorted(keys, key=lambda k: hashlib.sha256(k.encode()).hexdigest())
        return {k: i % n + 1 for i, k in enumerate(ranked)}

    def run_many(self, items: Sequence[tuple[str, Callable[[], dict]]]) -> list[dict]:
        """``[run(key, compute) for key, compute in items]``, spread over shards in shard mode.

        In shard mode every shard reaches the same call with the same keys; it computes (or loads)
        its own slice first, then raises :class:`UnitsElsewhere` if units of other slices are not in
        ``directory`` yet. An experiment should therefore submit a grid in one call: a later
        ``run_many`` is not reached while an earlier one has units pending elsewhere.
        """
        keys = [key for key, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError("items must have distinct keys")
        with contextlib.ExitStack() as stack:
            outer = self.progress is not None and stack.enter_context(self.progress.grid(len(items)))
            if self.shard is None and self.merge is None:
                return [self._run_step(key, compute, keys, i, outer) for i, (key, compute) in enumerate(items)]
            n = self.shard[1] if self.shard else self.merge
            owner = self.shard_of(keys, n)
            values: dict[str, dict] = {}
            mine = [(key, compute) for key, compute in items if self.shard is not None and owner[key] == self.shard[0]]
            mine_keys = [key for key, _ in mine]
            for i, (key, compute) in enumerate(mine):
                values[key] = self._run_step(key, compute, mine_keys, i, outer)
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
                f"{len(missing)} of {len(keys)} grid unit(s) missing from {self.directory} (not delivered by "
                f"their shard, or computed by other code): {listed}" + (" ..." if len(missing) > 5 else "")
            )
        return [values[key] for key in keys]


def _same_code(record_provenance: dict) -> bool:
    identity = code_identity()
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


class Progress:
    """Progress of one experiment: a bar with units done/total, elapsed time and ETA (tqdm) on a
    terminal or in Jupyter (with ipywidgets); elsewhere (CI logs, pipes, pytest capture, kernels
    without widgets) a plain line at most every ``interval`` seconds, never a carriage return.

    The bar counts steps: each item of the outermost :meth:`track` loop or ``UnitStore.run_many``
    grid, and each ``UnitStore.run`` outside of them (the total then grows as they come); loops
    nested in a step do not move it. The store reports every unit it computes or loads
    (:meth:`unit`), hence the computed/cached counts; sweep engines report their chunks through
    :meth:`chunk`. After the first computed step (or chunk) of a grid whose rest is projected to take
    longer than ``long_after`` seconds, one line says so ("N units × ~t each ≈ T").
    Messages (``progress("...")``) are details, shown only when ``verbose``; :meth:`note` lines
    always are. ``quiet`` shows nothing (the counts are kept).
    """

    def __init__(self, prefix: str, *, stream=None, quiet: bool = False, verbose: bool = True,
                 label: str | None = None, interval: float = 30.0, long_after: float = 30.0):
        self.prefix = prefix
        self.label = label or prefix
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.verbose = verbose
        self.interval = interval
        self.long_after = long_after
        self.computed = 0  # units computed now
        self.cached = 0  # units loaded from earlier runs
        self.total = 0  # steps the bar expects (grows with each grid, loop or lone unit)
        self.done = 0
        self._level = 0  # nesting depth of grids and loops: only the outermost moves the bar
        self._forecast = False  # the outermost grid's estimate is given (or not needed)
        self._chunk: tuple[int, int, float] | None = None  # the current sweep's chunks done, total; time of the latest
        self._chunk_forecast = False  # a sweep of the current step gave its estimate
        self._mode = "off" if quiet else ("notebook" if _notebook_widgets() and self.stream is sys.stderr
                                          else "bar" if _isatty(self.stream) else "lines")
        self._bar = None
        self._start = self._last_line = time.perf_counter()

    # -- lines -------------------------------------------------------------------------------------
    def _print(self, message: str) -> None:
        if self._mode == "off":
            return
        line = f"[{self.prefix} {time.perf_counter() - self._start:7.1f}s] {message}"
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

    # -- the bar -----------------------------------------------------------------------------------
    def _refresh(self) -> None:
        postfix = ", ".join(([self.counts()] if self.computed or self.cached else [])
                            + ([] if self._chunk is None else [f"chunk {self._chunk[0]}/{self._chunk[1]}"]))
        now = time.perf_counter()
        if self._mode in ("bar", "notebook"):
            if self._bar is not None and now - self._last_line < 0.2 and self.done < self.total:
                return  # at most five redraws a second
            self._last_line = now
            if self._bar is None:
                if self._mode == "bar":
                    from tqdm import tqdm
                else:
                    from tqdm.auto import tqdm
                self._bar = tqdm(total=self.total, desc=self.label, unit="unit", file=self.stream, leave=False,
                                 dynamic_ncols=True, mininterval=0.5)
            self._bar.total = self.total
            self._bar.n = self.done
            self._bar.set_postfix_str(postfix, refresh=False)
            self._bar.refresh()
        elif self._mode == "lines":
            if now - self._last_line < self.interval:
                return
            self._last_line = now
            elapsed = now - self._start
            eta = (f", ETA ~{_duration(elapsed / self.done * (self.total - self.done))}"
                   if 0 < self.done < self.total else "")
            self._print(f"{self.done}/{self.total} units" + (f" ({postfix})" if postfix else "") + eta)

    def _grow(self, steps: int) -> None:
        self.total += steps
        self._refresh()

    def _advance(self, computed: bool, seconds: float, remaining: int | Callable[[], int] | None) -> None:
        self.done += 1
        self._chunk, self._chunk_forecast = None, False
        if computed and remaining is not None and not self._forecast:
            self._forecast = True
            self._estimate(remaining() if callable(remaining) else remaining, seconds, "unit", "first unit")
        self._refresh()

    def _estimate(self, count: int, seconds: float, what: str, basis: str) -> None:
        if count > 0 and count * seconds > self.long_after:
            self.note(f"{count} {what}{'s' if count > 1 else ''} left × ~{_duration(seconds)} each ≈ {_duration(count * seconds)} "
                      f"(estimate from the {basis})")

    @contextlib.contextmanager
    def grid(self, steps: int):
        """A grid or loop of ``steps`` steps; yields whether it is the outermost (the one that moves
        the bar through :meth:`step`)."""
        outer = self._level == 0
        if outer:
            self._forecast = False
            self._grow(steps)
        self._level += 1
        try:
            yield outer
        finally:
            self._level -= 1

    def step(self, *, computed: bool, seconds: float, remaining: int | Callable[[], int] | None = None) -> None:
        """One step of the outermost grid is done (``computed`` now or loaded, in ``seconds``);
        ``remaining``: how many of its steps are still to compute, or a function saying so (asked
        once, for the estimate)."""
        self._advance(computed, seconds, remaining)

    def unit(self, *, cached: bool, seconds: float = 0.0) -> None:
        """A unit of work was loaded (``cached``) or computed in ``seconds``: counted; outside a
        grid or loop it is a step of its own."""
        if cached:
            self.cached += 1
        else:
            self.computed += 1
        if self._level == 0:
            self.total += 1
            self._advance(not cached, seconds, None)

    def chunk(self, done: int, total: int) -> None:
        """Sweep engines' callback: ``done`` of ``total`` compiled chunks finished (0 when starting).
        Estimates the rest from the second chunk (the first also compiles)."""
        now = time.perf_counter()
        # Once per step, and only before the grid it is in has its estimate (from its first unit).
        if done == 2 < total and self._chunk is not None and not (self._forecast or self._chunk_forecast):
            self._chunk_forecast = True
            self._estimate(total - 2, now - self._chunk[2], "chunk", "second chunk; the first also compiles")
        self._chunk = (done, total, now)
        if total > 1:
            self._refresh()

    def track(self, items: Iterable[Any], label: str) -> Iterable[Any]:
        """Yields ``items``, one step each (a detail line per item when ``verbose``)."""
        items = list(items)
        with self.grid(len(items)) as outer:
            for i, item in enumerate(items, 1):
                self(f"{label} {i}/{len(items)}: {item}")
                before, start = (self.computed, self.cached), time.perf_counter()
                yield item
                if outer:
                    # computed unless the step only loaded units
                    computed = self.computed > before[0] or self.cached == before[1]
                    self._advance(computed, time.perf_counter() - start, len(items) - i)

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


# --------------------------------------------------------------------------------------------------
# Grids of static groups (one resumable unit per group)


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
    ``options`` go to :func:`dpprep.sweeps.sweep_points` (``chunk_size``, ``memory_budget``, ``devices``, ``on_chunk``)."""
    if not groups:
        raise ValueError("groups must not be empty")
    if len({g.key for g in groups}) != len(groups):
        raise ValueError("group keys must be distinct")
    if "on_chunk" not in options and callable(getattr(progress, "chunk", None)):
        options = options | {"on_chunk": progress.chunk}  # type: ignore[union-attr]  # getattr check above

    def unit(i: int, group: sweeps.Group) -> dict[str, Any]:
        if progress is not None:
            progress(f"group {i + 1}/{len(groups)}: {group.key}")
        result = sweeps.sweep_points(group.config, params0, data, keys, group.points, eval_data=eval_data,
                              return_params=False, per_seed=group.per_seed, **options)
        return {"evaluation": jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(), result.evaluation)}

    return store.run_many([(g.key, functools.partial(unit, i, g)) for i, g in enumerate(groups)])
