"""The unit store: resumable units of work, each a checksummed JSON file keyed on its config and
the code that computes it, shared across shards of a run (``run_all --shard``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

from experiments.results.progress import Progress
from experiments.results.identity import code_identity, provenance

from dpprep.files import atomic_write_text


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
        """Records ``value`` as computed now by this code (in ``seconds``); returns it as reloaded."""
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
        start = (clock := self._clock())()
        computed = compute()
        seconds = clock() - start
        # The JSON round trip makes a first run and a resumed one return identical values.
        value = self.save(key, computed, seconds)
        self._report(False, seconds)
        return value

    def _clock(self) -> Callable[[], float]:
        """The progress's clock (a test's fake one included): estimates and elapsed times agree."""
        return time.perf_counter if self.progress is None else self.progress.clock

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
        start = (clock := self._clock())()
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
                seconds=clock() - start,
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
