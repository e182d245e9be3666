"""Sun, Suresh & Menon (2024) Table 1 with the tuning paid, the units: one private selection
(DPSGD-F or DPSGD; the search, its end-to-end account and the chosen model's test accuracy) and
the non-private reference tuned on exact validation accuracy."""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpprep import data, dpsgdf, streams
from dpprep.algorithms import train
from dpprep.data import DataNotFoundError
from dpprep.selection import PrivateSelection, Repetitions, select, split, training_only
from dpprep.sweeps import evaluate

from .config import DELTA, MEAN_STREAM, SEED, Grid


def load(grid: Grid, data_dir) -> dict | None:
    try:
        ds = data.load("mnist", data_dir)
    except DataNotFoundError:
        return None
    x, y = ds.x_train, ds.y_train
    if grid.subset:
        x, y = x[: grid.subset], y[: grid.subset]
    return {
        "unit": dpsgdf.unit_normalize(x),
        "y": np.asarray(y, np.int32),
        "x_test_unit": dpsgdf.unit_normalize(ds.x_test),
        "y_test": np.asarray(ds.y_test, np.int32),
        "num_classes": int(ds.num_classes),
    }


def _test_accuracy(
    config, params, feature_norm: float, mu_hat: np.ndarray | None, ds: dict
) -> float:
    corrected = dpsgdf.bias_correct(params, mu_hat) if mu_hat is not None else params
    xt = jnp.asarray(np.float32(feature_norm) * ds["x_test_unit"])
    return float(evaluate(config.model, corrected, xt, jnp.asarray(ds["y_test"]))["accuracy"])


def run_private(method: str, eps: float, grid: Grid, ds: dict, draw: int = 0) -> dict:
    """One private selection (the ``draw``-th of its cell): the search, its end-to-end account and
    the chosen model's test accuracy."""
    key = jax.random.fold_in(
        jax.random.key(SEED), int(round(eps * 1000)) * 2 + (method == "dpsgdf")
    )
    if draw:  # draw 0 keeps the key of the single-draw protocol
        key = jax.random.fold_in(key, draw)
    d, k = ds["unit"].shape[1], ds["num_classes"]
    cfg = dpsgdf.DpsgdfConfig(
        method=method,
        epsilon=eps,
        delta=DELTA,
        eps_F=grid.eps_fs[0] if method == "dpsgdf" else None,
        feature_norm=grid.feature_norms[0],
        batch_size=grid.batch_size,
        epochs=grid.epochs,
        iterates="last",
    )
    # the split select makes
    (x_train, _), _ = split((ds["unit"], ds["y"]), grid.validation_size, key)
    n_train = x_train.shape[0]
    fixed: tuple = ()
    means: dict[float, np.ndarray] = {}
    if method == "dpsgdf":
        unit_mean = np.mean(np.asarray(x_train, np.float64), axis=0)
        for i, eps_f in enumerate(grid.eps_fs):  # one release per ε_F, each composed once
            s = dpsgdf.mean_sensitivity_factor(cfg.neighboring_relation) * dpsgdf.mean_sigma(
                eps_f, DELTA
            )
            xi = jax.random.normal(
                jax.random.fold_in(streams.stream(key, MEAN_STREAM), i), (d,), jnp.float32
            )
            means[eps_f] = dpsgdf.mean_from_parts(unit_mean, n_train, 1.0, s, xi)  # μ̂ at C_F = 1
            fixed += (dpsgdf.mean_event(eps_f, DELTA, cfg.neighboring_relation),)
        points = list(itertools.product(grid.feature_norms, grid.learning_rates, grid.eps_fs))
        search = {
            "feature_scale": [c for c, _, _ in points],
            "learning_rate": [lr for _, lr, _ in points],
            "feature_shift": np.stack([np.float32(c) * means[f] for c, _, f in points]),
        }
    else:
        points = [
            (c, lr, None) for c, lr in itertools.product(grid.feature_norms, grid.learning_rates)
        ]
        search = {
            "feature_scale": [c for c, _, _ in points],
            "learning_rate": [lr for _, lr, _ in points],
        }
    selection = PrivateSelection(
        Repetitions(grid.mean_candidates, 1.0), grid.score_noise, grid.validation_size, fixed
    )
    plan = selection.plan(
        cfg.sampler,
        ds["unit"].shape[0],
        batch_size=cfg.batch_size,
        epochs=cfg.epochs,
        l2_clip_norm=cfg.l2_clip_norm,
        delta=DELTA,
        target_epsilon=eps,
        neighboring_relation=cfg.neighboring_relation,
    )
    config = dpsgdf.train_config(cfg, plan, d, k)
    result = select(
        config, config.model.init(None), (ds["unit"], ds["y"]), key, search, chunk_size=1
    )
    paper_style = training_only(plan.execution, result.noise_multiplier, DELTA, fixed_events=fixed)
    out: dict[str, Any] = {
        "method": method,
        "epsilon_target": eps,
        "draw": draw,
        "z": result.noise_multiplier,
        **result.accounting.as_row(),
        "epsilon_training_only_same_run": paper_style.epsilon,
        "grid_points": len(points),
        "mean_K": grid.mean_candidates,
        "score_noise": grid.score_noise,
        "validation_size": grid.validation_size,
    }
    if result.params is None:  # the Poisson K = 0 cannot happen with the geometric; kept for safety
        return {**out, "test_accuracy": None}
    best = result.diagnostics["best"]
    c, lr, f = points[int(result.diagnostics["grid_indices"][best])]
    mu_hat = np.float32(c) * means[f] if f is not None else None
    return {
        **out,
        "C_F": c,
        "lr": lr,
        "eps_F": f,
        "noisy_validation_score": result.score,
        "test_accuracy": 100 * _test_accuracy(config, result.params, c, mu_hat, ds),
    }


def run_nonprivate(grid: Grid, ds: dict) -> dict:
    """Non-private SGD: η chosen by exact validation accuracy on the same kind of split (nothing
    charged)."""
    key = jax.random.key(SEED)
    (xs, ys), (xv, yv) = split((ds["unit"], ds["y"]), grid.validation_size, key)
    d, k = xs.shape[1], ds["num_classes"]
    best: tuple[float, float, float] | None = None
    for lr in grid.np_learning_rates:
        cfg = dpsgdf.DpsgdfConfig(
            method="nonprivate",
            epsilon=None,
            eps_F=None,
            feature_norm=grid.np_feature_norm,
            batch_size=grid.np_batch_size,
            epochs=grid.np_epochs,
            learning_rate=lr,
            iterates="last",
        )
        config = dpsgdf.train_config(cfg, dpsgdf.plan(cfg, xs.shape[0]), d, k)
        scale = np.float32(grid.np_feature_norm)
        params, _ = train(config, config.model.init(None), (scale * xs, ys), key)
        val = float(
            evaluate(config.model, params, jnp.asarray(scale * xv), jnp.asarray(yv))["accuracy"]
        )
        if best is None or val > best[1]:
            best = (lr, val, _test_accuracy(config, params, grid.np_feature_norm, None, ds))
    assert best is not None
    return {
        "method": "nonprivate",
        "epsilon_target": None,
        "epsilon_end_to_end": math.inf,
        "charged": "nothing",
        "lr": best[0],
        "C_F": grid.np_feature_norm,
        "validation_accuracy": best[1],
        "test_accuracy": 100 * best[2],
    }
