"""Estimating the per-feature correlation weights TV(i) (Wang et al. 2026, §4 and App. D; spec §4).

Gaussian (Eq. 22): for (X^S, X^I) jointly Gaussian, ``X^S | X^I = x`` is ``N(μ_S + B(x − μ_I), Σ_c)``
with ``B = Σ_SI Σ_II⁻¹`` and ``Σ_c = Σ_SS − B Σ_IS`` independent of x, so two conditionals share
Σ_c and their TV is exact: ``2Φ(Δ/2) − 1`` with ``Δ`` the Mahalanobis distance of the two means
under Σ_c. ``I`` may be a single insensitive feature (Def. 2.8, the default) or a block (Alg. 1,
A3). :func:`synthetic_tv_factors` is the App. E.1 construction; :func:`tv_upper_bound` is Def. 4.3.

Plug-in estimators (App. D.1–D.3) and the dataset procedures (Adult §5.3, Sepsis §5.4) follow.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import special

from dpprep.corrdp.defs import check_index_sets, check_tv
from dpprep.validation import check_delta, check_finite_array, check_positive, check_positive_int



def tv_from_mahalanobis(distance) -> np.ndarray:
    """TV between two Gaussians with a common covariance whose means are ``distance`` apart in
    that covariance's Mahalanobis metric: ``2Φ(Δ/2) − 1`` (= ``erf(Δ / (2√2))``, accurate near 0)."""
    distance = np.asarray(distance, np.float64)
    if np.any(distance < 0) or not np.all(np.isfinite(distance)):
        raise ValueError("distance must be finite and >= 0")
    return special.erf(distance / (2.0 * math.sqrt(2.0)))


def gaussian_tv(mean_a, mean_b, cov) -> float:
    """Exact ``TV(N(a, Σ), N(b, Σ))`` for a positive-definite Σ."""
    a = check_finite_array(mean_a, "mean_a", ndim=1).astype(np.float64)
    b = check_finite_array(mean_b, "mean_b", ndim=1).astype(np.float64)
    cov = _check_cov(cov, a.shape[0])
    diff = a - b
    return float(tv_from_mahalanobis(math.sqrt(max(float(diff @ np.linalg.solve(cov, diff)), 0.0))))


def _check_cov(cov, m: int) -> np.ndarray:
    cov = check_finite_array(cov, "cov", ndim=2).astype(np.float64)
    if cov.shape != (m, m):
        raise ValueError(f"cov must have shape ({m}, {m}), got {cov.shape}")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-12):
        raise ValueError("cov must be symmetric")
    return cov


def gaussian_conditional(mean, cov, sensitive: Sequence[int], given: Sequence[int]):
    """Eq. 22 for ``X^S | X^I``: returns ``(μ_S, μ_I, B, Σ_c)`` with conditional mean
    ``μ_S + B (x − μ_I)`` and conditional covariance ``Σ_c`` (both blocks must be disjoint)."""
    mean = check_finite_array(mean, "mean", ndim=1).astype(np.float64)
    cov = _check_cov(cov, mean.shape[0])
    s, i = check_index_sets(sensitive, given, mean.shape[0], names=("sensitive", "given"), cover=False)
    s, i = list(s), list(i)
    sig_si, sig_ii = cov[np.ix_(s, i)], cov[np.ix_(i, i)]
    b = np.linalg.solve(sig_ii, sig_si.T).T  # Σ_SI Σ_II⁻¹ (Σ_II symmetric)
    cond = cov[np.ix_(s, s)] - b @ sig_si.T
    return mean[s], mean[i], b, 0.5 * (cond + cond.T)


def gaussian_posterior_tv(mean, cov, sensitive: Sequence[int], given: Sequence[int], x_given, x_given_other) -> float:
    """``TV(P_{X^S | X^I = x}, P_{X^S | X^I = x'})`` under ``N(mean, cov)`` (Eq. 22, exact)."""
    _, _, b, cond = gaussian_conditional(mean, cov, sensitive, given)
    k = b.shape[1]
    x = check_finite_array(np.atleast_1d(x_given), "x_given", ndim=1).astype(np.float64)
    x2 = check_finite_array(np.atleast_1d(x_given_other), "x_given_other", ndim=1).astype(np.float64)
    if x.shape != (k,) or x2.shape != (k,):
        raise ValueError(f"x_given and x_given_other must have {k} entries (one per given feature)")
    return gaussian_tv(b @ x, b @ x2, cond)


def e1_half_width(m_s: int, delta: float) -> float:
    """App. E.1's range half-width ``2·sqrt(log(2 m_s / δ))`` around μ_i."""
    return 2.0 * math.sqrt(math.log(2 * check_positive_int(m_s, "m_s") / check_delta(delta)))


def synthetic_tv_factors(mean, cov, sensitive: Sequence[int], insensitive: Sequence[int], *, delta: float = 1e-4) -> np.ndarray:
    """App. E.1: for each ``i`` in ``insensitive`` (in order), Eq. 22 on the (S, i) sub-block
    evaluated at ``x_i = μ_i ∓ 2·sqrt(log(2 m_s/δ))``; returns TV(i), shape ``(|U|,)``.

    With the population mean/cov of the spec's generator this gives 0.364 at m_s = 10; with the
    empirical mean and full empirical covariance of the generated X, the per-feature plug-in
    values (upward biased, A21). Only the difference of the two points matters, so μ_i cancels."""
    mean = check_finite_array(mean, "mean", ndim=1).astype(np.float64)
    cov = _check_cov(cov, mean.shape[0])
    s, u = check_index_sets(sensitive, insensitive, mean.shape[0], cover=False)
    s, u = list(s), list(u)
    gap = 2.0 * e1_half_width(len(s), delta)
    sig_ss, sig_su, var_u = cov[np.ix_(s, s)], cov[np.ix_(s, u)], np.diag(cov)[u]
    if np.any(var_u <= 0):
        raise ValueError("cov must have a positive variance on every insensitive feature")
    # Per i: B = Σ_Si/Σ_ii, Σ_c = Σ_SS − Σ_Si Σ_iSᵀ/Σ_ii, a − b = B·gap; Δ² = gap²·Bᵀ Σ_c⁻¹ B.
    out = np.empty(len(u))
    for k in range(len(u)):
        b = sig_su[:, k] / var_u[k]
        cond = sig_ss - np.outer(sig_su[:, k], sig_su[:, k]) / var_u[k]
        out[k] = gap * math.sqrt(max(float(b @ np.linalg.solve(cond, b)), 0.0))
    return tv_from_mahalanobis(out)


def tv_upper_bound(tv_hat, c2: float, gamma: float, n: int, m: int, m_s: int, delta: float) -> np.ndarray:
    """Def. 4.3: ``TV~(i) = TV̂(i) + 2 c2 sqrt(log((m − m_s)/δ)) / n^γ``, clipped to [0, 1]."""
    tv_hat = check_tv(tv_hat, "tv_hat")
    c2 = check_positive(c2, "c2", allow_zero=True)
    gamma = float(gamma)
    if not (0.0 < gamma <= 0.5):
        raise ValueError(f"gamma must lie in (0, 1/2] (Assumption 4.1), got {gamma!r}")
    n = check_positive_int(n, "n")
    m = check_positive_int(m, "m")
    m_s = check_positive_int(m_s, "m_s", minimum=0)
    if m_s >= m:
        raise ValueError(f"m_s must be < m (U must not be empty), got m_s={m_s}, m={m}")
    delta = check_delta(delta)
    return np.clip(tv_hat + 2.0 * c2 * math.sqrt(math.log((m - m_s) / delta)) / n**gamma, 0.0, 1.0)


def plugin_tv_factors(x, sensitive: Sequence[int], insensitive: Sequence[int], *, delta: float = 1e-4) -> np.ndarray:
    """:func:`synthetic_tv_factors` with the empirical mean and full empirical covariance
    (``np.cov``, ddof 1) of the rows ``x`` plugged in (App. E.1, A21): the paper-mode factors."""
    x = check_finite_array(x, "x", ndim=2).astype(np.float64)
    return synthetic_tv_factors(x.mean(axis=0), np.cov(x, rowvar=False), sensitive, insensitive, delta=delta)
