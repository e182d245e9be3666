"""Sun, Suresh & Menon (2024), the analysed algorithms (§2, §4, §5): Algorithm 1 (DPSGD as in
Bassily et al.), Algorithm 2 (DPSGD-F with PrivMean, PrivQuantile, the τ-valued appended feature
and feature clipping), our surrogates for PrivMean (Lemma 3) and PrivQuantile (Lemma 4) and the
counter-example of §4.

Everything here is numpy on linear models *without* a separate bias and the hinge loss
``max(0, 1 − y·w·x)`` (G = 1), the setting of the theory. Two code paths:

* **per-example** (:func:`dpsgd_linear`): any data; per-example gradients, clipping, noise;
* **type-collapsed** (:func:`simulate_types`): data made of a few distinct (x, y) *types* with
  multiplicities (the counter-example has two). A batch is then a count per type (Binomial per
  type for Poisson sampling, Multinomial for with-replacement batches), so a step costs O(types)
  whatever n is, and many runs (seeds × hyperparameters) advance together as arrays. Given the
  same draws the two paths agree exactly (tested).

Privacy: Algorithm 1's σ² = 8·T·C²·log(1/δ)/(n²ε²) is the paper's (moments-accountant constants;
loose, with side conditions: use it only for the theory checks). Algorithm 2 spends (ε/3, δ/3) on
each of its three private steps (basic composition); its PrivMean surrogate splits its own
(ε/3, δ/3) into three (coarse centre, radius, clipped Gaussian mean). The surrogates keep the
structure and the privacy, not the constants, of Huang et al. (2021) and Dick et al. (2023), which
the paper uses as black boxes.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from jax.typing import ArrayLike

from dpprep.accounting import dp
from dpprep.renames import renamed_kwargs
from dpprep.validation import check_delta, check_positive, check_positive_int

GRID_POINTS = 200_001


# --------------------------------------------------------------------------------------------------
# The counter-example (§4, App. A)


def counterexample(n: int, mu: float, *, flip: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """D' (or D'' with ``flip``): n/2 copies of (μ, +1) and n/2 of (μ, −1); labels +1 / −1 on D'
    (flipped on D''). ``n`` must be even."""
    n = check_positive_int(n, "n")
    if n % 2:
        raise ValueError(f"n must be even, got {n}")
    mu = check_positive(mu, "mu")
    x = np.array([[mu, 1.0]] * (n // 2) + [[mu, -1.0]] * (n // 2))
    y = np.array([1.0] * (n // 2) + [-1.0] * (n // 2))
    return x, (-y if flip else y)


def counterexample_types(
    mu: float, *, flip: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two types of :func:`counterexample`: features (2, 2), labels (2,), shares (½, ½)."""
    s = -1.0 if flip else 1.0
    return np.array([[mu, 1.0], [mu, -1.0]]), np.array([s, -s]), np.array([0.5, 0.5])


def hinge_loss(
    w: np.ndarray, x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Mean hinge loss of (a stack ``(..., d)`` of) linear models ``w`` (no bias)."""
    margins = y * np.einsum("...d,nd->...n", w, x)
    losses = np.maximum(0.0, 1.0 - margins)
    return losses.mean(-1) if weights is None else losses @ weights


def accuracy(
    w: np.ndarray, x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    correct = (y * np.einsum("...d,nd->...n", w, x) > 0).astype(float)
    return correct.mean(-1) if weights is None else correct @ weights


# --------------------------------------------------------------------------------------------------
# Algorithm 1 (§2)


def alg1_sigma(n: int, epsilon: float, delta: float, clip: float, steps: int) -> float:
    """σ of Algorithm 1: σ² = 8·T·C²·log(1/δ)/(n²ε²) (noise on the *averaged* gradient)."""
    return math.sqrt(8 * steps * clip**2 * math.log(1 / delta) / (n**2 * epsilon**2))


def alg1_batch_size(n: int, epsilon: float, steps: int) -> int:
    """The smallest batch Algorithm 1 allows: ⌈max{n·sqrt(ε/(4T)), 1}⌉."""
    return int(math.ceil(max(n * math.sqrt(epsilon / (4 * steps)), 1.0)))


def hinge_grads(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example (sub)gradients of the hinge loss, ``−y·x·1{y·w·x < 1}``."""
    active = (y * (x @ w) < 1.0).astype(float)
    return -(y * active)[:, None] * x


@renamed_kwargs(noise_std_sum="stddev", normaliser="normalize_by")
def dpsgd_linear(
    x: np.ndarray,
    y: np.ndarray,
    *,
    clip: float,
    lr: float,
    steps: int,
    batch_size: int,
    stddev: float,
    normalize_by: float,
    sampling: str = "replacement",
    rng: np.random.Generator | None = None,
    draws: dict | None = None,
    w0: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per-example DP-SGD for a linear model without bias and the hinge loss: each step
    ``w ← w − lr·(Σ_batch Clip(g_i, C) + N(0, s² I)) / normalize_by``. ``sampling``:
    ``"replacement"`` (``batch_size`` indices uniform with replacement: Algorithm 1 with
    ``normalize_by = B`` and ``s = σ·B``) or ``"poisson"`` (each record w.p. ``batch_size/n``).
    ``draws`` (``{"batches": [...], "noise": (T, d)}``) replaces the random draws (tests).
    Returns the last and the average iterate (of ``w_1..w_T``)."""
    n, d = x.shape
    rng = rng or np.random.default_rng()
    w = np.zeros(d) if w0 is None else np.array(w0, float)
    total = np.zeros(d)
    for t in range(steps):
        if draws is not None:
            batch = draws["batches"][t]
        elif sampling == "replacement":
            batch = rng.integers(0, n, size=batch_size)
        elif sampling == "poisson":
            batch = np.flatnonzero(rng.random(n) < batch_size / n)
        else:
            raise ValueError(f"sampling must be 'replacement' or 'poisson', got {sampling!r}")
        g = hinge_grads(w, x[batch], y[batch])
        norms = np.linalg.norm(g, axis=1)
        g = g * np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]
        noise = draws["noise"][t] if draws is not None else rng.normal(size=d)
        w = w - lr * (g.sum(0) + stddev * noise) / normalize_by
        total += w
    return {"last": w, "average": total / steps}


def dpsgd_alg1(
    x: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    delta: float,
    *,
    clip: float,
    lr: float,
    steps: int,
    batch_size: int | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Algorithm 1 as printed: with-replacement batches of ``B ≥ ⌈max{n·sqrt(ε/(4T)), 1}⌉``, noise
    ``N(0, σ²)`` on the averaged clipped gradient, average-iterate output."""
    n = x.shape[0]
    b = batch_size or alg1_batch_size(n, epsilon, steps)
    sigma = alg1_sigma(n, epsilon, check_delta(delta), clip, steps)
    return dpsgd_linear(
        x,
        y,
        clip=clip,
        lr=lr,
        steps=steps,
        batch_size=b,
        stddev=sigma * b,
        normalize_by=b,
        sampling="replacement",
        rng=rng,
    )["average"]


# --------------------------------------------------------------------------------------------------
# Type-collapsed simulation


@renamed_kwargs(noise_std_sum="stddev", normaliser="normalize_by")
def simulate_types(
    xt: np.ndarray,
    yt: np.ndarray,
    counts: Callable[[int], np.ndarray],
    *,
    clip: ArrayLike,
    lr: ArrayLike,
    stddev: ArrayLike,
    normalize_by: ArrayLike,
    steps: int,
    rng: np.random.Generator,
    noise: Callable[[int], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Runs ``R`` DP-SGD runs on data made of ``m`` types at once.

    Args:
      xt: type features, ``(m, d)`` or per run ``(R, m, d)``; yt: labels ``(m,)``.
      counts: ``t -> (R, m)`` examples of each type in step ``t``'s batch.
      clip, lr, stddev, normalize_by: scalars or ``(R,)`` arrays (as in :func:`dpsgd_linear`).
      noise: ``t -> (R, d)`` standard normals (default: from ``rng``).
    Returns ``{"last": (R, d), "average": (R, d)}``.
    """
    c0 = counts(0)
    r, m = c0.shape
    xt = np.broadcast_to(np.asarray(xt, float), (r,) + np.shape(xt)[-2:])
    d = xt.shape[-1]
    col = lambda v: np.broadcast_to(np.asarray(v, float), (r,))[:, None]  # noqa: E731
    clip, lr, s, norm = col(clip), col(lr), col(stddev), col(normalize_by)
    yx = yt[None, :, None] * xt  # (R, m, d)
    gnorm = np.linalg.norm(xt, axis=-1)  # |y| = 1: ‖g‖ = ‖x‖ when active
    scale = np.minimum(1.0, clip / np.maximum(gnorm, 1e-300))  # (R, m)
    w = np.zeros((r, d))
    total = np.zeros((r, d))
    for t in range(steps):
        k = c0 if t == 0 else counts(t)
        active = (yx * w[:, None, :]).sum(-1) < 1.0
        coef = k * active * scale  # (R, m)
        gsum = -(coef[:, :, None] * yx).sum(1)
        z = noise(t) if noise is not None else rng.standard_normal((r, d))
        w = w - lr * (gsum + s * z) / norm
        total += w
    return {"last": w, "average": total / steps}


@renamed_kwargs(noise_std_sum="stddev", normaliser="normalize_by")
def simulate_counterexample(
    mu: float,
    k_plus: Callable[[int], np.ndarray],
    k_minus: Callable[[int], np.ndarray],
    *,
    clip: ArrayLike,
    lr: ArrayLike,
    stddev: ArrayLike,
    normalize_by: ArrayLike,
    steps: int,
    rng: np.random.Generator,
    noise: Callable[[int], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """:func:`simulate_types` written out for D' (types (μ, ±1) with labels ±1, no bias) on ``(R,)``
    arrays: the same arithmetic in a few vector operations per step (the counter-example check of
    Algorithm 1 takes ~10⁸ run-steps)."""
    kp0 = k_plus(0)
    r = kp0.shape[0]
    vec = lambda v: np.broadcast_to(np.asarray(v, float), (r,))  # noqa: E731
    clip, lr, s, norm = vec(clip), vec(lr), vec(stddev), vec(normalize_by)
    c = np.minimum(1.0, clip / math.sqrt(mu * mu + 1.0))
    w1, w2 = np.zeros(r), np.zeros(r)
    t1, t2 = np.zeros(r), np.zeros(r)
    step = lr / norm
    for t in range(steps):
        kp = kp0 if t == 0 else k_plus(t)
        km = k_minus(t)
        ap = kp * ((mu * w1 + w2) < 1.0)
        am = km * ((-mu * w1 + w2) < 1.0)
        z = noise(t) if noise is not None else rng.standard_normal((r, 2))
        g1 = c * mu * (am - ap) + s * z[:, 0]
        g2 = -c * (ap + am) + s * z[:, 1]
        w1 = w1 - step * g1
        w2 = w2 - step * g2
        t1 += w1
        t2 += w2
    return {"last": np.stack([w1, w2], 1), "average": np.stack([t1, t2], 1) / steps}


def poisson_counts(
    sizes: np.ndarray, q: ArrayLike, runs: int, rng: np.random.Generator
) -> Callable[[int], np.ndarray]:
    """Per-type Binomial(size, q) counts for ``runs`` runs (``q`` scalar or ``(runs,)``)."""
    q = np.broadcast_to(np.asarray(q, float), (runs,))[:, None]
    sizes = np.asarray(sizes, np.int64)[None, :]
    return lambda t: (
        rng.binomial(sizes, q).astype(float)
        if np.any(q < 1)
        else np.broadcast_to(sizes, (runs, sizes.shape[1])).astype(float)
    )


def replacement_counts(
    shares: np.ndarray, batch_size: int, runs: int, rng: np.random.Generator
) -> Callable[[int], np.ndarray]:
    """Multinomial(B, shares) counts per run (with-replacement batches; two types: a Binomial)."""
    shares = np.asarray(shares, float)
    if len(shares) == 2:

        def two(t):
            k = rng.binomial(batch_size, shares[0], size=runs).astype(float)
            return np.stack([k, batch_size - k], axis=1)

        return two
    return lambda t: rng.multinomial(batch_size, shares, size=runs).astype(float)


# --------------------------------------------------------------------------------------------------
# PrivQuantile and PrivMean surrogates (Lemmas 3–4, App. B.1–B.2)


def rank_error(epsilon: float, grid_points: int, n: int) -> float:
    """The exponential mechanism's rank error at failure probability 1/n²: (2/ε)(ln K + 2 ln n)."""
    return 2.0 / epsilon * (math.log(grid_points) + 2 * math.log(max(n, 2)))


def priv_quantile_em(
    values: np.ndarray,
    lo: float,
    hi: float,
    target_rank: float,
    epsilon: float,
    rng: np.random.Generator,
    grid_points: int = GRID_POINTS,
) -> float:
    """ε-DP quantile by the discrete exponential mechanism on a public grid over [lo, hi]: values
    snapped to the grid (ties explicit), utility ``−max(0, #{s < t} − r, r − #{s ≤ t})``
    (sensitivity 1), ``t`` drawn ∝ exp(ε·u(t)/2)."""
    check_positive(epsilon, "epsilon")
    grid = np.linspace(lo, hi, grid_points)
    v = np.clip(np.asarray(values, float), lo, hi)
    snapped = np.sort(
        grid[
            np.clip(
                np.rint((v - lo) / (hi - lo) * (grid_points - 1)).astype(np.int64),
                0,
                grid_points - 1,
            )
        ]
    )
    below = np.searchsorted(snapped, grid, side="left")
    at_or_below = np.searchsorted(snapped, grid, side="right")
    util = -np.maximum(0.0, np.maximum(below - target_rank, target_rank - at_or_below))
    logits = epsilon * util / 2.0
    p = np.exp(logits - logits.max())
    return float(grid[rng.choice(grid_points, p=p / p.sum())])


def high_quantile_rank(n: int, epsilon: float, grid_points: int) -> float:
    """Target rank ``n − g`` with the gap rule ``g = (2/ε)(ln K + 2 ln n)``, capped at ``n/2``."""
    return n - min(rank_error(epsilon, grid_points, n), n / 2)


def priv_mean_adaptive(
    x: np.ndarray,
    radius_bound: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    grid_points: int = GRID_POINTS,
) -> np.ndarray:
    """(ε, δ)-DP mean whose error scales with the data's spread (our surrogate for Lemma 3's
    PrivMean, basic composition of three thirds): a per-coordinate private median on [−R, R] (ε/3
    over d
    coordinates), a private high quantile r of ‖x_i − c‖ on [0, 2R] (ε/3, gap rule), a clipped
    Gaussian mean around c (analytic σ at (ε/3, δ), add/remove sensitivity r), projected onto B(R).
    """
    n, d = x.shape
    e3 = epsilon / 3.0
    c = np.array(
        [
            priv_quantile_em(x[:, j], -radius_bound, radius_bound, n / 2, e3 / d, rng, grid_points)
            for j in range(d)
        ]
    )
    dist = np.linalg.norm(x - c, axis=1)
    r = priv_quantile_em(
        dist, 0.0, 2 * radius_bound, high_quantile_rank(n, e3, grid_points), e3, rng, grid_points
    )
    r = max(r, 2 * radius_bound / (grid_points - 1))  # a zero radius would release nothing
    diff = x - c
    norms = np.linalg.norm(diff, axis=1)
    clipped = diff * np.minimum(1.0, r / np.maximum(norms, 1e-300))[:, None]
    sigma = dp.analytic_gaussian_sigma(e3, delta) * r
    mu = c + (clipped.sum(0) + sigma * rng.standard_normal(d)) / n
    norm = np.linalg.norm(mu)
    return mu if norm <= radius_bound else mu * (radius_bound / norm)


def algorithm2_features(
    x: np.ndarray,
    epsilon: float,
    delta: float,
    radius_bound: float,
    rng: np.random.Generator,
    grid_points: int = GRID_POINTS,
) -> dict[str, Any]:
    """Steps 1–4 of Algorithm 2: μ̂ = PrivMean (ε/3, δ/3); τ = PrivQuantile of ‖x_i − μ̂‖ on
    [0, 2R] (ε/3; the paper's [0, R] misses distances up to 2R) plus R/n²; x'' = Clip((x − μ̂, τ),
    √2·τ).
    """
    n = x.shape[0]
    mu = priv_mean_adaptive(x, radius_bound, epsilon / 3, delta / 3, rng, grid_points)
    dist = np.linalg.norm(x - mu, axis=1)
    tau = (
        priv_quantile_em(
            dist,
            0.0,
            2 * radius_bound,
            high_quantile_rank(n, epsilon / 3, grid_points),
            epsilon / 3,
            rng,
            grid_points,
        )
        + radius_bound / n**2
    )
    aug = np.concatenate([x - mu, np.full((n, 1), tau)], axis=1)
    norms = np.linalg.norm(aug, axis=1)
    clipped = aug * np.minimum(1.0, math.sqrt(2) * tau / np.maximum(norms, 1e-300))[:, None]
    return {"mu_hat": mu, "tau": tau, "features": clipped}


def algorithm2_map_back(
    theta: np.ndarray, mu_hat: np.ndarray, tau: float
) -> tuple[np.ndarray, float]:
    """Step 6: ``w = θ''[:d]``, ``b = τ·θ''[d] − μ̂·w`` (Lemma 5)."""
    w = theta[..., :-1]
    return w, tau * theta[..., -1] - w @ mu_hat


def dpsgd_noise(epsilon: float, delta: float, q: float, steps: int) -> float:
    """DP-SGD multiplier for (ε, δ): exact T-fold Gaussian composition for q = 1 (one Gaussian of
    multiplier z/√T, analytic), PLD for Poisson q < 1."""
    if q >= 1.0:
        return math.sqrt(steps) * dp.analytic_gaussian_sigma(epsilon, delta)
    return dp.calibrate_noise(epsilon, delta, dp.DpSgdSchedule(steps, "poisson", q))


def dpsgdf_theory(
    x: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    delta: float,
    radius_bound: float,
    *,
    lr: float,
    steps: int,
    q: float,
    rng: np.random.Generator,
    grid_points: int = GRID_POINTS,
) -> tuple[np.ndarray, float]:
    """Algorithm 2 end to end (per-example path): features of :func:`algorithm2_features`, then
    (ε/3, δ/3) Poisson DP-SGD with no separate bias, clip √2·τ (nothing clipped) and step size
    lr/τ² (scale-invariant), average iterate; mapped back to ``(w, b)``."""
    pre = algorithm2_features(x, epsilon, delta, radius_bound, rng, grid_points)
    tau = pre["tau"]
    clip = math.sqrt(2) * tau
    n = x.shape[0]
    z = dpsgd_noise(epsilon / 3, delta / 3, q, steps)
    b = max(1, int(round(q * n)))
    out = dpsgd_linear(
        pre["features"],
        y,
        clip=clip,
        lr=lr / tau**2,
        steps=steps,
        batch_size=b,
        stddev=z * clip,
        normalize_by=q * n,
        sampling="poisson" if q < 1 else "replacement",
        rng=rng,
        draws=(
            None
            if q < 1
            else {
                "batches": [np.arange(n)] * steps,
                "noise": rng.standard_normal((steps, x.shape[1] + 1)),
            }
        ),
    )
    return algorithm2_map_back(out["average"], pre["mu_hat"], tau)
