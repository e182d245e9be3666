"""What Table 1's units compute: the data they train on, their groups run through the store, rows.

:func:`prepare_dataset` turns each unit into a :func:`dpprep.dpsgdf.grid_group` (noise multipliers
calibrated once per unit and cached) and submits it; :func:`collect_rows` runs every dataset's
units in one ``run_many`` (so ``run_all --shard`` spreads them all) and returns one row per
(model, seed) (:func:`rows_for`).
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pandas as pd

from dpprep import data, dpsgdf, sweeps
from dpprep.data import DataNotFoundError
from experiments import RunContext, results

from .config import DELTA, Grid
from .units import Unit, build_units, seed_keys


class _Collect:
    """A store stand-in that only collects ``run_groups``' units, so the grid of every dataset is
    submitted to the real store in ONE ``run_many`` call (``run_all --shard`` spreads the whole
    grid; one call, not one per dataset)."""

    def __init__(self) -> None:
        self.items: list = []
        self.costs: list | None = []  # each unit's size (results.group_cost), for the progress ETA

    def run_many(self, items, costs=None):
        self.items.extend(items)
        # Units differ ~100x in size (B, E, models): the ETA weights by it where every unit has one.
        self.costs = None if costs is None or self.costs is None else self.costs + list(costs)
        return [None] * len(items)


def load_dataset(name: str, grid: Grid, data_dir) -> dict | None:
    try:
        ds = data.load(name, data_dir)
    except DataNotFoundError:
        return None
    x, y = ds.x_train, ds.y_train
    if grid.subset:
        x, y = x[: grid.subset], y[: grid.subset]
    unit = dpsgdf.unit_normalize(x)
    return {
        "name": name,
        # in every unit's key: a user-supplied file replaced recomputes its units
        "inputs": results.data_identity(ds),
        "x_raw": np.asarray(x, np.float32),
        "unit": unit,
        "y": np.asarray(y),
        "unit_mean": unit.astype(np.float64).mean(axis=0),
        "x_test_unit": dpsgdf.unit_normalize(ds.x_test),
        "x_test_raw": np.asarray(ds.x_test, np.float32),
        "y_test": np.asarray(ds.y_test),
        "num_classes": int(ds.num_classes),
    }


def prepare_dataset(
    ctx: RunContext, ds: dict, grid: Grid, collect: _Collect, units: Sequence[Unit] | None = None
) -> list[tuple[Unit, sweeps.Group]]:
    """Every unit of one dataset (``units``, default :func:`build_units`) as a group, submitted to
    ``collect``. A unit's noise multipliers are a unit of their own (calibrated once, kept on
    disk), so a resumed run neither recalibrates nor recomputes a finished unit. A unit of
    ``s`` seeds uses the first ``s`` of the profile's seed keys (of ``s`` keys when ``s`` exceeds
    the profile's seeds, as the spread rerun's do; :func:`seed_keys` of more seeds extends those of
    fewer), so seed ``i`` is the same random stream under every protocol and stage."""
    n = ds["unit"].shape[0]
    out = []
    for unit in build_units(ds, grid) if units is None else units:
        private = unit.models[0].method != "nonprivate"
        owner = unit.calibration or unit.key
        source = (
            next((u for u in build_units(ds, grid) if u.key == owner), unit)
            if unit.calibration
            else unit
        )
        zs = (
            ctx.store.run(
                owner + "/calibration",
                lambda u=source: dpsgdf.calibrate_models(
                    u.models, u.batch_size, u.epochs, n, delta=DELTA, unit=u.key
                ),
            )
            if private
            else None
        )
        keys = seed_keys(ds["name"], max(grid.seeds, unit.seeds))[: unit.seeds]
        mean = np.zeros(ds["unit"].shape[1]) if unit.variant == "raw_pixels" else ds["unit_mean"]
        group = dpsgdf.grid_group(
            unit.key,
            list(unit.models),
            unit.batch_size,
            unit.epochs,
            n,
            mean,
            keys,
            num_classes=ds["num_classes"],
            matmul_precision=grid.matmul_precision,
            delta=DELTA,
            noise_multipliers=zs,
            **dict(unit.options),
        )
        x, xt = (
            (ds["x_raw"], ds["x_test_raw"])
            if unit.variant == "raw_pixels"
            else (ds["unit"], ds["x_test_unit"])
        )
        results.run_groups(
            [group],
            group.config.model.init(None),
            (x, ds["y"]),
            keys,
            collect,
            eval_data=(xt, ds["y_test"]),
            progress=ctx.progress,
            memory_budget=grid.memory_budget,
        )
        out.append((unit, group))
    return out


def rows_for(unit: Unit, group: sweeps.Group, record: dict) -> list[dict]:
    """One row per (model, seed) of a finished unit."""
    acc_last = np.asarray(record["evaluation"]["last"]["accuracy"])
    acc_avg = np.asarray(record["evaluation"]["average"]["accuracy"])
    z = group.points.get("noise_multiplier")
    rows = []
    for p, m in enumerate(unit.models):
        for s in range(acc_last.shape[0]):
            rows.append(
                {
                    **unit.meta,
                    "method": m.method,
                    "eps_F": m.eps_F,
                    "C_F": m.feature_norm,
                    "lr": m.learning_rate,
                    "seed": s,
                    "z": None if z is None else float(z[p]),
                    "acc_last": 100 * float(acc_last[s, p]),
                    "acc_average": 100 * float(acc_avg[s, p]),
                    "group": group.key,
                    "stage": unit.stage,
                }
            )
    return rows


def collect_rows(
    ctx: RunContext, datasets: dict[str, dict], grid: Grid, units_for
) -> tuple[pd.DataFrame, list[Unit]]:
    """Submits every dataset's units (``units_for(ds)``) to the store in ONE ``run_many`` (so
    ``run_all --shard`` spreads them all) and returns their rows and the units."""
    prepared, collect = [], _Collect()
    for ds in datasets.values():
        units = units_for(ds)
        if units:
            prepared += prepare_dataset(ctx, ds, grid, collect, units)
    if not prepared:
        return pd.DataFrame(), []
    start = time.perf_counter()
    records = ctx.store.run_many(collect.items, costs=collect.costs)
    ctx.progress(f"{len(records)} units in {time.perf_counter() - start:.1f}s")
    rows = [
        row
        for (unit, group), record in zip(prepared, records)
        for row in rows_for(unit, group, record)
    ]
    return pd.DataFrame(rows), [unit for unit, _ in prepared]
