"""``run_all --plan``: each experiment's units, FLOPs and peak memory from its cost model, and
PROJECTED times from a CPU rate measured now (:func:`measured_sweep_rate`) and a stated GPU rate.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

import experiments
import importlib

from experiments.planning.flops import GIB, Cost, glm_flops


def cost(experiment_id: str, profile: str) -> Cost:
    """The cost of ``experiment_id`` at ``profile``; an experiment without a model (no ``cost.py``)
    gets a ``flops=None`` row instead of an error."""
    if experiment_id not in experiments.REGISTRY:
        return Cost(None, None, None, f"no cost model ({experiment_id!r} is not registered)")
    module = f"{experiments.REGISTRY[experiment_id][0]}.cost"
    try:
        model = importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is None or not (module + ".").startswith(err.name + "."):
            raise  # the cost model exists but imports something missing
        return Cost(None, None, None, f"no cost model (the experiment has no {module})")
    return model.cost(profile)


def measured_sweep_rate(
    d: int = 784,
    k: int = 10,
    n: int = 4096,
    batch: int = 1024,
    steps: int = 20,
    points: int = 16,
    seeds: int = 2,
) -> tuple[float, str]:
    """This machine's FLOP/s through the sweep engine: a softmax-regression DP-SGD sweep timed on
    its compiled calls (best of three), counted as :func:`glm_flops`. Returns the rate and how it
    was got.
    """
    import jax

    from dpprep import models, sweeps
    from dpprep.algorithms import Hyper, TrainConfig
    from dpprep.plan import DPPlan

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = rng.integers(0, k, size=n)
    model = models.softmax_regression(d, k)
    plan = DPPlan.create(
        "poisson",
        n,
        batch_size=batch,
        steps=steps,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=1e-5,
    )
    config = TrainConfig(model, Hyper(0.1), plan)
    keys = jax.random.split(jax.random.key(0), seeds)
    run = lambda: sweeps.sweep_points(  # noqa: E731
        config,
        model.init(None),
        (x, y),
        keys,
        {"learning_rate": np.linspace(0.01, 1.0, points)},
        return_params=True,
    )
    run()  # compiles
    seconds = math.inf
    # best of three: the machine's rate, not a moment of contention (the CPU is shared)
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(run().params)  # params kept: without an output XLA drops the training
        seconds = min(seconds, time.perf_counter() - start)
    flops = glm_flops(d, k, seeds * points * steps * batch)
    return (
        flops / seconds,
        (
            f"softmax-regression sweep d={d}, k={k}, B={batch}, {steps} steps, {points} points × "
            f"{seeds} seeds: {flops:.3g} FLOP in {seconds:.2f} s"
        ),
    )


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


def plan_rows(
    selected: Sequence[str],
    profile: str,
    cpu_rate: float,
    gpu_flops: float,
    measured_in: Sequence[tuple[str, Path]] = (),
) -> list[dict[str, str]]:
    """One row per experiment: units, FLOPs, peak memory, CPU and GPU projections and basis, and
    what ``measured_in`` (``(profile, results directory)`` pairs) holds of it already computed."""
    for label, rate in (("cpu_rate", cpu_rate), ("gpu_flops", gpu_flops)):
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
            raise ValueError(f"{label} must be a finite number of FLOP/s > 0, got {rate!r}")
    rows = []
    for experiment_id in selected:
        c = cost(experiment_id, profile)
        if c.flops is None:
            cpu = gpu = "—"
        elif c.cheap and c.flops == 0:
            cpu = gpu = "seconds (accounting)"
        # cheap work with counted FLOPs (e.g. estimators on small data) is projected like the rest
        else:
            at_least = "≥ " if c.floor else ""
            label = " (projection, floor)" if c.floor else " (projection)"
            cpu = f"{at_least}{_duration(c.flops / cpu_rate)}{label}"
            gpu = f"{at_least}{_duration(c.flops / gpu_flops)}{label}"
        rows.append(
            {
                "experiment": experiment_id,
                "units": "—" if c.units is None else str(c.units),
                "FLOPs": "—" if c.flops is None else ("~0" if c.flops == 0 else f"{c.flops:.3g}"),
                "peak memory": _bytes(c.peak_bytes),
                "CPU time": cpu,
                "GPU time": gpu,
                "basis": c.basis,
                "measured here": measured_note(experiment_id, measured_in),
            }
        )
    return rows


def plan_report(
    selected: Sequence[str],
    profile: str,
    gpu_flops: float,
    cpu_rate: tuple[float, str] | None = None,
    measured_in: Sequence[tuple[str, Path]] = (),
) -> str:
    """The ``--plan`` text for ``selected`` at ``profile``: a header saying what is measured and
    what projected, then a markdown table. ``cpu_rate`` (rate, how): given by tests; else measured.
    ``measured_in``: ``(profile, results directory)`` pairs whose unit files' recorded computing
    times fill the "measured here" column (e.g. the paper profile's own partial run and the quick
    one).
    """
    rate, how = cpu_rate if cpu_rate is not None else measured_sweep_rate()
    columns = [
        "experiment",
        "units",
        "FLOPs",
        "peak memory",
        "CPU time",
        "GPU time",
        "basis",
        "measured here",
    ]
    lines = [
        (
            f"PLAN of profile {profile!r}: no unit computed. Times are PROJECTIONS (FLOPs ÷ rate),"
            " not measurements."
        ),
        f"CPU rate: {rate:.3g} FLOP/s, MEASURED now on this machine ({how}).",
        f"GPU rate: {gpu_flops:.3g} FLOP/s, a STATED assumption (--gpu-flops); no GPU was run.",
        (
            "FLOPs: analytic counts (GLM: 4dk + 2d + 8k per example-step); peak memory: estimated"
            " from the grid's memory budget and data sizes."
        ),
        (
            "Work that is not one large GLM sweep (eigendecompositions, many small runs, Python"
            " loops) runs below the measured rate: its CPU projection is a floor."
        ),
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
