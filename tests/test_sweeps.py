"""Sweeps: one vmapped call equals the individual runs; bad grids are rejected before compiling."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import models, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train

RNG = np.random.default_rng(1)
X = RNG.normal(size=(80, 4)).astype(np.float32)
Y = RNG.integers(0, 3, size=80)
MODEL = models.softmax_regression(4, 3)
PARAMS0 = MODEL.init(None)
CONFIG = TrainConfig(MODEL, Hyper(0.5, noise_multiplier=1.0, clip_norm=1.0), sampling="poisson",
                     batch_size=16, steps=25, track_loss=True)


def _assert_close(a, b):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6, atol=1e-6)


def test_sweep_equals_individual_runs():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    lrs, zs = [0.1, 1.0, 3.0], [0.5, 2.0]
    params, metrics = sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=lrs, noise_multiplier=zs)
    assert params["w"].shape == (2, 3, 2, 4, 3) and metrics["loss"].shape == (2, 3, 2, 25)
    for i in range(2):
        for j, lr in enumerate(lrs):
            for k, z in enumerate(zs):
                cfg = dataclasses.replace(CONFIG, hyper=Hyper(lr, noise_multiplier=z, clip_norm=1.0))
                single, single_metrics = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))
                np.testing.assert_allclose(single_metrics["loss"], metrics["loss"][i, j, k], rtol=1e-6, atol=1e-6)
                np.testing.assert_array_equal(single_metrics["batch_size"], metrics["batch_size"][i, j, k])


def test_sweep_over_clip_norm_and_noise_scales():
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    clips = [0.1, 10.0]
    scales = {"w": np.stack([np.ones((4, 1)), np.array([[0.0], [0.0], [1.0], [2.0]])]),
              "b": np.array([1.0, 0.0])}
    params, _ = sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, clip_norm=clips, noise_scales=scales)
    assert params["w"].shape == (2, 2, 2, 4, 3)
    for i in range(2):
        for j, clip in enumerate(clips):
            for k in range(2):
                scale_k = jax.tree_util.tree_map(lambda a: a[k], scales)
                cfg = dataclasses.replace(CONFIG, hyper=Hyper(0.5, 1.0, clip, scale_k))
                single, _ = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))


def test_bad_sweeps_raise():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="cannot sweep"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, batch_size=[8, 16])
    with pytest.raises(ValueError, match="learning_rate"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=[0.1, -1.0])
    with pytest.raises(ValueError, match="clip_norm"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, clip_norm=[0.0, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=0.1)
    with pytest.raises(ValueError, match="keys"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), jnp.zeros(3), learning_rate=[0.1])
    with pytest.raises(ValueError, match="noise_scales"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.full((2, 4, 1), -1.0), "b": np.ones(2)})
    with pytest.raises(ValueError, match="same non-empty leading"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.ones((2, 4, 1)), "b": np.ones(3)})
    scales = {"w": np.stack([np.ones((4, 1)), -np.ones((4, 1))]), "b": np.ones(2)}  # 2nd value bad
    with pytest.raises(ValueError, match="noise_scales must be >= 0"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales=scales)
    with pytest.raises(ValueError, match="broadcast"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.ones((2, 5, 1)), "b": np.ones(2)})
    with pytest.raises(ValueError, match="x contains"):
        sweeps.sweep(CONFIG, PARAMS0, (np.full_like(X, np.nan), Y), keys, learning_rate=[0.1])


def test_fields_not_swept_must_be_scalars():
    """A stacked value of a field that is not an axis is rejected: 3 learning rates would otherwise
    broadcast silently against the 3 classes' columns of w and b."""
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    cfg = dataclasses.replace(CONFIG, hyper=Hyper(np.array([0.1, 0.5, 1.0]), 1.0, 1.0))
    with pytest.raises(ValueError, match="learning_rate must be a scalar"):
        sweeps.sweep(cfg, PARAMS0, (X, Y), keys, noise_multiplier=[0.5, 2.0])
    cfg = dataclasses.replace(CONFIG, hyper=Hyper(0.5, 1.0, np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="clip_norm must be a scalar"):
        sweeps.sweep(cfg, PARAMS0, (X, Y), keys, learning_rate=[0.1, 0.5])


def test_sweep_checks_labels_and_keys():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 3\)"):
        sweeps.sweep(CONFIG, PARAMS0, (X, np.where(np.arange(80) == 7, 3, Y)), keys, learning_rate=[0.1])
    for bad in (np.zeros((2, 2)), np.arange(2), jax.random.PRNGKey(0), 0):
        with pytest.raises(ValueError, match="keys must be a stack of PRNG keys"):
            sweeps.sweep(CONFIG, PARAMS0, (X, Y), bad, learning_rate=[0.1])


def test_per_seed_points_equal_individual_runs():
    """A per-seed field (e.g. DPSGD-F's private mean, whose noise differs per seed) takes
    values[s, p] for seed s and point p; every (seed, point) equals its own train call."""
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    shifts = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    points = {"learning_rate": [0.1, 1.0, 2.0], "feature_scale": [1.0, 3.0, 0.5], "feature_shift": shifts}
    result = sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, points, per_seed=("feature_shift",),
                                 chunk_size=2, eval_data=(X, Y))
    assert result.params["w"].shape == (2, 3, 4, 3)
    for s in range(2):
        for p in range(3):
            hyper = Hyper(points["learning_rate"][p], noise_multiplier=1.0, clip_norm=1.0,
                          feature_scale=points["feature_scale"][p], feature_shift=shifts[s, p])
            single, _ = train(dataclasses.replace(CONFIG, hyper=hyper), PARAMS0, (X, Y), keys[s])
            _assert_close(single, jax.tree_util.tree_map(lambda a: a[s, p], result.params))
    with pytest.raises(ValueError, match="per_seed"):
        sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, points, per_seed=("radius",))
    with pytest.raises(ValueError, match="feature_shift needs a leading axis of 2 seeds"):
        sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, {**points, "feature_shift": shifts[:1]},
                            per_seed=("feature_shift",))
