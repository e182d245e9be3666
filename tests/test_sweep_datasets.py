"""sweep_datasets: units with their own datasets × shared points equal separate train() calls."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.optimizers import L2BallProjection
from dpprep.plan import DPPlan
from dpprep.sweeps import evaluate, sweep_datasets

N, STEPS, DELTA = 64, 15, 1e-5
STDS = np.array([0.5, 2.0, 4.0])  # per unit: the noise std on the gradient sum


def _plan(private: bool, z: float = 1.0) -> DPPlan:
    """Full-batch GD for 15 steps: private at multiplier ``z`` with C = 1 (noise std z on the sum),
    or non-private (no clipping; the noise is CoordinateNoise's absolute ``stddev``)."""
    if private:
        return DPPlan.create(
            "full", N, steps=STEPS, l2_clip_norm=1.0, noise_multiplier=z, delta=DELTA
        )
    return DPPlan.non_private("full", N, steps=STEPS)


def _setup(private: bool):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((3, N, 4)) * 0.3
    y = (rng.random(N) < 0.5).astype(np.float32)
    model = models.logistic_regression(4, fit_intercept=False)
    extensions = (L2BallProjection(1.0),) if private else (L2BallProjection(1.0), CoordinateNoise())
    config = TrainConfig(
        model=model,
        hyper=Hyper(learning_rate=0.1),
        plan=_plan(private),
        extensions=extensions,
        iterates="average",
    )
    field = "noise_multiplier" if private else "stddev"  # std z·C = z (C = 1), or the std itself
    return xs, y, model, config, field


def _unit_config(config: TrainConfig, field: str, std: float, lr: float) -> TrainConfig:
    """``config`` for one unit's and point's own train call."""
    if field == "noise_multiplier":
        return dataclasses.replace(config, hyper=Hyper(learning_rate=lr), plan=_plan(True, std))
    return dataclasses.replace(config, hyper=Hyper(learning_rate=lr, extra={"stddev": std}))


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.parametrize("private", [True, False], ids=["private", "non_private"])
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_equals_separate_runs(chunk_size, private):
    xs, y, model, config, field = _setup(private)
    keys = jax.random.split(jax.random.key(1), 3)
    lrs = np.array([0.3, 1.0])
    x_eval = np.random.default_rng(1).standard_normal((50, 4)) * 0.3
    y_eval = (np.random.default_rng(2).random(50) < 0.5).astype(np.float32)
    chunks = []
    out = sweep_datasets(
        config,
        model.init(keys[0]),
        xs,
        y,
        keys,
        {field: STDS},
        {"learning_rate": lrs},
        eval_data=(x_eval, y_eval),
        chunk_size=chunk_size,
        on_chunk=lambda *a: chunks.append(a),
    )
    assert chunks == ([(0, 1), (1, 1)] if chunk_size is None else [(0, 2), (1, 2), (2, 2)])
    own = sweep_datasets(
        config, model.init(keys[0]), xs, y, keys, {field: STDS}, {"learning_rate": lrs}
    )
    assert out["loss"].shape == (3, 2) == own["loss"].shape
    # Each run's ε: the plan's account at the unit's multiplier (none in a non-private plan).
    assert out["epsilon"].shape == (3, 2)
    for u in range(3):
        for p in range(2):
            cfg = _unit_config(config, field, STDS[u], lrs[p])
            params, metrics = train(cfg, model.init(keys[u]), (xs[u], y), keys[u])
            ref = evaluate(model, params, x_eval, y_eval)["loss"]
            assert out["loss"][u, p] == pytest.approx(float(ref), rel=1e-5)
            assert own["loss"][u, p] == pytest.approx(
                float(evaluate(model, params, xs[u], y)["loss"]), rel=1e-5
            )
            assert out["epsilon"][u, p] == metrics["epsilon"]
            if private:
                assert out["epsilon"][u, p] == config.plan.epsilon_at(STDS[u])
            else:
                assert out["epsilon"][u, p] == np.inf
    if private:
        # more noise, less ε
        assert out["epsilon"][0, 0] > out["epsilon"][1, 0] > out["epsilon"][2, 0]


def test_bad_input():
    xs, y, model, config, _ = _setup(private=False)
    keys = jax.random.split(jax.random.key(1), 3)
    p0 = model.init(keys[0])
    with pytest.raises(ValueError, match="xs"):
        sweep_datasets(config, p0, xs[0], y, keys, {"stddev": [1.0]}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="keys"):
        sweep_datasets(config, p0, xs, y, keys[:2], {"stddev": [1.0] * 3}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="units"):
        sweep_datasets(config, p0, xs, y, keys, {"stddev": [1.0] * 2}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="either per unit or per point"):
        sweep_datasets(
            config, p0, xs, y, keys, {"learning_rate": [0.1] * 3}, {"learning_rate": [0.1]}
        )
    with pytest.raises(ValueError, match="stddev"):
        sweep_datasets(config, p0, xs, y, keys, {"stddev": [-1.0] * 3}, {"learning_rate": [0.1]})
    # A private plan: every unit's multiplier must be > 0 (a unit without noise has no guarantee).
    _, _, _, private, _ = _setup(private=True)
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        sweep_datasets(
            private,
            p0,
            xs,
            y,
            keys,
            {"noise_multiplier": [1.0, 0.0, 2.0]},
            {"learning_rate": [0.1]},
        )
