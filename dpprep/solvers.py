"""Non-private reference solvers: the optimum an excess risk is measured against.

:func:`logistic_ball_optimum` gives ``θ* = argmin_{‖θ‖ ≤ R} ℓ̂_S(θ)`` for the mean logistic loss,
the comparator of the excess empirical risk ``ℓ̂_S(θ̂) − ℓ̂_S(θ*)`` in Hu, Sanyal, Schölkopf (2024),
"Provable Privacy with Non-Private Pre-Processing" (ICML 2024), Figure 3. It is a measuring tool
(it reads the data, releases nothing private).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.validation import check_finite_array, check_positive, check_positive_int

__all__ = ["BallOptimum", "logistic_ball_optimum", "logistic_loss"]


class BallOptimum(NamedTuple):
    """Output of :func:`logistic_ball_optimum` (unpacks as ``theta, loss, gradient_mapping``)."""

    theta: np.ndarray
    loss: float
    gradient_mapping: float


def logistic_loss(theta, x, y01) -> float:
    """Mean logistic loss ``ℓ̂_S(θ) = mean(log(1 + e^{xθ}) − y·xθ)`` (labels in {0, 1}), float64."""
    z = np.asarray(x) @ np.asarray(theta)
    return float(np.mean(np.logaddexp(0.0, z) - np.asarray(y01) * z))


def logistic_ball_optimum(x, y01, radius: float, steps: int) -> BallOptimum:
    """``θ* = argmin_{‖θ‖ ≤ radius} ℓ̂_S(θ)`` for the mean logistic loss over the rows ``x`` of a
    unit-ball dataset with labels ``y01`` in {0, 1} (no intercept).

    Solved by FISTA (Beck & Teboulle, 2009: accelerated projected gradient, projection onto the
    ball by rescaling) with step ``4`` = ``1/β``: the loss's gradient is β-Lipschitz with
    ``β ≤ λ_max(XᵀX/n)/4 ≤ 1/4`` when the rows lie in the unit ball. ``steps`` iterations run in
    float32 (one jitted scan from ``θ = 0``), then ``max(50, steps // 20)`` more in float64 warm
    started there (numpy). Used for Hu, Sanyal, Schölkopf (2024), Figure 3's excess empirical risk.

    Args:
      x: ``(n, d)`` rows (the step 4 needs ``‖x_i‖ ≤ 1``; larger rows are refused).
      y01: ``(n,)`` labels in {0, 1}.
      radius: the ball's radius R.
      steps: float32 FISTA iterations.

    Returns:
      a :class:`BallOptimum`: ``θ*`` (float64), ``ℓ̂_S(θ*)`` and the float64 gradient-mapping norm
      ``4‖θ − Π(θ − ∇ℓ̂_S(θ)/4)‖`` at ``θ*`` (0 exactly at the optimum; a certificate of accuracy).
    """
    x = np.asarray(check_finite_array(x, "x", ndim=2), np.float64)
    y01 = np.asarray(check_finite_array(y01, "y01", ndim=1), np.float64)
    if x.shape[0] != y01.shape[0] or x.shape[0] == 0:
        raise ValueError(
            f"x and y01 must have the same, non-zero number of rows, got {x.shape[0]} and"
            f" {y01.shape[0]}"
        )
    if np.any(np.linalg.norm(x, axis=1) > 1.0 + 1e-6):
        raise ValueError("x rows must lie in the unit ball (the step size 4 assumes ‖x_i‖ ≤ 1)")
    if not np.all((y01 == 0) | (y01 == 1)):
        raise ValueError("y01 must hold labels in {0, 1}")
    radius = check_positive(radius, "radius")
    steps = check_positive_int(steps, "steps")

    def project(t, xp):
        return t * xp.minimum(1.0, radius / xp.maximum(xp.linalg.norm(t), 1e-30))

    def grad(t, xx, yy, xp):
        z = xx @ t
        return xx.T @ (1.0 / (1.0 + xp.exp(-z)) - yy) / xx.shape[0]

    @jax.jit
    def fista32(xx, yy):
        def body(carry, _):
            t, v, m = carry
            nt = project(v - 4.0 * grad(v, xx, yy, jnp), jnp)
            nm = (1.0 + jnp.sqrt(1.0 + 4.0 * m * m)) / 2.0
            return (nt, nt + (m - 1.0) / nm * (nt - t), nm), None

        t0 = jnp.zeros(xx.shape[1], jnp.float32)
        (t, _, _), _ = jax.lax.scan(body, (t0, t0, jnp.float32(1.0)), None, length=steps)
        return t

    theta = np.asarray(
        fista32(jnp.asarray(x, jnp.float32), jnp.asarray(y01, jnp.float32)), np.float64
    )
    t, v, m = theta, theta, 1.0
    for _ in range(max(50, steps // 20)):  # float64 polish (warm-started FISTA)
        nt = project(v - 4.0 * grad(v, x, y01, np), np)
        nm = (1.0 + math.sqrt(1.0 + 4.0 * m * m)) / 2.0
        t, v, m = nt, nt + (m - 1.0) / nm * (nt - t), nm
    mapping = 4.0 * float(np.linalg.norm(t - project(t - 0.25 * grad(t, x, y01, np), np)))
    return BallOptimum(t, logistic_loss(t, x, y01), mapping)
