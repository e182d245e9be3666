"""``run_all --validate``: the experiment's own ``run(ctx)`` on a store that computes every sweep
unit at its real shapes with few steps, once per compiled shape, and saves nothing.
"""

from __future__ import annotations

import dataclasses
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence


import experiments
from dpprep.accounting.dp import rdp_orders_summarised
from experiments.results import Progress, SweepUnit, UnitStore
from experiments.planning.flops import Cost
from experiments.planning.plan import cost

CHEAP_SECONDS = 120.0  # a cost model's projected CPU time below which --validate runs it whole


# --------------------------------------------------------------------------------------------------
# Validate


class NotValidated(RuntimeError):
    """A grid whose units are not sweeps: validating it would run it whole."""


class ValidateStore(UnitStore):
    """A unit store for ``--validate``: never writes a unit; ``run_many`` runs each
    :class:`SweepUnit` at ``max_steps`` steps, first chunk only, and once per distinct
    ``SweepUnit.shape`` (later units of a shape get the first one's value); a grid with any other
    unit raises :class:`NotValidated`. ``run`` (an experiment's serial, cheap units, e.g.
    calibrations) computes and keeps nothing. ``records``: one dict per sweep unit run."""

    def __init__(
        self,
        directory: Path,
        *,
        max_steps: int = 2,
        progress: Progress | None = None,
        log: Callable[[str], Any] | None = None,
    ):
        super().__init__(directory, fresh=True, progress=progress)
        self.max_steps = max_steps
        self.log = log  # a line per shape run (run_all: stderr), as the run goes
        self.units = 0
        self.records: list[dict[str, Any]] = []

    def save(self, key: str, value: dict, seconds: float | None = None) -> dict:  # never writes
        self._provenance[key] = {"validated": True}
        return value

    def run_many(
        self,
        items: Sequence[tuple[str, Callable[[], dict]]],
        *,
        costs: Sequence[float] | None = None,
    ) -> list[dict]:
        others = [key for key, compute in items if not isinstance(compute, SweepUnit)]
        if others:
            raise NotValidated(
                f"{len(others)} of {len(items)} grid units are not sweeps (e.g."
                f" {others[0][:60]!r}): validating them would run them whole"
            )
        seen: dict[Any, dict] = {}
        out = []
        for key, compute in items:
            assert isinstance(compute, SweepUnit)
            self.units += 1
            if compute.shape is not None and compute.shape in seen:
                value = seen[compute.shape]
            else:
                start = time.perf_counter()
                value = compute(max_steps=self.max_steps, first_chunk_only=True)
                self.records.append({"key": key, "seconds": time.perf_counter() - start})
                if self.log is not None:
                    self.log(
                        f"  shape {len(self.records)} (unit {self.units}/{len(items)}) {key[:70]}: "
                        f"{self.records[-1]['seconds']:.1f} s"
                    )
                if compute.shape is not None:
                    seen[compute.shape] = value
            out.append(self.save(key, value))
        return out


def validate_experiment(
    experiment_id: str,
    profile: str,
    data_dir: Path | None = None,
    max_steps: int = 2,
    log: Callable[[str], Any] | None = None,
    cpu_rate: float | Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Runs ``experiment_id`` at ``profile`` with a :class:`ValidateStore` in a throw-away directory
    (or whole, when :func:`runs_whole` says it is short: cheap, or projected under
    :data:`CHEAP_SECONDS` at ``cpu_rate`` by a count that is not a floor). Returns ``{"validated":
    bool, "why"/"seconds",
    "units", "shapes", ...}``; raises what the experiment raises (a broken shape, memory, code
    path).
    """
    c = cost(experiment_id, profile)
    module = experiments.load(experiment_id)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpprep-validate-") as tmp:
        progress = Progress(experiment_id, quiet=True, verbose=False)
        store = ValidateStore(Path(tmp) / ".units", max_steps=max_steps, progress=progress, log=log)
        ctx = experiments.RunContext(profile, Path(tmp) / experiment_id, store, progress, data_dir)
        ctx.out_dir.mkdir(parents=True)
        try:
            # dp-accounting's per-order convergence warnings: one quiet record, as in a real run
            with rdp_orders_summarised():
                try:
                    module.run(ctx)
                except NotValidated as why:
                    if not runs_whole(c, cpu_rate):
                        return {"experiment": experiment_id, "validated": False, "why": str(why)}
                    # short: run it whole with a plain store in the same throw-away directory
                    plain = UnitStore(Path(tmp) / ".whole", fresh=True, progress=progress)
                    module.run(dataclasses.replace(ctx, store=plain))
        finally:
            progress.close()
    seconds = time.perf_counter() - start
    mode = (
        f"{store.units} grid units, {len(store.records)} distinct compiled shapes run at"
        f" {max_steps} steps, first chunk each"
        if store.units
        else "run whole (not saved)"
    )
    return {
        "experiment": experiment_id,
        "validated": True,
        "mode": mode,
        "units": store.units,
        "shapes": len(store.records),
        "seconds": seconds,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def runs_whole(c: Cost, cpu_rate: float | Callable[[], float] | None) -> bool:
    """Whether ``--validate`` may run a profile of cost ``c`` whole: cheap (seconds whatever its
    FLOPs), or a count that is not a floor projected under :data:`CHEAP_SECONDS` at ``cpu_rate``
    (FLOP/s, or a function measuring it, called only when needed)."""
    if c.cheap:
        return True
    if c.flops is None or c.floor or cpu_rate is None:
        return False
    rate = cpu_rate() if callable(cpu_rate) else cpu_rate
    return c.flops / rate <= CHEAP_SECONDS


def should_validate(
    experiment_id: str, profile: str, cpu_rate: float | Callable[[], float] | None = None
) -> tuple[bool, str]:
    """Whether ``--validate`` tries ``experiment_id``: sweep grids are always tried (cut short);
    an experiment without a sweep grid only when :func:`runs_whole`; the reason when not."""
    c = cost(experiment_id, profile)
    if experiment_id not in experiments.UNSHARDED or runs_whole(c, cpu_rate):
        return True, ""
    if c.flops is None:
        return False, f"no sweep grid and {c.basis}: running it would run it whole"
    if c.floor:  # its projection is a lower bound: a small one says nothing about its time
        return (
            False,
            (
                f"no sweep grid and its {c.flops:.3g} FLOP projection is a floor (uncounted work"
                " dominates): not run whole"
            ),
        )
    if cpu_rate is None:
        return (
            False,
            (
                f"no sweep grid and {c.flops:.3g} FLOP, and no CPU rate to project it with: not run"
                " whole"
            ),
        )
    rate = cpu_rate() if callable(cpu_rate) else cpu_rate
    return (
        False,
        (
            f"no sweep grid and {c.flops:.3g} FLOP (projected {c.flops / rate:.0f} s here, over "
            f"{CHEAP_SECONDS:.0f} s): not run whole"
        ),
    )


def summary_line(report: dict[str, Any]) -> str:
    if not report["validated"]:
        return f"not validated {report['experiment']}: {report['why']}"
    return (
        f"validated {report['experiment']}: {report['mode']}, in {report['seconds']:.1f} s, "
        f"max RSS {report['max_rss_mib']:.0f} MiB"
    )
