"""Progress of one experiment: a bar (tqdm) on a terminal or in Jupyter, plain timed lines
elsewhere, with a time-left estimate from the units' measured cost.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from typing import Any, Callable, Iterable, Sequence

from experiments.results.eta import TimeLeft, _duration, _Grid


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _notebook_widgets() -> bool:
    """In a Jupyter kernel that can draw tqdm's widget bar (ipywidgets installed)."""
    import importlib.util

    return "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is not None


class Progress(TimeLeft):
    """Progress of one experiment: a bar with units done/total, elapsed time and ETA (tqdm) on a
    terminal or in Jupyter (with ipywidgets); elsewhere (CI logs, pipes, pytest capture, kernels
    without widgets) a plain line at most every ``interval`` seconds, never a carriage return.

    The bar counts steps: each item of the outermost :meth:`track` loop or ``UnitStore.run_many``
    grid, and each ``UnitStore.run`` outside of them (the total then grows as they come); loops
    nested in a step do not move it. The store reports every unit it computes or loads
    (:meth:`unit`), hence the computed/cached counts; sweep engines report their chunks through
    :meth:`chunk`.

    The ETA is the running grid's time left (:mod:`experiments.results.eta`).
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
        # the running grid's (or lone sweep's) estimate line is printed (or not needed)
        self._forecast = False
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
                # tqdm's own ETA (steps/s) is left out: steps differ in cost; the bar shows ours.
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
        starting). The running step's time left is projected from its chunks after the first
        (which also compiles)."""
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
