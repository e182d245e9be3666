"""CorrDP helpers: the paper's noise on the averaged gradient maps to the engine's absolute noise
on the sum, and per-input-feature scales land on the right rows (end to end through a step)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpprep import algorithms, corrdp, models
from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.plan import DPPlan


def test_sum_stddev_maps_the_mean_std_to_the_sum():
    # std 0.01 on a mean over N = 500: std 0.01 · 500 on the sum.
    assert corrdp.sum_stddev(0.01, 500) == pytest.approx(5.0)
    assert corrdp.sum_stddev(0.0, 500) == 0.0
    with pytest.raises(ValueError, match="normalize_by"):
        corrdp.sum_stddev(0.01, 0)
    with pytest.raises(ValueError, match="std_on_mean"):
        corrdp.sum_stddev(-0.01, 10)


def test_feature_scales_put_row_scales_on_the_named_leaf():
    glm = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
    scales = corrdp.feature_scales(glm, [0.0, 1.0, 2.5], "w")
    assert set(scales) == {"w", "b"}
    np.testing.assert_array_equal(
        np.broadcast_to(scales["w"], (3, 2)), [[0, 0], [1, 1], [2.5, 2.5]]
    )
    assert float(scales["b"]) == 1.0
    mlp = models.mlp(3, 4, 2).init(jax.random.PRNGKey(0))
    scales = corrdp.feature_scales(mlp, [0.5, 1.0, 2.0], "w1")
    np.testing.assert_array_equal(np.broadcast_to(scales["w1"], (3, 4))[:, 0], [0.5, 1.0, 2.0])
    for leaf in ("b1", "w2", "b2"):
        assert float(scales[leaf]) == 1.0
    with pytest.raises(ValueError, match=">= 0"):
        corrdp.feature_scales(glm, [1.0, -1.0, 1.0], "w")
    with pytest.raises(ValueError, match="non-finite"):
        corrdp.feature_scales(glm, [1.0, np.nan, 1.0], "w")
    with pytest.raises(ValueError, match="rows"):
        corrdp.feature_scales(glm, [1.0, 2.0], "w")
    with pytest.raises(ValueError, match="leaf"):
        corrdp.feature_scales(glm, [1.0, 2.0, 3.0], "w1")


def test_corrdp_sgd_step_has_std_sigma_sqrt_f_on_the_mean():
    """CorrDP-SGD: unclipped, stddev = sum_stddev(σ, N), scales sqrt(f_j) on row j: one
    full-batch step on zero data gradients (x = 0) moves row j by N(0, σ²·f_j) on the mean."""
    d, n, sigma = 3000, 4, 0.3
    factors = np.tile([0.0, 1.0, 4.0], d // 3)
    model = models.linear_regression(d, fit_intercept=False)
    params0 = model.init(None)
    # The paper's nominal-ε mechanism: a non-private plan (no clipping, no plan noise), the noise
    # is CoordinateNoise's absolute std on the sum.
    hyper = algorithms.Hyper(
        1.0,
        extra={
            "stddev": corrdp.sum_stddev(sigma, n),
            "noise_scales": corrdp.feature_scales(params0, np.sqrt(factors), "w"),
        },
    )
    cfg = algorithms.TrainConfig(
        model, hyper, DPPlan.non_private("full", n, steps=1), extensions=(CoordinateNoise(),)
    )
    params, _ = algorithms.train(
        cfg, params0, (np.zeros((n, d), np.float32), np.zeros(n, np.float32)), jax.random.PRNGKey(0)
    )
    moved = -np.asarray(params["w"], np.float64)[:, 0]  # lr 1: θ1 = −(0 + noise/N)
    np.testing.assert_array_equal(moved[factors == 0], 0.0)
    for f in (1.0, 4.0):
        sample = moved[factors == f] / (sigma * math.sqrt(f))
        assert stats.kstest(sample, "norm").pvalue > 1e-3
        assert stats.kstest(sample * 1.5, "norm").pvalue < 1e-6  # power: std off by 3/2
