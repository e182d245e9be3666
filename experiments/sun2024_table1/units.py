"""What Table 1's units are: their models, seeds and keys, for the search and its reruns.

One resumable unit per (dataset, ε, B, E[, variant]) whose models share one Poisson batch per seed
and step (:func:`build_units`); the staged search's second stage (:func:`stage2_units`) and the
C16 spread rerun (:func:`spread_units`) cut a search unit down to the selected configurations.
A unit's key names its dataset (and the content of a user-supplied data file:
:func:`experiments.results.data_identity`), ε, B, E, stage and a digest of its models, seeds,
training rows and matmul precision: what it computes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Sequence

import jax
import pandas as pd

from dpprep import dpsgdf

from .config import Grid
from .selection import _filled


def _digest(obj: Any) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


def seed_keys(name: str, seeds: int) -> jax.Array:
    """The seeds' keys (the same for every method, ε, B and E of a dataset: common random
    numbers)."""
    return jax.random.split(jax.random.key(int(_digest(name)[:6], 16)), seeds)


@dataclasses.dataclass(frozen=True)
class Unit:
    """One resumable unit: a (dataset, ε, B, E[, variant]) group of models. ``stage``: ``"full"``
    (the full search, and the sensitivity variants under either protocol), ``"stage1"`` or
    ``"stage2"`` (staged search); ``calibration``: the unit whose noise multipliers it reuses
    (stage 2 reuses stage 1's, which cover its models), else its own."""

    key: str
    meta: dict
    models: tuple
    batch_size: int
    epochs: float
    seeds: int
    variant: str = "main"
    options: tuple = ()  # extra keywords of dpsgdf.grid_group, as (name, value) pairs
    stage: str = "full"
    calibration: str | None = None


def _unit_digest(models: Sequence[dpsgdf.GridModel], seeds: int, n: int, grid: Grid) -> str:
    return _digest([dataclasses.astuple(m) for m in models] + [seeds, n, grid.matmul_precision])


def _private_models(grid: Grid, eps: float) -> tuple[dpsgdf.GridModel, ...]:
    return tuple(
        dpsgdf.grid_models(
            ["dpsgdf", "dpsgd"], grid.feature_norms, grid.learning_rates, grid.eps_fs, eps
        )
    )


def _nonprivate_models(grid: Grid) -> tuple[dpsgdf.GridModel, ...]:
    return tuple(
        dpsgdf.grid_models(["nonprivate"], grid.np_feature_norms, grid.np_learning_rates, (), None)
    )


def _main_key(name: str, eps: float | None, b: int, e: float, tag: str) -> str:
    """``<dataset>/eps=<ε>/B=<B>/E=<E>/main/<tag>`` (private) or
    ``<dataset>/nonprivate/B=…/E=…/<tag>``."""
    return (
        f"{name}/eps={eps:g}/B={b}/E={e:g}/main/{tag}"
        if eps is not None
        else f"{name}/nonprivate/B={b}/E={e:g}/{tag}"
    )


def build_units(ds: dict, grid: Grid) -> list[Unit]:
    """Every unit of one dataset computed before any selection: the main grid and non-private
    (all seeds under ``search="full"``; seed 0 only, keyed ``…/stage1/…``, under ``"staged"``)
    and the A15 sensitivity variants (all their seeds under either protocol). Under
    ``search="full"`` the units and keys are those of the full search before staged search
    existed, so cached results stay valid."""
    n = ds["unit"].shape[0]
    name = ds["name"]
    keyed = name + ds.get("inputs", "")  # the keys' dataset: its content for a user's file
    staged = grid.search == "staged"
    seeds, stage = (1, "stage1") if staged else (grid.seeds, "full")

    def tag(models: tuple) -> str:
        digest = _unit_digest(models, seeds, n, grid)
        return f"stage1/{digest}" if staged else digest

    out = []
    for eps in grid.epsilons:
        models = _private_models(grid, eps)
        for b, e in grid.private_groups:
            out.append(
                Unit(
                    _main_key(keyed, eps, b, e, tag(models)),
                    {"dataset": name, "epsilon": eps, "B": b, "E": e, "variant": "main"},
                    models,
                    b,
                    e,
                    seeds,
                    stage=stage,
                )
            )
    np_models = _nonprivate_models(grid)
    for b, e in grid.np_groups:
        out.append(
            Unit(
                _main_key(keyed, None, b, e, tag(np_models)),
                {"dataset": name, "epsilon": None, "B": b, "E": e, "variant": "main"},
                np_models,
                b,
                e,
                seeds,
                stage=stage,
            )
        )
    digest = lambda models, s: _unit_digest(models, s, n, grid)  # noqa: E731
    if grid.sensitivity_seeds:
        b, e = grid.private_groups[0]
        s = grid.sensitivity_seeds
        nb = tuple(dpsgdf.grid_models(["dpsgd"], grid.feature_norms, grid.learning_rates, (), 1.0))
        out.append(
            Unit(
                f"{keyed}/eps=1/B={b}/E={e:g}/no_bias/{digest(nb, s)}",
                {"dataset": name, "epsilon": 1.0, "B": b, "E": e, "variant": "no_bias"},
                nb,
                b,
                e,
                s,
                "no_bias",
                (("fit_intercept", False),),
            )
        )
        raw = tuple(
            dpsgdf.GridModel("dpsgd", 1.0, None, None, lr) for lr in grid.sens_learning_rates_raw
        )
        out.append(
            Unit(
                f"{keyed}/eps=1/B={b}/E={e:g}/raw_pixels/{digest(raw, s)}",
                {"dataset": name, "epsilon": 1.0, "B": b, "E": e, "variant": "raw_pixels"},
                raw,
                b,
                e,
                s,
                "raw_pixels",
                (("raw_features", True),),
            )
        )
    return out


def stage2_units(
    ds: dict, grid: Grid, stage1_units: Sequence[Unit], chosen: pd.DataFrame
) -> list[Unit]:
    """Stage 2 of the staged search for one dataset: the ``chosen`` configurations (:func:`top_k`
    of stage 1) at every seed of the profile, one unit per (ε, B, E) (private: DPSGD's and
    DPSGD-F's chosen models together, as they share a sampler) or per (B, E) (non-private), its
    models in grid order. Keys end in ``…/stage2/<digest of models and seeds>``, distinct from
    stage 1's and from the full search's; the noise multipliers are stage 1's (same B, E, n, ε)."""
    return _rerun_units(
        ds, grid, [u for u in stage1_units if u.stage == "stage1"], chosen, "stage2", grid.seeds
    )


def spread_units(
    ds: dict, grid: Grid, search_units: Sequence[Unit], best: pd.DataFrame
) -> list[Unit]:
    """The C16 rerun for one dataset: the configuration each Table 1 cell reports (``best``, main
    variant, from :func:`select`) at ``grid.spread_seeds`` seeds, the paper's count of runs behind
    each printed standard deviation (Sun et al. 2024, Table 1: "Each number is an average over 10
    independent runs. The number in the parenthesis represents the standard deviation of the
    accuracy under the optimal parameter settings"), so the spread is tested at the seed count it
    is printed for. One unit per (ε, B, E) (DPSGD's and DPSGD-F's models together, as they share a
    sampler) or per (B, E) (non-private), models in grid order, from the search's main units
    (``search_units``: the full search's, or
    stage 1's under the staged search). Keys end in ``…/spread/<digest of models and seeds>``:
    distinct from every search unit's, and the same under either protocol when both select the
    same configurations. Seed ``i`` has the search's seed-``i`` key (:func:`seed_keys` of more seeds
    extends those of fewer), so its first ``grid.seeds`` runs repeat the search's up to float
    rounding (another compiled shape); the noise multipliers are the search unit's (same B, E, n,
    ε). Empty unless ``grid.rerun_spread``."""
    if not grid.rerun_spread:
        return []
    units = [u for u in search_units if u.variant == "main" and u.stage in ("full", "stage1")]
    return _rerun_units(ds, grid, units, best, "spread", grid.spread_seeds)


def _rerun_units(
    ds: dict, grid: Grid, units: Sequence[Unit], chosen: pd.DataFrame, stage: str, seeds: int
) -> list[Unit]:
    """Each of ``units`` cut to the ``chosen`` configurations of its dataset (main variant) at
    ``seeds`` seeds, as a unit keyed ``…/<stage>/<digest>`` whose noise multipliers are its
    source unit's; units with none of them are dropped."""
    n = ds["unit"].shape[0]
    name = ds["name"]
    keyed = name + ds.get("inputs", "")
    mine = _filled(chosen[(chosen["dataset"] == name) & (chosen["variant"] == "main")])
    picked = {(r.epsilon, r.B, r.E, r.C_F, r.lr, r.eps_F, r.method) for r in mine.itertuples()}
    out = []
    for unit in units:
        eps = -1 if unit.meta["epsilon"] is None else unit.meta["epsilon"]
        models = tuple(
            m
            for m in unit.models
            if (
                eps,
                unit.batch_size,
                unit.epochs,
                -1 if m.feature_norm is None else m.feature_norm,
                m.learning_rate,
                -1 if m.eps_F is None else m.eps_F,
                m.method,
            )
            in picked
        )
        if not models:
            continue
        tag = f"{stage}/" + _unit_digest(models, seeds, n, grid)
        out.append(
            Unit(
                _main_key(keyed, unit.meta["epsilon"], unit.batch_size, unit.epochs, tag),
                dict(unit.meta),
                models,
                unit.batch_size,
                unit.epochs,
                seeds,
                stage=stage,
                calibration=unit.key,
            )
        )
    return out
