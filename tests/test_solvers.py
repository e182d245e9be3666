"""dpprep.solvers.logistic_ball_optimum (θ* of Hu et al. 2024, Figure 3's excess risk) against
closed forms and a direct constrained solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from dpprep.solvers import logistic_ball_optimum, logistic_loss


def _data(seed=0, n=400, d=8):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) * 0.3
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1, keepdims=True))
    y = (rng.random(n) < 1 / (1 + np.exp(-6 * x[:, 0]))).astype(float)
    return rng, x, y


def test_interior_optimum_matches_the_closed_form():
    # x_i = a·e1, a fraction p of labels 1: ℓ̂(θ) = log(1 + e^{aθ1}) − p·aθ1, minimised at σ(aθ1) =
    # p.
    a, p, d = 0.5, 0.75, 3
    x = np.zeros((400, d))
    x[:, 0] = a
    y = (np.arange(400) < p * 400).astype(float)
    theta, loss, mapping = logistic_ball_optimum(x, y, 3.0, 3000)
    expected = math.log(p / (1 - p)) / a  # 2.197 < radius 3: interior
    np.testing.assert_allclose(theta, [expected, 0.0, 0.0], atol=1e-7)
    assert loss == pytest.approx(math.log(1 + math.exp(a * expected)) - p * a * expected, abs=1e-12)
    assert mapping < 1e-8


def test_boundary_optimum_matches_the_closed_form():
    # every label 1 and every row 0.8·u: the loss falls along u, θ* = R·u on the sphere.
    u = np.array([0.6, 0.0, -0.8])
    x, y, radius = np.tile(0.8 * u, (50, 1)), np.ones(50), 1.5
    theta, loss, mapping = logistic_ball_optimum(x, y, radius, 500)
    np.testing.assert_allclose(theta, radius * u, atol=1e-12)
    assert loss == pytest.approx(math.log1p(math.exp(-0.8 * radius)), rel=1e-12)
    assert mapping < 1e-10


@pytest.mark.parametrize("radius", [0.5, 1.0, 4.0])
def test_matches_a_direct_constrained_solver(radius):
    rng, x, y = _data()
    theta, loss, mapping = logistic_ball_optimum(x, y, radius, 2000)
    assert np.linalg.norm(theta) <= radius * (1 + 1e-12) and mapping < 1e-8
    assert loss == pytest.approx(logistic_loss(theta, x, y), abs=0)

    def grad(t, x, y):
        z = x @ t
        return x.T @ (1 / (1 + np.exp(-z)) - y) / len(y)

    ref = minimize(
        logistic_loss,
        np.zeros(x.shape[1]),
        args=(x, y),
        jac=grad,
        method="SLSQP",
        tol=1e-14,
        constraints=[{"type": "ineq", "fun": lambda t: radius**2 - t @ t, "jac": lambda t: -2 * t}],
        options={"maxiter": 1000},
    )
    assert ref.success, ref.message
    np.testing.assert_allclose(theta, ref.x, atol=2e-6)
    assert loss <= ref.fun + 1e-12
    for _ in range(200):  # no feasible point nearby is better
        cand = theta + 0.05 * rng.standard_normal(x.shape[1])
        cand *= min(1.0, radius / np.linalg.norm(cand))
        assert logistic_loss(cand, x, y) >= loss - 1e-12


def test_bad_input():
    _, x, y = _data(n=50, d=3)
    with pytest.raises(ValueError, match="unit ball"):
        logistic_ball_optimum(2 * x + 1, y, 1.0, 10)
    with pytest.raises(ValueError, match="labels"):
        logistic_ball_optimum(x, 2 * y - 1, 1.0, 10)
    with pytest.raises(ValueError, match="same"):
        logistic_ball_optimum(x, y[:-1], 1.0, 10)
    with pytest.raises(ValueError, match="radius"):
        logistic_ball_optimum(x, y, 0.0, 10)
    with pytest.raises(ValueError, match="steps"):
        logistic_ball_optimum(x, y, 1.0, 0)
    with pytest.raises(ValueError, match="non-finite"):
        logistic_ball_optimum(np.full_like(x, np.nan), y, 1.0, 10)
