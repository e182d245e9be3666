"""Rényi-divergence primitives and RDP -> (ε, δ) conversion (Hu, Sanyal, Schölkopf 2024, App. A).

Everything here is a scalar formula, so it is plain numpy (vectorised over grids of Rényi orders α),
not JAX. ``log`` is the natural logarithm throughout.

- :func:`lemma_m` / :func:`rdp_to_dp`: Lemma M (Mironov 2017, Prop. 3): an ``(α, ε_R)``-RDP
  algorithm is ``(ε_R + log(1/δ)/(α−1), δ)``-DP; for a whole curve take the minimum over the
  admissible α range (as the paper applies it in App. E).
- :func:`gaussian_divergence`: Lemma C, ``D_α(N(μ0, σ²I) || N(μ1, σ²I)) = α‖μ0−μ1‖²/(2σ²)``.
- :func:`mixture_gaussian_divergence`: the Rényi divergences, both ways, between ``N(0, 1)`` and
  the mixture ``(1−q)·N(0, 1) + q·N(μ, 1)``, by quadrature: the exact RDP of one step of a
  mechanism whose sampled gradient moves by ``μσ`` with probability ``q`` (a realisable pair, so a
  *lower* bound on that mechanism's RDP, independent of any accountant's series).
- :func:`gaussian_group_rdp` / :func:`gaussian_group_epsilon`: the group-privacy baseline of
  Figure 2 (the paper gives no formula for it; §3.2 and §4.2 only compare against it): a group of
  ``k`` records moves a Δ_f-sensitive ``f`` by ≤ kΔ_f, so the Gaussian mechanism with noise Δ_f/ε
  is ``(α, αk²ε²/2)``-RDP w.r.t. groups of size k (exact Gaussian group RDP, *not* Mironov's
  generic ``3^c ε(2^c α)`` group lemma).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from dpprep.validation import check_delta, check_epsilon, check_positive

__all__ = [
    "NoAdmissibleOrder",
    "DPConversion",
    "check_alpha",
    "lemma_m",
    "rdp_to_dp",
    "rdp_to_dp_linear",
    "gaussian_divergence",
    "mixture_gaussian_divergence",
    "gaussian_group_rdp",
    "gaussian_group_epsilon",
]


class NoAdmissibleOrder(ValueError):
    """No Rényi order in the requested range satisfies the mechanism's assumptions."""


def check_alpha(
    alpha: float | np.ndarray, name: str = "alpha", *, allow_inf: bool = False
) -> np.ndarray:
    """Returns ``alpha`` as a float array after checking every entry is an order ``> 1``.

    RDP is defined for α > 1 only (the paper's occasional "α ≥ 1" is a typo); ``α = ∞`` is
    accepted only where ``allow_inf`` (pure-DP mechanisms, Eqs. 44–45).
    """
    arr = np.asarray(alpha, dtype=float)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN")
    if not allow_inf and np.any(np.isinf(arr)):
        raise ValueError(f"{name} must be finite, got {alpha!r}")
    if np.any(arr <= 1.0):
        raise ValueError(f"{name} must be > 1 (Rényi orders), got min {float(np.min(arr))!r}")
    return arr


def _as_output(values: np.ndarray, like: float | np.ndarray) -> float | np.ndarray:
    return float(values) if np.ndim(like) == 0 else values


def lemma_m(
    rdp_epsilon: float | np.ndarray, alpha: float | np.ndarray, delta: float
) -> float | np.ndarray:
    """Lemma M: ``(α, ε_R)``-RDP  ⇒  ``(ε_R + log(1/δ)/(α−1), δ)``-DP, elementwise."""
    delta = check_delta(delta)
    a = check_alpha(alpha, allow_inf=True)
    eps = np.asarray(rdp_epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        out = eps + math.log(1.0 / delta) / (a - 1.0)
    return float(out) if out.ndim == 0 else out


@dataclasses.dataclass(frozen=True)
class DPConversion:
    """Result of Lemma M minimised over an α range: ``(epsilon, delta)``-DP attained at
    ``alpha``."""

    epsilon: float
    delta: float
    alpha: float


# Grid sizes for the continuous minimisation over α: a coarse log-grid of α−1, then zooms.
_COARSE_POINTS = 200
_ZOOM_POINTS = 41
_ZOOM_ROUNDS = 4
_ALPHA_MAX_DEFAULT = 1e7


def rdp_to_dp(
    curve: Callable[[np.ndarray], np.ndarray],
    delta: float,
    *,
    alpha_min: float = 1.0,
    alpha_max: float = math.inf,
    alphas: np.ndarray | None = None,
) -> DPConversion:
    """Lemma M over a range of orders: ``ε_DP(δ) = min_α [ε_R(α) + log(1/δ)/(α−1)]``.

    ``curve`` maps an array of orders to RDP values (vectorised; ``inf`` where the bound does not
    hold). With ``alphas`` given, the minimum is over exactly those orders; otherwise it is
    minimised continuously over ``α ∈ (alpha_min, alpha_max]`` (``alpha_min`` itself included when
    it is > 1, e.g. Table-2 mode's α ≥ 11) by a log-grid on α−1 refined by repeated zooms — the
    objective need not be convex (Theorem-2 curves), so a bracketing scalar solver is not used.
    An infinite ``alpha_max`` is capped at 1e7 (the log(1/δ)/(α−1) term is then < 1e-5).
    Raises :class:`NoAdmissibleOrder` if the curve is infinite at every order tried.
    """
    delta = check_delta(delta)
    log_term = math.log(1.0 / delta)

    def objective(a: np.ndarray) -> np.ndarray:
        values = np.asarray(curve(a), dtype=float)
        return values + log_term / (a - 1.0)

    if alphas is not None:
        grid = check_alpha(alphas, "alphas").ravel()
        if grid.size == 0:
            raise ValueError(
                "alphas must hold at least one order > 1 (or be None to minimise over every order)"
            )
        obj = objective(grid)
        if not np.any(np.isfinite(obj)):
            raise NoAdmissibleOrder("the RDP curve is infinite (inadmissible) at every given order")
        i = int(np.nanargmin(np.where(np.isfinite(obj), obj, np.inf)))
        return DPConversion(float(obj[i]), delta, float(grid[i]))

    alpha_min = float(alpha_min)
    if not alpha_min >= 1.0:
        raise ValueError(f"alpha_min must be >= 1, got {alpha_min!r}")
    hi = min(float(alpha_max), _ALPHA_MAX_DEFAULT)
    lo_u = math.log(alpha_min - 1.0) if alpha_min > 1.0 else math.log(1e-6)
    hi_u = math.log(hi - 1.0)
    if hi_u < lo_u:
        raise ValueError(f"empty order range: alpha_min={alpha_min} > alpha_max={alpha_max}")
    u = np.linspace(lo_u, hi_u, _COARSE_POINTS)
    best_u, best = _zoom_minimise(lambda uu: objective(1.0 + np.exp(uu)), u)
    if not math.isfinite(best):
        raise NoAdmissibleOrder(
            f"the RDP curve is infinite (inadmissible) at every order in ({alpha_min}, {alpha_max}]"
        )
    return DPConversion(best, delta, float(1.0 + math.exp(best_u)))


def _zoom_minimise(fn: Callable[[np.ndarray], np.ndarray], grid: np.ndarray) -> tuple[float, float]:
    """Minimises a 1-d function on ``grid`` then zooms ``_ZOOM_ROUNDS`` times around the best
    point."""
    lo, hi = float(grid[0]), float(grid[-1])
    values = np.where(np.isfinite(v := fn(grid)), v, np.inf)
    for _ in range(_ZOOM_ROUNDS):
        i = int(np.argmin(values))
        step = grid[1] - grid[0] if len(grid) > 1 else 0.0
        a, b = max(lo, grid[i] - step), min(hi, grid[i] + step)
        best_x, best_v = grid[i], values[i]
        grid = np.linspace(a, b, _ZOOM_POINTS)
        values = np.where(np.isfinite(v := fn(grid)), v, np.inf)
        if best_v < values.min():  # keep the incumbent if the zoom grid misses it
            grid = np.append(grid, best_x)
            values = np.append(values, best_v)
            order = np.argsort(grid)
            grid, values = grid[order], values[order]
    i = int(np.argmin(values))
    return float(grid[i]), float(values[i])


def rdp_to_dp_linear(
    slope: float, delta: float, *, alpha_min: float = 1.0, intercept: float = 0.0
) -> DPConversion:
    """Closed-form Lemma M for a linear curve ``ε_R(α) = slope·α + intercept`` over ``α ≥
    alpha_min``.

    The unconstrained minimiser is ``α* = 1 + sqrt(log(1/δ)/slope)``; clipped to ``alpha_min``.
    Used as the independent check of :func:`rdp_to_dp` and for Table-2 mode (α ≥ 11, as in Table 2).
    """
    slope = check_epsilon(slope, "slope")
    delta = check_delta(delta)
    log_term = math.log(1.0 / delta)
    alpha = max(float(alpha_min), 1.0 + math.sqrt(log_term / slope))
    if alpha <= 1.0:
        raise ValueError(f"alpha_min must be >= 1, got {alpha_min!r}")
    return DPConversion(slope * alpha + intercept + log_term / (alpha - 1.0), delta, alpha)


def gaussian_divergence(
    alpha: float | np.ndarray, distance: float, sigma: float
) -> float | np.ndarray:
    """Lemma C: ``D_α(N(μ0, σ²I) || N(μ1, σ²I)) = α‖μ0 − μ1‖² / (2σ²)`` with ``distance =
    ‖μ0−μ1‖``."""
    a = check_alpha(alpha)
    distance = check_positive(distance, "distance", allow_zero=True)
    sigma = check_positive(sigma, "sigma")
    return _as_output(a * distance**2 / (2.0 * sigma**2), alpha)


def mixture_gaussian_divergence(
    alpha: float, sampling_rate: float, shift: float
) -> tuple[float, float]:
    """``(D_α(M || N), D_α(N || M))`` for ``N = N(0, 1)`` and ``M = (1−q)·N(0, 1) + q·N(shift, 1)``,
    ``q = sampling_rate``, by adaptive quadrature (scipy's QUADPACK) of ``E_N[(M/N)^λ] − 1`` with
    ``λ = α`` resp. ``1 − α`` (the ``− 1`` taken inside the integrand, so tiny divergences keep
    their digits).

    The first is what Mironov, Talwar & Zhang ("Rényi Differential Privacy of the Sampled Gaussian
    Mechanism", 2019) compute in closed form for integer α and by series otherwise, and show to be
    the larger; this is an independent evaluation of both. A fixed pair of datasets whose outputs
    are these distributions at every step (e.g. a linear loss, so the gradients do not depend on
    the iterate) has ``T`` times the larger as its exact RDP after ``T`` steps.

    >>> forward, backward = mixture_gaussian_divergence(2.0, 0.01, 1.0)
    >>> # integer α: exact
    >>> round(forward, 10) == round(math.log1p(0.01**2 * math.expm1(1.0)), 10)
    True
    >>> forward >= backward
    True
    """
    from scipy import integrate  # scalar quadrature: only this check needs scipy here

    a = float(check_alpha(alpha))
    if not a > 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    q = check_positive(sampling_rate, "sampling_rate")
    if not q <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate!r}")
    mu = check_positive(shift, "shift")
    log_normal = -0.5 * math.log(2.0 * math.pi)

    def log_ratio(x: float) -> float:
        return float(
            np.logaddexp(
                math.log1p(-q) if q < 1.0 else -math.inf, math.log(q) + mu * x - mu * mu / 2.0
            )
        )

    def divergence(lam: float) -> float:
        # The tilted mass sits near λμ (forward) or 0: integrate well past both. Where the integral
        # is huge, it is scaled by exp(−m), m its integrand's log at that peak, to stay finite.
        centre = max(lam, 0.0) * mu
        m = max(0.0, log_normal - centre * centre / 2.0 + lam * log_ratio(centre))

        def integrand(x: float) -> float:
            log_density, t = log_normal - x * x / 2.0 - m, lam * log_ratio(x)
            # exp(log φ + t) − exp(log φ), without overflow for large t nor cancellation for small t
            return (
                math.exp(log_density + t) - math.exp(log_density)
                if t > 1.0
                else math.exp(log_density) * math.expm1(t)
            )

        value, error = integrate.quad(
            integrand,
            -40.0,
            40.0 + centre + mu,
            points=[0.0, mu, centre],
            epsabs=0.0,
            epsrel=1e-9,
            limit=1000,
        )
        if not error <= 1e-7 * abs(value):
            raise ArithmeticError(
                f"quadrature did not converge at alpha={a}, q={q}, shift={mu}: {value} ± {error}"
            )
        # log E_N[(M/N)^λ] = log(1 + value·e^m) = m + log(e^−m + value)
        return (math.log1p(value) if m == 0.0 else m + math.log(math.exp(-m) + value)) / (a - 1.0)

    return divergence(a), divergence(1.0 - a)


def gaussian_group_rdp(
    alpha: float | np.ndarray, group_size: float, epsilon: float
) -> float | np.ndarray:
    """Exact group RDP of the Gaussian mechanism ``f(S) + N(0, Δ_f²/ε²)``: ``α k² ε² / 2``.

    A group of ``k`` replaced records moves a Δ_f-sensitive ``f`` by at most ``kΔ_f``.
    """
    a = check_alpha(alpha)
    k = check_positive(group_size, "group_size")
    epsilon = check_epsilon(epsilon)
    return _as_output(a * k**2 * epsilon**2 / 2.0, alpha)


def gaussian_group_epsilon(group_size: float, epsilon: float, delta: float) -> float:
    """Closed form of Lemma M over all α > 1 for :func:`gaussian_group_rdp`:
    ``k²ε²/2 + kε·sqrt(2 log(1/δ))`` (our Figure 2 baseline; the paper gives no formula)."""
    k = check_positive(group_size, "group_size")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    return k**2 * epsilon**2 / 2.0 + k * epsilon * math.sqrt(2.0 * math.log(1.0 / delta))
