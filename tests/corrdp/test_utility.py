"""The §5.1 utility protocol (Wang, Zhang & Cummings 2026): objectives against the library models'
losses, the exact minimiser, the gradient bound, accuracy, and the TV factors of a dataset."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import models
from dpprep.corrdp import noise, utility
from dpprep.corrdp.data import CorrDPData, load_corrdp
from dpprep.corrdp.tv import plugin_tv_factors

RNG = np.random.default_rng(3)
N, D = 60, 4
X = RNG.normal(size=(N, D)).astype(np.float32)
Y_REAL = (X @ np.array([1.0, -2.0, 0.5, 0.0]) + RNG.normal(size=N)).astype(np.float32)
Y_BIN = (RNG.random(N) < 0.5).astype(np.float32)


def _model(kind):
    if kind == "ridge":
        return models.linear_regression(D, ridge=1.0 / N, fit_intercept=False), Y_REAL
    if kind == "ols":
        return models.linear_regression(D, fit_intercept=False), Y_REAL
    return models.logistic_regression(D, fit_intercept=False), Y_BIN


@pytest.mark.parametrize("kind", utility.GLM_OBJECTIVES)
def test_objective_is_the_library_models_loss(kind):
    model, y = _model(kind)
    w = RNG.normal(size=(2, 3, D))  # a stack of weight vectors
    got = utility.objective(kind, X, y, w)
    assert got.shape == (2, 3) and got.dtype == np.float64
    want = [
        [float(model.loss({"w": jnp.asarray(v[:, None], jnp.float32)}, X, y)) for v in row]
        for row in w
    ]
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("kind", ["ridge", "ols"])
def test_exact_minimiser_is_stationary_and_minimal(kind):
    theta = utility.exact_minimizer(kind, X, Y_REAL)
    x, y = X.astype(np.float64), Y_REAL.astype(np.float64)
    grad = 2.0 / N * x.T @ (x @ theta - y) + (2.0 * theta / N if kind == "ridge" else 0.0)
    np.testing.assert_allclose(grad, 0.0, atol=1e-12)
    f_hat = utility.objective(kind, X, Y_REAL, theta)
    others = theta + 1e-3 * RNG.normal(size=(20, D))
    assert np.all(utility.objective(kind, X, Y_REAL, others) > f_hat)


@pytest.mark.parametrize("kind", utility.GLM_OBJECTIVES)
def test_gradient_bound_bounds_every_per_example_gradient(kind):
    model, y = _model(kind)
    theta = (
        utility.exact_minimizer(kind, X, y) if kind != "logistic" else RNG.normal(size=D)
    ).astype(np.float32)
    bound = utility.gradient_bound(kind, X, y, theta if kind != "logistic" else None)
    params = {"w": jnp.asarray(theta[:, None])}
    grads = jax.vmap(
        jax.grad(lambda p, xi, yi: model.per_example_loss(p, xi[None], yi[None])[0]),
        in_axes=(None, 0, 0),
    )(params, X, y)["w"]
    norms = np.linalg.norm(np.asarray(grads).reshape(N, -1), axis=1)
    assert np.all(norms <= bound * (1 + 1e-5))
    if kind == "logistic":  # max‖x‖: |σ(z) − y| < 1, so not attained
        assert bound == pytest.approx(np.linalg.norm(X, axis=1).max(), rel=1e-6)
    else:  # least squares at θ̂: the largest per-example gradient of the data
        assert norms.max() == pytest.approx(bound, rel=1e-4)
        with pytest.raises(ValueError, match="theta_hat"):
            utility.gradient_bound(kind, X, y)


def test_accuracy_pp_counts_correct_predictions():
    model, y = _model("logistic")
    w = RNG.normal(size=(5, D))
    got = utility.accuracy_pp(X, y, w)
    for value, v in zip(got, w):
        k = int(np.sum((X.astype(np.float64) @ v > 0) == (y > 0.5)))
        assert value == 100.0 * k / N
        lib = float(models.accuracy(model, {"w": jnp.asarray(v[:, None], jnp.float32)}, X, y))
        assert value == pytest.approx(100.0 * lib, abs=1e-4)


def test_dataset_tv_synthetic_plugin_and_population():
    data = load_corrdp("synthetic")
    tv = utility.dataset_tv(data, 1e-4)
    np.testing.assert_array_equal(
        tv, plugin_tv_factors(data.x, data.sensitive, data.insensitive, delta=1e-4)
    )
    population = utility.dataset_tv(data, 1e-4, population=True)
    np.testing.assert_allclose(population, 0.364, atol=1e-3)  # the spec's population TV at m_s = 10
    factors = noise.method_factors(
        "corrdp", data.m, data.sensitive, tv, insensitive=data.insensitive
    )
    np.testing.assert_array_equal(factors[list(data.sensitive)], 1.0)
    np.testing.assert_array_equal(factors[sorted(data.insensitive)], tv)


def test_dataset_tv_real_data_uses_the_paper_factors_per_column():
    x = RNG.normal(size=(10, 5))
    data = CorrDPData(
        "toy",
        x,
        np.zeros(10),
        "regression",
        tuple("abcde"),
        sensitive=(0, 2),
        insensitive=(1, 3),
        insensitive_groups={"g": (3,), "h": (1,)},
        intercept=4,
        paper_factors={"g": 0.25, "h": 0.5},
        description="toy",
    )
    np.testing.assert_array_equal(utility.dataset_tv(data, 1e-5), [0.5, 0.25])  # columns 1, 3
    with pytest.raises(ValueError, match="population"):
        utility.dataset_tv(data, 1e-5, population=True)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: utility.objective("lasso", X, Y_REAL, np.zeros(D)), "kind"),
        (lambda: utility.objective("ols", X, Y_REAL, np.zeros(D + 1)), "features"),
        (lambda: utility.exact_minimizer("logistic", X, Y_BIN), "kind"),
        (lambda: utility.accuracy_pp(X, Y_BIN[:-1], np.zeros(D)), "y"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
