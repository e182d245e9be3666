"""The time-left half of :class:`experiments.results.progress.Progress`: how long the running grid
(or a lone sweep) still needs, from the measured time of its computed steps per unit of their
stated cost, or from the running sweep's chunks while no step is done yet.

The ETA is the running grid's: the time its computed steps took per unit of cost, times the cost
of its steps still to compute (loaded units cost nothing). A step's cost is its size when the
experiment states one (``costs=``: e.g. seeds × points × steps × batch size for a sweep group);
otherwise the steps are assumed to cost the same, and the estimate says so. Before the first
step of a grid is done, the running step's chunks (from its second; the first also compiles)
give it. Every estimate line carries one ETA and its basis. Once per grid, when a first
estimate exceeds ``long_after`` seconds, one line says so ("N of M units left ≈ T (from ...)").
"""

from __future__ import annotations

import dataclasses
from typing import Callable


def _duration(seconds: float) -> str:
    """``45 s``, ``3.2 min`` or ``1.5 h``: a readable length of time."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


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


class TimeLeft:
    """The estimate, mixed into ``Progress``, whose grid, chunk and clock state it reads: the
    running grid (``_grid``, a :class:`_Grid`), the running step's sweep chunks (``_chunk``),
    ``clock``, ``long_after`` and ``note``."""

    _grid: _Grid | None
    _chunk: tuple[int, int, float, float | None] | None
    _chunk_started: float
    _forecast: bool
    clock: Callable[[], float]
    long_after: float

    def note(self, message: str) -> None:  # pragma: no cover - Progress defines it
        raise NotImplementedError

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
