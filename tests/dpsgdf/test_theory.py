"""Algorithms 1-2 of Sun et al. (2024): the per-example and type-collapsed paths agree exactly given
the same draws; the surrogates behave; the counter-example is as specified."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpprep.dpsgdf import theory as th


def test_counterexample_generator():
    x, y = th.counterexample(6, 100.0)
    assert x.shape == (6, 2) and np.all(x[:, 0] == 100.0)
    assert list(x[:, 1]) == [1, 1, 1, -1, -1, -1] and list(y) == [1, 1, 1, -1, -1, -1]
    _, y2 = th.counterexample(6, 100.0, flip=True)
    assert np.all(y2 == -y)
    assert th.hinge_loss(np.array([0.0, 1.0]), x, y) == 0.0  # w' = (0, 1) is optimal on D'
    assert th.hinge_loss(np.array([0.0, -1.0]), x, y2) == 0.0  # w'' = (0, -1) on D''
    with pytest.raises(ValueError, match="n"):
        th.counterexample(5, 1.0)


@pytest.mark.parametrize("sampling", ["replacement", "poisson"])
def test_type_collapsed_equals_per_example_with_the_same_draws(sampling):
    n, mu, steps, b = 40, 30.0, 15, 8
    x, y = th.counterexample(n, mu)
    rng = np.random.default_rng(0)
    if sampling == "replacement":
        batches = [rng.integers(0, n, size=b) for _ in range(steps)]
    else:
        batches = [np.flatnonzero(rng.random(n) < 0.3) for _ in range(steps)]
    noise = rng.standard_normal((steps, 2))
    clip, lr, s, norm = 5.0, 0.7, 2.0, 12.0
    per = th.dpsgd_linear(
        x,
        y,
        clip=clip,
        lr=lr,
        steps=steps,
        batch_size=b,
        stddev=s,
        normalize_by=norm,
        draws={"batches": batches, "noise": noise},
    )
    xt, yt, _ = th.counterexample_types(mu)
    counts = np.array([[np.sum(bt < n // 2), np.sum(bt >= n // 2)] for bt in batches], float)
    col = th.simulate_types(
        xt,
        yt,
        lambda t: counts[t][None],
        clip=clip,
        lr=lr,
        stddev=s,
        normalize_by=norm,
        steps=steps,
        rng=rng,
        noise=lambda t: noise[t][None],
    )
    np.testing.assert_allclose(col["last"][0], per["last"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(col["average"][0], per["average"], rtol=1e-12, atol=1e-12)
    fast = th.simulate_counterexample(
        mu,
        lambda t: counts[t][:1],
        lambda t: counts[t][1:],
        clip=clip,
        lr=lr,
        stddev=s,
        normalize_by=norm,
        steps=steps,
        rng=rng,
        noise=lambda t: noise[t][None],
    )
    np.testing.assert_allclose(fast["average"][0], per["average"], rtol=1e-10, atol=1e-12)


def test_alg1_constants():
    assert th.alg1_sigma(1000, 1.0, 1e-5, 1.0, 100) == pytest.approx(
        math.sqrt(800 * math.log(1e5)) / 1000
    )
    assert th.alg1_batch_size(10000, 1.0, 100) == 500
    assert th.alg1_batch_size(10, 0.5, 1000) == 1


def test_priv_quantile_and_adaptive_mean():
    rng = np.random.default_rng(1)
    values = np.concatenate([np.full(5000, 3.0), np.full(5000, 4.0)])
    med = th.priv_quantile_em(values, -100, 100, 5000, 1.0, rng, 20001)
    assert 2.9 <= med <= 4.1
    high = th.priv_quantile_em(
        values, 0, 200, th.high_quantile_rank(10000, 1.0, 20001), 1.0, rng, 20001
    )
    assert 3.9 <= high <= 4.1  # the gap rule keeps it at the data, not above it
    x, _ = th.counterexample(10000, 1e4)
    mu = th.priv_mean_adaptive(x, math.sqrt(1e8 + 1), 1.0, 1e-5, rng, 200001)
    assert np.linalg.norm(mu - np.array([1e4, 0.0])) < 1.0  # error ~ spread, not ~ R = 1e4


def test_algorithm2_translation_is_lossless():
    """Lemma 5 / step 6: w·x + b = θ''·(x − μ̂, τ) for unclipped points."""
    rng = np.random.default_rng(2)
    theta, mu, tau = rng.normal(size=3), rng.normal(size=2), 2.5
    w, b = th.algorithm2_map_back(theta, mu, tau)
    x = rng.normal(size=(5, 2))
    np.testing.assert_allclose(
        x @ w + b, np.concatenate([x - mu, np.full((5, 1), tau)], axis=1) @ theta
    )
    x, y = th.counterexample(2000, 1e3)
    w, b = th.dpsgdf_theory(
        x, y, 1.0, 1e-5, math.sqrt(1e6 + 1), lr=1.0, steps=100, q=1.0, rng=rng, grid_points=20001
    )
    assert th.accuracy(np.append(w, b), np.hstack([x, np.ones((len(x), 1))]), y) == 1.0
