"""Knowing a profile's cost before running it (``run_all --plan``) and checking that it runs
(``run_all --validate``), without computing or saving any unit of it.

**Plan.** Every experiment has a cost model here (:data:`COST_MODELS`): a pure function of the
profile name that reads the experiment module's own grid (``PROFILES``/``GRIDS``), so the plan
follows an edit to a profile and cannot drift from it. It returns a :class:`Cost`: units, an
analytic FLOP count (or ``None`` where no model exists yet: the row says "no cost model"), an
estimated peak memory and the formula it used. The models live in this module, not in the
experiment modules, because an experiment's units are keyed on a digest of its module (editing a
module to add a planning function would invalidate its cached units) and because some modules are
edited by others. An experiment that is registered but unknown here gets a "no cost model" row.

Time: FLOPs are turned into seconds by a rate MEASURED now on this machine — a softmax-regression
sweep through :func:`dpprep.sweeps.sweep_points` (the engine every GLM grid uses), counted with the
same 4dk + 2d + 8k FLOPs per example-step — and by the stated GPU rate (``--gpu-flops``). Both are
PROJECTIONS (every row says so); the CPU one assumes the experiment's kernels run at the measured
GLM-sweep rate, which favours work the engine does not batch (eigendecompositions, Python loops).

**Validate.** The experiment's own ``run(ctx)`` runs with a :class:`ValidateStore` in a throw-away
directory: every grid unit that is a :class:`experiments.results.SweepUnit` (every
:func:`experiments.results.run_groups` unit) runs at ``max_steps`` steps, first chunk only, once per
distinct compiled shape (:attr:`SweepUnit.shape`); nothing is saved. The validation mode is passed
explicitly: the store holds it and hands it to each unit as arguments (no global state).
Experiments whose cost model says they are cheap (:attr:`Cost.cheap`) run whole (timed, not saved);
the others say "not validated" and why.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import experiments
from experiments.results import Progress, SweepUnit, UnitStore

GIB = 2**30
# Sizes (n_train, d, classes) of the datasets the cost models need; read from the files would cost
# a load per plan, and cifar100_features is user-supplied (640-d WRN features, dpprep.data).
DATA_SHAPES = {"mnist": (60_000, 784, 10), "fashion_mnist": (60_000, 784, 10), "cifar100_features": (50_000, 640, 100)}
CHEAP_SECONDS = 120.0  # a cost model's projected CPU time below which --validate runs it whole


@dataclasses.dataclass(frozen=True)
class Cost:
    """What one profile of one experiment costs. ``flops=None``: no analytic count (``basis`` says
    why); ``cheap``: closed-form or accounting work whose time is seconds whatever its FLOPs;
    ``floor``: much of the work is not counted or runs far below a GLM sweep's rate (calibrations,
    eigendecompositions, many small runs), so a time from ``flops`` is a lower bound."""

    units: int | None
    flops: float | None
    peak_bytes: float | None
    basis: str
    cheap: bool = False
    floor: bool = False


def glm_flops(d: int, k: int, example_steps: float) -> float:
    """FLOPs of training a GLM of ``d`` features and ``k`` outputs with per-example clipping over
    ``example_steps`` examples (summed over steps, models and seeds): ``4dk + 2d + 8k`` each (logits
    and gradient sum 4dk, the clipping norm and scale; the count of
    :func:`experiments.sun2024_table1.example_step_flops`, so the measured rate and that module's
    grid count are in the same unit)."""
    return (4 * d * k + 2 * d + 8 * k) * float(example_steps)


def _accounting(units: int | None, what: str) -> Cost:
    return Cost(units, 0.0, None, f"accounting only, seconds ({what})", cheap=True)


def sun2024_table1(profile: str) -> Cost:
    """The module's own count (:func:`experiments.sun2024_table1.grid_flops`: Σ units seeds × models
    × the plan's steps × batch × its per-example FLOPs, ≈ 4·d·k + clipping), its units
    (``build_units`` on each dataset's shape, no data loaded) and, for the full search, what its
    staged option would cost (stage 1 + an upper bound on stage 2)."""
    from experiments.sun2024_table1 import DATASET_SHAPES as SHAPES, GRIDS, build_units, grid_flops

    g = GRIDS[profile]
    units = 0
    for name in g.datasets:
        n = min(SHAPES[name][0], g.subset or SHAPES[name][0])
        units += len(build_units({"name": name, "unit": np.zeros((n, 0), np.float32)}, g))
    flops = grid_flops(profile)["total"]
    data_bytes = max(4 * 3 * min(n, g.subset or n) * d for n, d, _ in (SHAPES[name] for name in g.datasets))
    staged = ""
    if g.search == "full":
        alt = grid_flops(profile, "staged")
        staged = f"; staged search (top {g.top_k}): {alt['total']:.3g} FLOP (stage 2 an upper bound)"
    return Cost(units, flops, g.memory_budget + data_bytes,
                f"sun2024_table1.grid_flops ({g.search} search): Σ units seeds × models × steps·B × (4dk + clipping)"
                f"{staged}; peak = memory_budget {g.memory_budget / GIB:.0f} GiB + data (est.)")


def _fig3_flops(cfg: Any, n: int, d: int) -> float:
    """One (n, d) case of Hu et al.'s Figure 3: per trainer, the d-dim runs of none, pca-rank,
    dp_pca-rank and PTR and the 1-dim runs of pca-dim and dp_pca-dim, each ε × seeds × step sizes,
    at 6d + 8 FLOPs per example-step (k = 1); plus θ* (optimum_steps full-batch steps), the covariance
    (2·n·d²) and one d×d eigendecomposition (≈ 9·d³) per (ε, seed) for DP-PCA."""
    runs = len(cfg.epsilons) * cfg.seeds * len(cfg.learning_rates)
    flops = 0.0
    for trainer in cfg.trainers:
        examples = cfg.steps * n if trainer == "dp_gd" else cfg.sgd_epochs * n
        flops += glm_flops(d, 1, 4 * runs * examples) + glm_flops(cfg.k, 1, 2 * runs * examples)
    eig = len(cfg.epsilons) * cfg.seeds * 9.0 * d**3
    return flops + glm_flops(d, 1, cfg.optimum_steps * n) + 2.0 * n * d * d + eig


def hu2024_fig3(profile: str) -> Cost:
    from experiments.hu2024_fig3 import DATASET_BYTES, PROFILES

    cfg = PROFILES[profile]
    flops = sum(_fig3_flops(cfg, n, d) for n, d in cfg.cases)
    peak = max(DATASET_BYTES + 4 * (3 * n * d + 2 * d * d) for n, d in cfg.cases)
    return Cost(len(cfg.cases), flops, peak, floor=True, basis=
                f"analytic: {len(cfg.cases)} (n, d) cases × trainers {list(cfg.trainers)}: 6 runs/(ε, seed, η) × examples × (6d + 8), "
                "θ*, covariance 2nd², DP-PCA eig 9d³ per (ε, seed); peak = DP-PCA dataset chunk + data + d×d (est.)")


def hu2024_fig3_selection(profile: str) -> Cost:
    from experiments.hu2024_fig3_selection import PROFILES

    cfg = PROFILES[profile].fig3
    flops = 0.0
    for n, d in cfg.cases:
        runs = len(cfg.epsilons) * cfg.seeds * len(cfg.learning_rates)
        flops += glm_flops(d, 1, runs * cfg.steps * n) + glm_flops(d, 1, cfg.optimum_steps * n)
    peak = max(4 * 2 * n * d for n, d in cfg.cases) + 2 * GIB
    return Cost(len(cfg.cases), flops, peak, floor=True,
                basis="analytic: per case ε × seeds × η DP-GD runs × steps·n × (6d + 8) + θ* (calibrations and selection "
                      "not counted); peak = data + sweep budget (est.)")


def sun2024_table2(profile: str) -> Cost:
    from experiments.sun2024_table2 import PAPER

    rows = 4000 if profile == "smoke" else None  # the module's diam_rows (smoke subsamples the diameter)
    flops = 0.0
    for name in PAPER:
        n, d, _ = DATA_SHAPES[name]
        m = rows or n
        flops += 3.0 * m * m * d  # blocked pairwise distances: a Gram product (2 m² d) and the norms
    return Cost(None, flops, None, "analytic: exact diameter, 3·n²·d per dataset (pairwise distances); no grid units")


def hu2024_fig2(profile: str) -> Cost:
    from experiments.hu2024_fig2 import PROFILE_GRID_POINTS

    return _accounting(None, f"closed-form SRDP vs group privacy, {PROFILE_GRID_POINTS[profile]} grid points")


def audit(profile: str) -> Cost:
    """Every audit of :func:`experiments.audit.configs`: 2 worlds × (runs + pilot runs) × the
    examples one run passes (steps × batch, or epochs × n) × 6·(dim + 1) (a 1-output GLM; the
    canary adds a feature). Learners' own overheads (imputation, CorrDP factors) not counted."""
    from experiments.audit import PROFILES, configs

    plan = configs(PROFILES[profile])
    flops = 0.0
    for _, cfg in plan:
        per_run = (cfg.steps * (cfg.batch_size or cfg.n) if cfg.steps else 0) + (cfg.epochs or 0) * cfg.n
        flops += glm_flops(cfg.dim + 1, 1, 2 * (cfg.runs + cfg.pilot_runs) * per_run)
    return Cost(len(plan), flops, None, floor=True,
                basis="analytic approx: Σ audits 2 worlds × (runs + pilot) × examples/run × (6(dim+1) + 8) (tiny models: "
                      "per-run overheads, not counted, dominate); peak not estimated (runs go in vmapped chunks)")


def wang2026_fig1(profile: str) -> Cost:
    """The (panel, C) units of :data:`experiments.wang2026_fig1.PROFILES` (a C_theory entry that
    equals a listed C runs once, which this count cannot see without the data: an upper bound),
    plus the 4 mechanism units. No FLOP model: panel sizes live in the data files."""
    from experiments.wang2026_fig1 import ALL_PANELS, PROFILES

    p = PROFILES[profile]
    units = sum(len(p.c_values[k]) for k in ALL_PANELS) + 4
    return Cost(units, None, None, "no cost model (FLOPs): units counted (≤, C_theory may equal a listed C); "
                                   "panel n and d are read from the data at run time")


def wang2026_fig2(profile: str) -> Cost:
    from experiments.wang2026_fig2 import M_S

    return Cost(len(M_S), None, None, "no cost model (FLOPs): one synthetic panel per m_s")


def _same_as_quick(module: str, table: str, why: str, units: Callable[[Any], int] | None = None) -> Callable[[str], Cost]:
    """A model-less experiment whose paper grid equals its quick one (read from the module): the
    committed quick run's time applies to the paper profile, which the row says."""
    def model(profile: str) -> Cost:
        import importlib

        grids = getattr(importlib.import_module(module), table)
        grid = grids.get(profile, grids["quick"])
        same = profile == "paper" and grids.get("paper", grids["quick"]) == grids["quick"]
        note = "; paper grid = quick grid, so the quick run's time applies" if same else ""
        return Cost(None if units is None else units(grid), None, None, f"no cost model: {why}{note}")

    return model


def _no_model(why: str) -> Callable[[str], Cost]:
    def cost(profile: str) -> Cost:
        return Cost(None, None, None, f"no cost model: {why}")

    return cost


COST_MODELS: dict[str, Callable[[str], Cost]] = {
    "datasets": lambda p: _accounting(None, "loads and summarises each dataset"),
    "hu2024_table1": lambda p: _accounting(None, "closed form; every profile the same"),
    "hu2024_table2": lambda p: _accounting(None, "closed form; every profile the same"),
    "hu2024_fig2": hu2024_fig2,
    "sun2024_accounting": lambda p: _accounting(None, "PLD/RDP calibrations"),
    "sun2024_table1": sun2024_table1,
    "sun2024_table2": sun2024_table2,
    "hu2024_fig3": hu2024_fig3,
    "hu2024_fig3_selection": hu2024_fig3_selection,
    "hu2024_table3": _no_model("imputation-sensitivity units (serial store.run) not modelled yet"),
    "hu2024_pipeline_demo": _same_as_quick("experiments.hu2024_pipeline_demo", "PROFILES",
                                           "serial pipeline units not modelled yet"),
    "sun2024_selection": _same_as_quick("experiments.sun2024_selection", "GRIDS",
                                        "private random search (a random number of candidates per draw) not modelled yet",
                                        lambda g: 2 * len(g.epsilons) * getattr(g, "draws", 1) + 1),
    "sun2024_counterexample": _no_model("counter-example runs (serial store.run) not modelled yet"),
    "wang2026_table2": _same_as_quick("experiments.wang2026_table2", "GRIDS",
                                      "TV-factor estimators (serial store.run) not modelled yet"),
    "wang2026_checks": _no_model("training checks not modelled yet"),
    "wang2026_fig1": wang2026_fig1,
    "wang2026_fig2": wang2026_fig2,
    "audit": audit,
}


def cost(experiment_id: str, profile: str) -> Cost:
    """The cost of ``experiment_id`` at ``profile``; an experiment without a model (e.g. one added
    after this module) gets a ``flops=None`` row instead of an error."""
    model = COST_MODELS.get(experiment_id)
    if model is None:
        return Cost(None, None, None, "no cost model (experiment unknown to experiments/planning.py)")
    return model(profile)


def measured_sweep_rate(d: int = 784, k: int = 10, n: int = 4096, batch: int = 1024, steps: int = 20,
                        points: int = 16, seeds: int = 2) -> tuple[float, str]:
    """This machine's FLOP/s through the sweep engine: a softmax-regression DP-SGD sweep timed on
    its compiled calls (best of three), counted as :func:`glm_flops`. Returns the rate and how it was got."""
    import jax

    from dpprep import models, sweeps
    from dpprep.algorithms import Hyper, TrainConfig

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = rng.integers(0, k, size=n)
    model = models.softmax_regression(d, k)
    config = TrainConfig(model, Hyper(0.1, noise_multiplier=1.0, clip_norm=1.0), sampling="poisson",
                         batch_size=batch, steps=steps)
    keys = jax.random.split(jax.random.key(0), seeds)
    run = lambda: sweeps.sweep_points(config, model.init(None), (x, y), keys,  # noqa: E731
                                      {"learning_rate": np.linspace(0.01, 1.0, points)}, return_params=True)
    run()  # compiles
    seconds = math.inf
    for _ in range(3):  # best of three: the machine's rate, not a moment of contention (the CPU is shared)
        start = time.perf_counter()
        jax.block_until_ready(run().params)  # params kept: without an output XLA drops the training
        seconds = min(seconds, time.perf_counter() - start)
    flops = glm_flops(d, k, seeds * points * steps * batch)
    return flops / seconds, (f"softmax-regression sweep d={d}, k={k}, B={batch}, {steps} steps, {points} points × "
                             f"{seeds} seeds: {flops:.3g} FLOP in {seconds:.2f} s")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    for unit, size in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _bytes(value: float | None) -> str:
    return "—" if value is None else f"{value / GIB:.3g} GiB (est.)"


def measured_units(directory: Path, experiment_id: str, profile: str) -> tuple[int, int, float]:
    """What this machine already measured: ``(units, timed, seconds)`` over the unit files of
    ``experiment_id`` at ``profile`` under ``directory`` (a results directory): how many there are,
    how many recorded their computing time and the sum of those times. Damaged files are skipped.
    The units may be from other code than today's (their time is still this machine's cost)."""
    from experiments.results import CorruptUnit, read_unit

    units, timed, seconds = 0, 0, 0.0
    for path in sorted((Path(directory) / experiment_id / ".units" / profile).glob("*.json")):
        try:
            record = read_unit(path)
        except CorruptUnit:
            continue
        units += 1
        if "seconds" in record["provenance"]:
            timed += 1
            seconds += float(record["provenance"]["seconds"])
    return units, timed, seconds


def measured_note(experiment_id: str, profiles: Sequence[tuple[str, Path]]) -> str:
    """``"paper: 24 units timed, 231 s; quick: …"`` for each ``(profile, directory)`` with timed
    units (MEASURED: the sum of their recorded computing times on this machine), or ``"—"``."""
    parts = []
    for profile, directory in profiles:
        units, timed, seconds = measured_units(directory, experiment_id, profile)
        if timed:
            untimed = f" (+{units - timed} untimed)" if units > timed else ""
            parts.append(f"{profile}: {timed} units timed{untimed}, {_duration(seconds)}")
    return "; ".join(parts) if parts else "—"


def plan_rows(selected: Sequence[str], profile: str, cpu_rate: float, gpu_flops: float,
              measured_in: Sequence[tuple[str, Path]] = ()) -> list[dict[str, str]]:
    """One row per experiment: units, FLOPs, peak memory, CPU and GPU projections and basis, and
    what ``measured_in`` (``(profile, results directory)`` pairs) holds of it already computed."""
    rows = []
    for experiment_id in selected:
        c = cost(experiment_id, profile)
        if c.flops is None:
            cpu = gpu = "—"
        elif c.cheap:
            cpu = gpu = "seconds (accounting)" if c.flops == 0 else f"{_duration(c.flops / cpu_rate)} (projection)"
        else:
            at_least = "≥ " if c.floor else ""
            label = " (projection, floor)" if c.floor else " (projection)"
            cpu = f"{at_least}{_duration(c.flops / cpu_rate)}{label}"
            gpu = f"{at_least}{_duration(c.flops / gpu_flops)}{label}"
        rows.append({"experiment": experiment_id, "units": "—" if c.units is None else str(c.units),
                     "FLOPs": "—" if c.flops is None else ("~0" if c.flops == 0 else f"{c.flops:.3g}"),
                     "peak memory": _bytes(c.peak_bytes), "CPU time": cpu, "GPU time": gpu, "basis": c.basis,
                     "measured here": measured_note(experiment_id, measured_in)})
    return rows


def plan_report(selected: Sequence[str], profile: str, gpu_flops: float,
                cpu_rate: tuple[float, str] | None = None, measured_in: Sequence[tuple[str, Path]] = ()) -> str:
    """The ``--plan`` text for ``selected`` at ``profile``: a header saying what is measured and
    what projected, then a markdown table. ``cpu_rate`` (rate, how): given by tests; else measured.
    ``measured_in``: ``(profile, results directory)`` pairs whose unit files' recorded computing
    times fill the "measured here" column (e.g. the paper profile's own partial run and the quick one)."""
    rate, how = cpu_rate if cpu_rate is not None else measured_sweep_rate()
    columns = ["experiment", "units", "FLOPs", "peak memory", "CPU time", "GPU time", "basis", "measured here"]
    lines = [
        f"PLAN of profile {profile!r}: no unit computed. Times are PROJECTIONS (FLOPs ÷ rate), not measurements.",
        f"CPU rate: {rate:.3g} FLOP/s, MEASURED now on this machine ({how}).",
        f"GPU rate: {gpu_flops:.3g} FLOP/s, a STATED assumption (--gpu-flops); no GPU was run.",
        "FLOPs: analytic counts (GLM: 4dk + 2d + 8k per example-step); peak memory: estimated from the grid's memory "
        "budget and data sizes.",
        "Work that is not one large GLM sweep (eigendecompositions, many small runs, Python loops) runs below the "
        "measured rate: its CPU projection is a floor.",
        "Measured here: the computing times recorded in the unit files already on disk ("
        + (", ".join(f"{p} in {d}" for p, d in measured_in) or "none searched")
        + "), summed; MEASURED on this machine, possibly by other code than today's.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in plan_rows(selected, profile, rate, gpu_flops, measured_in):
        lines.append("| " + " | ".join(row[c].replace("|", "\\|") for c in columns) + " |")
    return "\n".join(lines)


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

    def __init__(self, directory: Path, *, max_steps: int = 2, progress: Progress | None = None,
                 log: Callable[[str], Any] | None = None):
        super().__init__(directory, fresh=True, progress=progress)
        self.max_steps = max_steps
        self.log = log  # a line per shape run (run_all: stderr), as the run goes
        self.units = 0
        self.records: list[dict[str, Any]] = []

    def save(self, key: str, value: dict, seconds: float | None = None) -> dict:  # never writes
        self._provenance[key] = {"validated": True}
        return value

    def run_many(self, items: Sequence[tuple[str, Callable[[], dict]]], *,
                 costs: Sequence[float] | None = None) -> list[dict]:
        others = [key for key, compute in items if not isinstance(compute, SweepUnit)]
        if others:
            raise NotValidated(f"{len(others)} of {len(items)} grid units are not sweeps (e.g. {others[0][:60]!r}): "
                               "validating them would run them whole")
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
                    self.log(f"  shape {len(self.records)} (unit {self.units}/{len(items)}) {key[:70]}: "
                             f"{self.records[-1]['seconds']:.1f} s")
                if compute.shape is not None:
                    seen[compute.shape] = value
            out.append(self.save(key, value))
        return out


def validate_experiment(experiment_id: str, profile: str, data_dir: Path | None = None,
                        max_steps: int = 2, log: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Runs ``experiment_id`` at ``profile`` with a :class:`ValidateStore` in a throw-away directory
    (or whole, when its cost model says it is cheap). Returns ``{"validated": bool, "why"/"seconds",
    "units", "shapes", ...}``; raises what the experiment raises (a broken shape, memory, code path)."""
    c = cost(experiment_id, profile)
    module = experiments.load(experiment_id)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpprep-validate-") as tmp:
        progress = Progress(experiment_id, quiet=True, verbose=False)
        store = ValidateStore(Path(tmp) / ".units", max_steps=max_steps, progress=progress, log=log)
        ctx = experiments.RunContext(profile, Path(tmp) / experiment_id, store, progress, data_dir)
        ctx.out_dir.mkdir(parents=True)
        noise = experiments._ConvergenceNoise()
        logging.getLogger("absl").addFilter(noise)
        try:
            module.run(ctx)
        except NotValidated as why:
            if not c.cheap:
                return {"experiment": experiment_id, "validated": False, "why": str(why)}
            # cheap: run it whole with a plain store in the same throw-away directory
            plain = UnitStore(Path(tmp) / ".whole", fresh=True, progress=progress)
            module.run(dataclasses.replace(ctx, store=plain))
        finally:
            progress.close()
            logging.getLogger("absl").removeFilter(noise)
    seconds = time.perf_counter() - start
    mode = (f"{store.units} grid units, {len(store.records)} distinct compiled shapes run at {max_steps} steps, "
            "first chunk each" if store.units else "run whole (no sweep grid; not saved)")
    return {"experiment": experiment_id, "validated": True, "mode": mode, "units": store.units,
            "shapes": len(store.records), "seconds": seconds,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def should_validate(experiment_id: str, profile: str, cpu_rate: float | None = None) -> tuple[bool, str]:
    """Whether ``--validate`` tries ``experiment_id``: sweep grids are always tried (cut short);
    an experiment without a sweep grid only when its cost model says it is cheap."""
    c = cost(experiment_id, profile)
    if experiment_id in experiments.UNSHARDED and not c.cheap:
        if c.flops is None:
            return False, f"no sweep grid and {c.basis}: running it would run it whole"
        if cpu_rate is None or c.flops / cpu_rate > CHEAP_SECONDS:
            return False, f"no sweep grid and {c.flops:.3g} FLOP (projected over {CHEAP_SECONDS:.0f} s here): not run whole"
    return True, ""


def summary_line(report: dict[str, Any]) -> str:
    if not report["validated"]:
        return f"not validated {report['experiment']}: {report['why']}"
    return (f"validated {report['experiment']}: {report['mode']}, in {report['seconds']:.1f} s, "
            f"max RSS {report['max_rss_mib']:.0f} MiB")


__all__ = ["Cost", "COST_MODELS", "NotValidated", "ValidateStore", "cost", "glm_flops", "measured_sweep_rate",
           "plan_report", "plan_rows", "should_validate", "summary_line", "validate_experiment"]
