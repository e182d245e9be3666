"""sweep_datasets: units with their own datasets × shared points equal separate train() calls."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dpprep.optimizers import L2BallProjection
from dpprep import models
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.sweeps import evaluate, sweep_datasets


def _setup():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((3, 64, 4)) * 0.3
    y = (rng.random(64) < 0.5).astype(np.float32)
    model = models.logistic_regression(4, fit_intercept=False)
    config = TrainConfig(model=model, hyper=Hyper(learning_rate=0.1, noise_std=0.0), extensions=(L2BallProjection(1.0),), sampling="full",
                         steps=15, iterates="average")
    return xs, y, model, config


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_equals_separate_runs(chunk_size):
    xs, y, model, config = _setup()
    keys = jax.random.split(jax.random.key(1), 3)
    stds, lrs = np.array([0.5, 2.0, 4.0]), np.array([0.3, 1.0])
    x_eval = np.random.default_rng(1).standard_normal((50, 4)) * 0.3
    y_eval = (np.random.default_rng(2).random(50) < 0.5).astype(np.float32)
    chunks = []
    out = sweep_datasets(config, model.init(keys[0]), xs, y, keys, {"noise_std": stds}, {"learning_rate": lrs},
                         eval_data=(x_eval, y_eval), chunk_size=chunk_size, on_chunk=lambda *a: chunks.append(a))
    assert chunks == ([(0, 1), (1, 1)] if chunk_size is None else [(0, 2), (1, 2), (2, 2)])
    own = sweep_datasets(config, model.init(keys[0]), xs, y, keys, {"noise_std": stds}, {"learning_rate": lrs})
    assert out["loss"].shape == (3, 2) == own["loss"].shape
    for u in range(3):
        for p in range(2):
            cfg = TrainConfig(model=model, hyper=Hyper(learning_rate=lrs[p], noise_std=stds[u]), extensions=(L2BallProjection(1.0),),
                              sampling="full", steps=15, iterates="average")
            params, _ = train(cfg, model.init(keys[u]), (xs[u], y), keys[u])
            ref = evaluate(model, params, x_eval, y_eval)["loss"]
            assert out["loss"][u, p] == pytest.approx(float(ref), rel=1e-5)
            assert own["loss"][u, p] == pytest.approx(float(evaluate(model, params, xs[u], y)["loss"]), rel=1e-5)


def test_bad_input():
    xs, y, model, config = _setup()
    keys = jax.random.split(jax.random.key(1), 3)
    p0 = model.init(keys[0])
    with pytest.raises(ValueError, match="xs"):
        sweep_datasets(config, p0, xs[0], y, keys, {"noise_std": [1.0]}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="keys"):
        sweep_datasets(config, p0, xs, y, keys[:2], {"noise_std": [1.0] * 3}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="units"):
        sweep_datasets(config, p0, xs, y, keys, {"noise_std": [1.0] * 2}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="either per unit or per point"):
        sweep_datasets(config, p0, xs, y, keys, {"learning_rate": [0.1] * 3}, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="noise_std"):
        sweep_datasets(config, p0, xs, y, keys, {"noise_std": [-1.0] * 3}, {"learning_rate": [0.1]})
