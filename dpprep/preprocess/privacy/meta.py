"""Theorem 2 of Hu, Sanyal, Schölkopf (2024): overall RDP of a DP algorithm run on pre-processed
data.

A pre-processing ``π`` with sensitivities ``(Δ∞, Δ2)`` (Def. 4) followed by a mechanism ``A`` that
is
``(α, ε(α))``-RDP and ``(α, ε̃(α, τ))``-SRDP is ``(α, ε̂(α))``-RDP with (Eq. 3), for Hölder
exponents ``p_h, q_h > 1`` and the induced L12 budget ``τ* = Δ2·Δ∞``::

    ε̂ ≤ max{ (αp−1)/(p(α−1))·ε̃(αp, τ*) + ε((pα−1)/(p−1)),
             (αq−1)/(q(α−1))·ε(αq)     + ε̃((qα−1)/(q−1), τ*) }

Public API (kept stable; other modules build on it):

- The pre-processing's ``(linf, l2)`` come as a :class:`dpprep.preprocess.sensitivity.Sensitivity`
  (``.tau`` = τ* = l2·linf), defined with the pre-processings so that they need no accountant.
- :func:`theorem2` / :func:`theorem2_branches` — Eq. 3, exponents optimised numerically per branch
  (independently, as the paper allows) unless given; ``combine="max"`` (paper, default) or ``"min"``
  (the hybrid construction of the proof, App. B, is symmetric, so each branch alone bounds both
  directions).
- :func:`eq43` — the ``p_h = q_h = 2`` special case behind Table 2:
  ``(2α−1)/(2(α−1))·[ε̃(2α, τ*) + ε(2α)]``, with the paper's constant 1.05 for α ≥ 11.
- :func:`pure_dp_bound` — Eqs. 44–45 for pure-DP mechanisms: ``ε(∞) + ε̃(∞, τ*)``.
- :func:`group_privacy_rdp` — the naive group-privacy baseline (Fig. 2; the paper gives no formula).
- :func:`check_mechanism` — the checks every function here that returns a privacy level applies.
- :func:`overall_privacy` — the pipeline's RDP curve, its (ε, δ) via Lemma M, optimal α and the
  group-privacy baseline. :func:`calibrate_mechanism` — the mechanism ε (noise level) for a target
  overall ε.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable, Literal

import numpy as np
from scipy.optimize import brentq

from dpprep.preprocess.privacy.renyi import (
    NoAdmissibleOrder,
    check_alpha,
    gaussian_group_rdp,
    rdp_to_dp,
)
from dpprep.preprocess.privacy.sgd_samp import ORDER_GRID, Sampling, SubsampledSGD
from dpprep.preprocess.privacy.sgd_samp import from_table1 as sgd_from_table1
from dpprep.preprocess.privacy.table1 import (
    DPGD,
    DPSGDIteration,
    DPSGDSampling,
    Gaussian,
    Laplace,
    Mechanism,
)
from dpprep.preprocess.sensitivity import Sensitivity
from dpprep.renames import module_renames, renamed_kwargs
from dpprep.validation import check_delta, check_epsilon, check_positive, check_positive_int

if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(
        globals(), {"calibrate": "calibrate_mechanism", "Calibration": "MechanismCalibration"}
    )

__all__ = [
    "TABLE2_ALPHA_MIN",
    "TABLE2_CONSTANT",
    "theorem2_branches",
    "theorem2",
    "eq43",
    "pure_dp_bound",
    "group_privacy_rdp",
    "check_mechanism",
    "rigorous_mechanism",
    "default_group_size",
    "OverallPrivacy",
    "overall_privacy",
    "MechanismCalibration",
    "calibrate_mechanism",
    "SgdCalibration",
    "calibrate_subsampled_sgd",
]

Mode = Literal["exact", "table2"]
Combine = Literal["max", "min"]

# Eq. 43: (2α−1)/(2(α−1)) ≤ (2·11−1)/(2·10) = 1.05 for α ≥ 11.
TABLE2_ALPHA_MIN = 11.0
TABLE2_CONSTANT = 1.05


def _check_tau(tau: float) -> float:
    return check_positive(tau, "tau", allow_zero=True)


# Hölder-exponent search: p−1 on a log grid over [1e−6, 1e6] (wide, so that τ = 0 recovers ε(α) to
# ~1e−6), then zooms per α.
_HOLDER_U = np.linspace(math.log(1e-6), math.log(1e6), 240)
_HOLDER_ZOOM_POINTS = 33
_HOLDER_ZOOM_ROUNDS = 4


def _branch1(mech: Mechanism, tau: float, a: np.ndarray, p: np.ndarray) -> np.ndarray:
    # SRDP step between π1(S1) and the hybrid (order αp), RDP step hybrid → π2(S2).
    coef = (a * p - 1.0) / (p * (a - 1.0))
    with np.errstate(over="ignore", invalid="ignore"):
        return coef * mech.srdp_or_inf(a * p, tau) + mech.rdp_or_inf((p * a - 1.0) / (p - 1.0))


def _branch2(mech: Mechanism, tau: float, a: np.ndarray, q: np.ndarray) -> np.ndarray:
    coef = (a * q - 1.0) / (q * (a - 1.0))
    with np.errstate(over="ignore", invalid="ignore"):
        return coef * mech.rdp_or_inf(a * q) + mech.srdp_or_inf((q * a - 1.0) / (q - 1.0), tau)


def _optimise_exponent(
    branch: Callable[[np.ndarray, np.ndarray], np.ndarray], a: np.ndarray
) -> np.ndarray:
    """min over the Hölder exponent (p−1 ∈ [1e−6, 1e6]) of ``branch(α, p)`` for every α in ``a``."""
    a = a[:, None]
    u = np.broadcast_to(_HOLDER_U, (a.shape[0], _HOLDER_U.size))
    values = np.nan_to_num(branch(a, 1.0 + np.exp(u)), nan=np.inf)
    rows = np.arange(a.shape[0])
    step = np.full(a.shape[0], _HOLDER_U[1] - _HOLDER_U[0])
    lo_u, hi_u = _HOLDER_U[0], _HOLDER_U[-1]
    for _ in range(_HOLDER_ZOOM_ROUNDS):
        i = np.argmin(values, axis=1)
        best_u, best = u[rows, i], values[rows, i]
        left = np.maximum(lo_u, best_u - step)
        right = np.minimum(hi_u, best_u + step)
        u = left[:, None] + (right - left)[:, None] * np.linspace(0.0, 1.0, _HOLDER_ZOOM_POINTS)
        values = np.nan_to_num(branch(a, 1.0 + np.exp(u)), nan=np.inf)
        u = np.concatenate([u, best_u[:, None]], axis=1)  # keep the incumbent
        values = np.concatenate([values, best[:, None]], axis=1)
        step = (right - left) / (_HOLDER_ZOOM_POINTS - 1)
    return values.min(axis=1)


def theorem2_branches(
    mechanism: Mechanism,
    tau: float,
    alpha: float | np.ndarray,
    *,
    p_h: float | None = None,
    q_h: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The two branches of Eq. 3 at order(s) ``alpha``, each minimised over its Hölder exponent
    (``p_h`` / ``q_h`` fixed if given; both must be > 1: the paper's ``p, q ≥ 1`` holds only as a
    limit). An exponent whose orders
    fall outside the mechanism's admissible range gives ``inf`` for that exponent.

    Only ``tau`` is known here: for DP-SGD-samp / -iter the caller vouches that ``gamma_pw`` /
    ``kappa`` fit the pre-processing (:func:`overall_privacy` checks them from a Sensitivity).
    """
    _check_enforced(mechanism)
    tau = _check_tau(tau)
    a = np.atleast_1d(check_alpha(alpha)).astype(float).ravel()
    for name, value in (("p_h", p_h), ("q_h", q_h)):
        if value is not None and not (math.isfinite(value) and value > 1.0):
            raise ValueError(f"{name} must be a finite Hölder exponent > 1, got {value!r}")
    b1 = (
        _branch1(mechanism, tau, a, np.full_like(a, p_h))
        if p_h
        else _optimise_exponent(lambda aa, pp: _branch1(mechanism, tau, aa, pp), a)
    )
    b2 = (
        _branch2(mechanism, tau, a, np.full_like(a, q_h))
        if q_h
        else _optimise_exponent(lambda aa, qq: _branch2(mechanism, tau, aa, qq), a)
    )
    return b1, b2


def theorem2(
    mechanism: Mechanism,
    tau: float,
    alpha: float | np.ndarray,
    *,
    combine: Combine = "max",
    p_h: float | None = None,
    q_h: float | None = None,
) -> float | np.ndarray:
    """Theorem 2 (Eq. 3): RDP ``ε̂(α)`` of ``A∘π`` for pre-processing budget ``tau`` = Δ2·Δ∞.

    ``combine="max"`` is the paper's statement; ``"min"`` is also valid (the hybrid construction of
    the proof, App. B, is symmetric) and never worse.
    Returns ``inf`` at orders where no admissible exponent exists (e.g. beyond DP-SGD's α-range).

    Closed form used as an independent check: when ``ε(α) = aα`` and ``ε̃(α, τ) = bα`` (Gaussian,
    DP-GD, DP-SGD-iter), each branch equals ``(α−1+αs)(bα/(α−1) + a/s)`` with ``s = p−1``, minimised
    at ``s = (α−1)sqrt(a/b)/α`` to ``α(√a + √b)²``. For the Gaussian that is ``αε²(1 + Lτ/Δ_f)²/2``:
    exact Theorem 2 equals Gaussian group privacy with a group of size ``1 + τ*``.
    """
    if combine not in ("max", "min"):
        raise ValueError(f"combine must be 'max' or 'min', got {combine!r}")
    b1, b2 = theorem2_branches(mechanism, tau, alpha, p_h=p_h, q_h=q_h)
    out = np.maximum(b1, b2) if combine == "max" else np.minimum(b1, b2)
    return float(out[0]) if np.ndim(alpha) == 0 else out.reshape(np.shape(alpha))


def eq43(
    mechanism: Mechanism,
    tau: float,
    alpha: float | np.ndarray,
    *,
    constant: Literal["paper", "exact"] = "paper",
) -> float | np.ndarray:
    """Eq. 43 (``p_h = q_h = 2``): ``c(α)·[ε̃(2α, τ) + ε(2α)]``, the formula behind Table 2.

    ``constant="paper"``: ``c = 1.05``, valid only for ``α ≥ 11`` (ValueError below);
    ``constant="exact"``: ``c = (2α−1)/(2(α−1))`` for any α > 1. Raises ValueError where ``2α`` is
    outside the mechanism's range (e.g. DP-SGD-samp needs 2α inside Theorem 13's range).
    A mechanism built with ``enforce_range=False`` is evaluated algebraically — that is how
    ``table2.derived_cell`` evaluates the printed Table 2 — and the value is then not a guarantee.
    """
    tau = _check_tau(tau)
    a = check_alpha(alpha)
    if constant == "paper":
        if np.any(a < TABLE2_ALPHA_MIN):
            raise ValueError(
                f"eq43 with the paper's constant 1.05 needs alpha >= 11, got {float(np.min(a))!r}"
            )
        c = TABLE2_CONSTANT
    elif constant == "exact":
        # per-order array; float above
        c = (2.0 * a - 1.0) / (2.0 * (a - 1.0))  # type: ignore[assignment]
    else:
        raise ValueError(f"constant must be 'paper' or 'exact', got {constant!r}")
    out = c * (np.asarray(mechanism.srdp(2.0 * a, tau)) + np.asarray(mechanism.rdp(2.0 * a)))
    return float(out) if np.ndim(alpha) == 0 else out


def _eq43_or_inf(mechanism: Mechanism, tau: float, a: np.ndarray) -> np.ndarray:
    return TABLE2_CONSTANT * (mechanism.srdp_or_inf(2.0 * a, tau) + mechanism.rdp_or_inf(2.0 * a))


def pure_dp_bound(mechanism: Mechanism, tau: float) -> float:
    """Eqs. 44–45 (``p_h = q_h → 1``) for pure-DP mechanisms: ``ε̂(α) ≤ ε(∞) + ε̃(∞, τ)`` for all α,
    i.e. the pipeline is pure ``(ε(∞) + ε̃(∞, τ))``-DP."""
    if not mechanism.pure:
        raise ValueError(f"{mechanism.name} is not a pure-DP mechanism; use theorem2 or eq43")
    tau = _check_tau(tau)
    return float(mechanism.rdp(math.inf) + mechanism.srdp(math.inf, tau))


def group_privacy_rdp(
    mechanism: Mechanism, group_size: float
) -> Callable[[np.ndarray], np.ndarray] | None:
    """Naive group-privacy baseline: RDP of ``mechanism`` w.r.t. datasets differing in
    ``group_size``
    records, as a vectorised curve over α — or ``None`` where no exact form is defined here.

    Gaussian: ``αk²ε²/2`` (f moves by ≤ kΔ_f). DP-GD: ``2αk²ε²`` (the average gradient
    moves by ≤ 2kL/n). Laplace/Exponential: ``kε`` (pure-DP group privacy). DP-SGD variants: None
    (their RDP bounds are for one differing record only). Mironov's generic group lemma (group size
    ``2^c`` ⇒ ``3^c ε(2^c α)``) is deliberately not used: it gives a much weaker baseline.
    """
    k = check_positive(group_size, "group_size")
    if isinstance(mechanism, Gaussian):
        eps = mechanism.epsilon
        return lambda a: gaussian_group_rdp(np.asarray(a, dtype=float), k, eps)  # type: ignore[return-value]  # array in, array out
    if isinstance(mechanism, DPGD):
        eps = mechanism.epsilon
        return lambda a: 4.0 * gaussian_group_rdp(np.asarray(a, dtype=float), k, eps)  # type: ignore[return-value]  # array in, array out
    if isinstance(mechanism, Laplace):  # includes Exponential
        eps = mechanism.epsilon
        return lambda a: np.full(np.shape(a), k * eps, dtype=float)
    return None


def _check_enforced(mechanism: Mechanism) -> None:
    if not isinstance(mechanism, Mechanism):
        raise TypeError(f"mechanism must be a table1 Mechanism, got {type(mechanism).__name__}")
    if not mechanism.enforce_range:
        raise ValueError(
            f"{mechanism.name} was built with enforce_range=False (an algebraic evaluation of the"
            " Table-1 formula, for printing Table 2 only); it carries no privacy guarantee — build"
            " it with enforce_range=True (the default)"
        )


def check_mechanism(mechanism: Mechanism, preprocessing_sensitivity: Sensitivity) -> None:
    """Raises ValueError unless ``mechanism``'s Table-1 bounds apply to Theorem 2's hybrid pairs
    for a pre-processing with these sensitivities:

    - the mechanism enforces its α-range (not built with ``enforce_range=False``);
    - DP-SGD-iter: ``kappa ≥ Δ∞`` (the hybrid pairs of the proof, App. B, differ in up to Δ∞
      records);
    - not DP-SGD-samp: Table 1's RDP ``α²ε²/2`` for it (Abadi et al.'s moments lemma) is not a valid
      bound under the paper's replace-one adjacency. A sampled gradient can move by 2L, i.e. noise
      multiplier z/2, and dp-accounting's RDP of exactly this algorithm (batch-1 sampling,
      replace-one, multiplier z/2) exceeds ``α²ε²/2`` at orders up to ≈ 11.5 on a sweep of n ≤ 10⁶
      (e.g. n = 10⁴, z/2 = 1.2), with no n-independent safe range established. Its formula is
      never turned into a guarantee (:mod:`dpprep.preprocess.privacy.table2` still evaluates it to
      print the paper's Table 2); :func:`overall_privacy` / :func:`calibrate_mechanism` first
      replace the mechanism by :func:`rigorous_mechanism`, whose bounds are proved;
    - :class:`~dpprep.preprocess.privacy.sgd_samp.SubsampledSGD`: its ``linf`` equals the
      pre-processing's Δ∞ (capped at n).
    """
    _check_enforced(mechanism)
    if not isinstance(preprocessing_sensitivity, Sensitivity):
        raise ValueError(
            "preprocessing_sensitivity must be a dpprep.preprocess.sensitivity.Sensitivity"
        )
    linf = preprocessing_sensitivity.linf
    if isinstance(mechanism, DPSGDIteration) and mechanism.kappa < linf:
        raise ValueError(
            f"dp_sgd_iteration: kappa={mechanism.kappa} < linf={linf}; Theorem 2's hybrid pairs "
            "differ in up to Δ∞ records, so κ_τ must be at least Δ∞"
        )
    if isinstance(mechanism, DPSGDSampling):
        raise ValueError(
            "dp_sgd_sampling: Table 1's RDP α²ε²/2 is not a valid bound under replace-one adjacency"
            " (a sampled gradient moves by up to 2L; dp-accounting's RDP of this algorithm exceeds"
            " it at orders up to ≈ 11.5); overall_privacy/calibrate_mechanism account it with the"
            " rigorous dpprep.preprocess.privacy.sgd_samp.SubsampledSGD (rigorous_mechanism) — use"
            " those, or build a SubsampledSGD for theorem2"
        )
    if isinstance(mechanism, SubsampledSGD) and mechanism.linf != min(linf, float(mechanism.n)):
        raise ValueError(
            f"subsampled_sgd: linf={mechanism.linf} must equal the pre-processing's Δ∞={linf} (its "
            "SRDP covers pairs differing in ≤ linf records, each by ≤ Δ2 = τ*/linf)"
        )


def rigorous_mechanism(mechanism: Mechanism, preprocessing_sensitivity: Sensitivity) -> Mechanism:
    """The mechanism whose bounds :func:`overall_privacy` uses: Table 1's DP-SGD-samp row becomes
    :func:`dpprep.preprocess.privacy.sgd_samp.from_table1` (the same algorithm — one uniform index
    per step, σ = L·sqrt(2cT)/(εn) — with a replace-one RDP from dp-accounting and an SRDP without
    amplification by sampling for the pre-processing's Δ∞); every other mechanism is returned
    unchanged."""
    if isinstance(mechanism, DPSGDSampling) and isinstance(preprocessing_sensitivity, Sensitivity):
        _check_enforced(mechanism)
        return sgd_from_table1(mechanism, preprocessing_sensitivity.linf)
    return mechanism


def default_group_size(linf: float, n: int | None = None) -> int:
    """Group size of the naive group-privacy baseline: ``ceil(Δ∞) + 1``, capped at ``n`` if known.

    Pre-processed neighbours ``π1(S1)``, ``π2(S2)`` differ in the replaced record itself plus up to
    Δ∞ common records (proof of Theorem 2, App. B). Figure 2 of the paper counts ``k = Δ∞``; pass
    that explicitly to reproduce it (it is not a valid guarantee).
    """
    linf = check_positive(linf, "linf", allow_zero=True)
    k = math.ceil(linf) + 1
    return min(k, check_positive_int(n, "n")) if n is not None else k


@dataclasses.dataclass(frozen=True, eq=False)
class OverallPrivacy:
    """Privacy of a pre-processed pipeline ``A∘π`` (result of :func:`overall_privacy`).

    ``alphas``/``rdp``: the pipeline's RDP curve on a display grid (``inf`` where inadmissible);
    ``epsilon``: the ``(epsilon, delta)``-DP level via Lemma M at ``optimal_alpha`` (for pure-DP
    mechanisms ``epsilon`` is a pure-DP level, ``optimal_alpha = inf``); ``group_*``: the naive
    group-privacy baseline with group size ``group_size`` (None where undefined).
    """

    mechanism: Mechanism
    sensitivity: Sensitivity
    mode: str
    combine: str
    delta: float
    epsilon: float
    optimal_alpha: float
    alphas: np.ndarray
    rdp: np.ndarray
    pure: bool
    group_size: int | None
    group_epsilon: float | None
    group_optimal_alpha: float | None

    @property
    def tau(self) -> float:
        return self.sensitivity.tau


def _display_grid(alpha_min: float) -> np.ndarray:
    if alpha_min > 1.0:
        return alpha_min * np.logspace(0.0, 3.0, 121)
    return 1.0 + np.logspace(-2.0, 3.0, 121)


def overall_privacy(
    mechanism: Mechanism,
    preprocessing_sensitivity: Sensitivity,
    *,
    delta: float,
    alphas: np.ndarray | None = None,
    mode: Mode = "exact",
    combine: Combine = "max",
    group_size: int | None = None,
) -> OverallPrivacy:
    """Overall (ε, δ)-DP of pre-processing (sensitivity ``(Δ∞, Δ2)``) followed by ``mechanism``.

    ``mode="exact"``: Theorem 2 (Eq. 3) with optimised Hölder exponents, Lemma M over all α > 1.
    ``mode="table2"``: Eq. 43 with the paper's constant 1.05, Lemma M over α ≥ 11 (what Table 2 and
    Fig. 2's default curve use). Pure-DP mechanisms (Laplace, Exponential) use Eqs. 44–45 in both
    modes — the p, q → 1 limit of Eq. 3 — and are pure ``ε(1 + Lτ/Δ)``-DP, for every δ.
    ``alphas``: restrict Lemma M to these orders (otherwise minimised continuously).
    ``group_size``: the baseline's group size k (default :func:`default_group_size`:
    ``min(ceil(Δ∞) + 1, n)``, the records in which pre-processed neighbours can differ; the paper's
    Figure 2 uses ``k = Δ∞``, which can be passed explicitly).

    Table 1's DP-SGD-samp is first replaced by :func:`rigorous_mechanism` (its Table-1 RDP is not a
    valid replace-one bound); the result's ``mechanism`` is then the rigorous one.
    :func:`check_mechanism` is applied next: ValueError for a mechanism built with
    ``enforce_range=False``, for DP-SGD-iter with ``kappa < Δ∞`` and for SubsampledSGD with
    ``linf ≠ Δ∞``. Raises :class:`~dpprep.preprocess.privacy.renyi.NoAdmissibleOrder` (a ValueError)
    if no order satisfies the mechanism's assumptions.
    """
    mechanism = rigorous_mechanism(mechanism, preprocessing_sensitivity)
    check_mechanism(mechanism, preprocessing_sensitivity)
    if mode not in ("exact", "table2"):
        raise ValueError(f"mode must be 'exact' or 'table2', got {mode!r}")
    if combine not in ("max", "min"):
        raise ValueError(f"combine must be 'max' or 'min', got {combine!r}")
    delta = check_delta(delta)
    sens = preprocessing_sensitivity
    tau = sens.tau
    alpha_min = TABLE2_ALPHA_MIN if mode == "table2" else 1.0
    if alphas is not None:
        alphas = check_alpha(alphas, "alphas").ravel()
        if alphas.size == 0:
            raise ValueError(
                "alphas must hold at least one order > 1 (or be None to minimise over every order)"
            )
        if np.any(alphas < alpha_min):
            raise ValueError(
                f"mode='table2' needs every alpha >= 11, got min {float(alphas.min())!r}"
            )

    try:
        if mechanism.pure:
            eps_hat = pure_dp_bound(mechanism, tau)
            curve = lambda a: np.full(np.shape(a), eps_hat)  # noqa: E731
            epsilon, alpha_opt = eps_hat, math.inf
        else:
            if mode == "table2":
                curve = lambda a: _eq43_or_inf(mechanism, tau, np.asarray(a, dtype=float))  # noqa: E731
            else:
                curve = lambda a: np.asarray(  # noqa: E731
                    theorem2(mechanism, tau, np.asarray(a, dtype=float), combine=combine)
                )
            conv = rdp_to_dp(curve, delta, alpha_min=alpha_min, alphas=alphas)
            epsilon, alpha_opt = conv.epsilon, conv.alpha

        grid = alphas if alphas is not None else _display_grid(alpha_min)
        if math.isfinite(alpha_opt) and alphas is None:
            grid = np.unique(np.append(grid, alpha_opt))
        values = np.asarray(curve(grid), dtype=float)

        if group_size is not None:
            k = check_positive_int(group_size, "group_size")
        else:
            k = default_group_size(sens.linf, getattr(mechanism, "n", None))
        group_curve = group_privacy_rdp(mechanism, k)
        group_eps = group_alpha = None
        if group_curve is not None:
            if mechanism.pure:
                group_eps, group_alpha = float(group_curve(np.array([2.0]))[0]), math.inf
            else:
                g = rdp_to_dp(group_curve, delta, alphas=alphas)
                group_eps, group_alpha = g.epsilon, g.alpha
    except OverflowError as err:
        # Python floats raise (numpy's give inf) where ε² or e^ε leaves the float range; say which
        # input.
        raise ValueError(
            f"the overall privacy of {mechanism} with sensitivity {sens} overflows a float ({err}):"
            " the mechanism's epsilon (or the sensitivity) is far too large for a meaningful"
            " bound; use a smaller one"
        ) from err
    return OverallPrivacy(
        mechanism=mechanism,
        sensitivity=sens,
        mode=mode,
        combine=combine,
        delta=delta,
        epsilon=float(epsilon),
        optimal_alpha=float(alpha_opt),
        alphas=np.asarray(grid, dtype=float),
        rdp=values,
        pure=mechanism.pure,
        group_size=k if group_curve is not None else None,
        group_epsilon=group_eps,
        group_optimal_alpha=group_alpha,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class MechanismCalibration:
    """Result of :func:`calibrate_mechanism`: the mechanism's own ε, the mechanism, and its overall
    privacy (``overall.epsilon <= target``, within the bisection's relative tolerance of it)."""

    mechanism_epsilon: float
    mechanism: Mechanism
    overall: OverallPrivacy


def calibrate_mechanism(
    mechanism_factory: Callable[[float], Mechanism],
    preprocessing_sensitivity: Sensitivity,
    *,
    target_epsilon: float,
    delta: float,
    mode: Mode = "exact",
    combine: Combine = "max",
    initial: float = 1.0,
    rtol: float = 1e-8,
) -> MechanismCalibration:
    """Largest mechanism ε (smallest noise) whose pipeline is ``(target_epsilon, delta)``-DP.

    ``mechanism_factory(eps)`` builds the mechanism at its own privacy parameter ``eps``, e.g.
    ``lambda e: table1.dp_gd(epsilon=e, lipschitz=1, smoothness=1.25)``. The overall ε is increasing
    in ``eps`` (every Table-1 bound is, and α-ranges only shrink), so a bracket is grown from
    ``initial`` by factors of 4 and the root is found by Brent's method in log(eps) to relative
    precision ``rtol``; the returned eps is on the feasible side (overall ε ≤ target). An ``eps``
    with no admissible order counts as too large.
    Every mechanism the factory builds must pass :func:`check_mechanism` (ValueError otherwise,
    e.g. for ``enforce_range=False``).
    """
    if not callable(mechanism_factory):
        raise TypeError("mechanism_factory must be callable (eps -> table1 Mechanism)")
    target = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    initial = check_epsilon(initial, "initial")
    rtol = check_positive(rtol, "rtol")
    check_mechanism(
        rigorous_mechanism(mechanism_factory(initial), preprocessing_sensitivity),
        preprocessing_sensitivity,
    )

    def evaluate(eps: float) -> OverallPrivacy | None:
        try:
            return overall_privacy(
                mechanism_factory(eps),
                preprocessing_sensitivity,
                delta=delta,
                mode=mode,
                combine=combine,
            )
        except NoAdmissibleOrder:
            return None

    def too_big(result: OverallPrivacy | None) -> bool:
        return result is None or result.epsilon > target

    lo, hi = initial, initial
    lo_result = evaluate(lo)
    for _ in range(80):
        if not too_big(lo_result):
            break
        hi, lo = lo, lo / 4.0
        lo_result = evaluate(lo)
    else:
        raise ValueError(f"target_epsilon={target} is not reachable: even eps={lo:.3g} exceeds it")
    if hi == lo:
        for _ in range(80):
            hi *= 4.0
            if too_big(evaluate(hi)):
                break
        else:
            raise ValueError(
                f"target_epsilon={target!r} is met even at mechanism epsilon={hi:.3g} (next to no"
                " noise): no calibration is needed for so large a target; ask for a smaller"
                " target_epsilon"
            )

    def excess(
        u: float,
    ) -> float:  # log(overall/target) at eps = e^u; inadmissible counts as far above
        result = evaluate(math.exp(u))
        return 50.0 if result is None else math.log(result.epsilon / target)

    # Brent's method in log-space (superlinear where the curve is smooth), then make sure the
    # returned eps is on the feasible side (overall <= target).
    root = brentq(excess, math.log(lo), math.log(hi), xtol=rtol / 4.0, rtol=4 * np.finfo(float).eps)
    eps = math.exp(root)
    for _ in range(60):
        result = evaluate(eps)
        if not too_big(result):
            lo, lo_result = eps, result
            break
        eps *= 1.0 - rtol
    assert lo_result is not None and not too_big(lo_result)
    return MechanismCalibration(
        mechanism_epsilon=lo, mechanism=lo_result.mechanism, overall=lo_result
    )


@dataclasses.dataclass(frozen=True)
class SgdCalibration:
    """Result of :func:`calibrate_subsampled_sgd`: the smallest noise multiplier found whose
    pipeline is (target ε, δ)-DP, the averaged-gradient noise std ``zC/B`` for
    ``dpprep.algorithms`` (``noise_std``), and the Theorem-2 accounting (``overall``)."""

    noise_multiplier: float
    noise_std: float
    mechanism: SubsampledSGD
    overall: OverallPrivacy


@renamed_kwargs(clip_norm="l2_clip_norm")
def calibrate_subsampled_sgd(
    *,
    target_epsilon: float,
    delta: float,
    n: int,
    batch_size: int,
    steps: int,
    sensitivity,
    sampling: Sampling = "poisson",
    l2_clip_norm: float = 1.0,
    smoothness: float = 1.0,
    mode: Mode = "exact",
    combine: Combine = "max",
    rtol: float = 1e-4,
) -> SgdCalibration:
    """Noise multiplier of subsampled DP-SGD on pre-processed data (pre-processing
    ``sensitivity`` = a :class:`~dpprep.preprocess.sensitivity.Sensitivity`, e.g. PCA's with
    Δ∞ = n) so that the pipeline is ``(target_epsilon, delta)``-DP by Theorem 2
    (:func:`calibrate_mechanism`).

    For a DP-SGD variant of Figure 3 (the paper trains with DP-SGD but analyses DP-GD): pass the
    returned ``noise_std`` as the learner's absolute noise on the averaged gradient, with clip norm
    ``l2_clip_norm`` and the same ``sampling``, ``batch_size`` and ``steps``. E.g. n = 10⁴, B = 100,
    T = 1000, PCA τ* = 14.81 (``Sensitivity(10_000, 14.81e-4)``), μ = 1.25, (1, 1e-5): z ≈ 32
    (z ≈ 3.3 without pre-processing).
    """
    if not isinstance(sensitivity, Sensitivity):
        raise TypeError(
            f"sensitivity must be a dpprep.preprocess.Sensitivity, got {type(sensitivity).__name__}"
        )
    target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    # Lemma M gives ε >= log(1/δ)/(α−1) at every order, and orders beyond ORDER_GRID are
    # inadmissible: no noise gets below log(1/δ)/(α_max−1). Say so at once rather than after a
    # search of ~80 evaluations down to a multiplier of 1e48.
    floor = math.log(1.0 / delta) / (ORDER_GRID[-1] - 1.0)
    if target_epsilon <= floor:
        raise ValueError(
            f"target_epsilon={target_epsilon!r} is not reachable at delta={delta!r}: Lemma M over"
            f" the orders <= {ORDER_GRID[-1]:g} gives epsilon >="
            f" log(1/delta)/{ORDER_GRID[-1] - 1.0:g} = {floor:.4g} whatever the noise; ask for a"
            " larger target_epsilon or delta"
        )

    def factory(eps: float) -> SubsampledSGD:
        return SubsampledSGD(
            epsilon=eps,
            n=n,
            batch_size=batch_size,
            steps=steps,
            linf=sensitivity.linf,
            sampling=sampling,
            l2_clip_norm=l2_clip_norm,
            smoothness=smoothness,
        )

    cal = calibrate_mechanism(
        factory,
        sensitivity,
        target_epsilon=target_epsilon,
        delta=delta,
        mode=mode,
        combine=combine,
        rtol=rtol,
    )
    # the factory builds SubsampledSGD
    mech: SubsampledSGD = cal.mechanism  # type: ignore[assignment]
    return SgdCalibration(
        noise_multiplier=mech.noise_multiplier,
        noise_std=mech.noise,
        mechanism=mech,
        overall=cal.overall,
    )


@dataclasses.dataclass(frozen=True)
class PreprocessedAccountant:
    """Theorem 2 as an accountant of an :class:`~dpprep.plan.ExecutionPlan`: the overall privacy of
    a training run on data pre-processed with ``sensitivity`` (Δ∞, Δ2), replace-one neighbours of
    the raw data. Calibrate a run with ``plan.calibrate(ε, δ, accountant=...)`` and read its ε with
    ``plan.epsilon(z, δ, accountant=...)``; the plan charges its Poisson overflow slack around it.

    The run at multiplier ``z`` (noise std ``z·L`` on each step's sum, ``L`` = ``lipschitz``, the
    clip norm or the loss's Lipschitz constant) is, by the plan's sampler:

    * ``"full"``: DP-GD, Table 1's ``A_GD`` with ``ε_b = √T / z`` (noise ``L√T/ε_b`` on the sum of
      ``T`` steps; RDP ``2αε_b²``);
    * ``"poisson"`` or ``"without_replacement"``: subsampled DP-SGD with the rigorous replace-one
      RDP and its SRDP (:class:`~dpprep.preprocess.privacy.sgd_samp.SubsampledSGD`, ``Δ∞`` from
      ``sensitivity``).

    ``smoothness`` is the loss's μ; ``mode``/``combine`` as in :func:`overall_privacy`; ``rtol``
    the calibration's relative precision (None: 1e-8 for DP-GD, 1e-4 for DP-SGD, whose RDP is
    costlier). Other samplers are refused.
    """

    sensitivity: Sensitivity
    lipschitz: float = 1.0
    smoothness: float = 1.0
    mode: Mode = "exact"
    combine: Combine = "max"
    rtol: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sensitivity, Sensitivity):
            raise TypeError(
                "sensitivity must be a dpprep.preprocess.Sensitivity, got"
                f" {type(self.sensitivity).__name__}"
            )
        check_positive(self.lipschitz, "lipschitz")
        check_positive(self.smoothness, "smoothness")
        if self.mode not in ("exact", "table2"):
            raise ValueError(f"mode must be 'exact' or 'table2', got {self.mode!r}")
        if self.rtol is not None:
            check_positive(self.rtol, "rtol")

    def _check(self, plan) -> None:
        if plan.sampler not in ("full", "poisson", "without_replacement") or plan.random_stop:
            raise ValueError(
                "Theorem 2 accounting here covers full-batch DP-GD and Poisson or"
                f" without-replacement DP-SGD plans, got sampling={plan.sampler!r}"
            )
        if plan.neighboring_relation != "replace_one":
            raise ValueError(
                "Theorem 2 is a replace-one guarantee (pre-processed neighbours differ in place): "
                "create the plan with neighboring_relation='replace_one', got "
                f"{plan.neighboring_relation!r}"
            )

    def mechanism(self, plan, noise_multiplier: float) -> Mechanism:
        """The Table-1 (or rigorous subsampled) mechanism of ``plan``'s run at multiplier ``z``."""
        self._check(plan)
        z = check_positive(noise_multiplier, "noise_multiplier")
        if plan.sampler == "full":
            return DPGD(
                epsilon=math.sqrt(plan.steps) / z,
                lipschitz=self.lipschitz,
                smoothness=self.smoothness,
            )
        return SubsampledSGD(
            epsilon=1.0 / z,
            n=plan.n,
            batch_size=plan.batch_size,
            steps=plan.steps,
            linf=self.sensitivity.linf,
            sampling=plan.sampler,
            l2_clip_norm=self.lipschitz,
            smoothness=self.smoothness,
        )

    def epsilon(self, plan, noise_multiplier: float, delta: float) -> float:
        return overall_privacy(
            self.mechanism(plan, noise_multiplier),
            self.sensitivity,
            delta=delta,
            mode=self.mode,
            combine=self.combine,
        ).epsilon

    def calibrate(self, plan, target_epsilon: float, delta: float) -> float:
        self._check(plan)
        if plan.sampler == "full":
            cal = calibrate_mechanism(
                lambda e: DPGD(epsilon=e, lipschitz=self.lipschitz, smoothness=self.smoothness),
                self.sensitivity,
                target_epsilon=target_epsilon,
                delta=delta,
                mode=self.mode,
                combine=self.combine,
                rtol=self.rtol or 1e-8,
            )
            return math.sqrt(plan.steps) / cal.mechanism_epsilon
        return calibrate_subsampled_sgd(
            target_epsilon=target_epsilon,
            delta=delta,
            n=plan.n,
            batch_size=plan.batch_size,
            steps=plan.steps,
            sensitivity=self.sensitivity,
            sampling=plan.sampler,
            l2_clip_norm=self.lipschitz,
            smoothness=self.smoothness,
            mode=self.mode,
            combine=self.combine,
            rtol=self.rtol or 1e-4,
        ).noise_multiplier

    def pipeline(self, plan, noise_multiplier: float, delta: float) -> PipelineCharge:
        """The pipeline's ε (pre-processing then ``plan``'s run at multiplier ``z``): the smaller of
        Theorem 2 and group privacy (group size ``ceil(Δ∞) + 1``), each through ``plan.epsilon`` so
        that the plan's Poisson overflow slack is charged."""
        theorem2 = plan.epsilon(noise_multiplier, delta, accountant=self)
        try:
            group = plan.epsilon(noise_multiplier, delta, accountant=_GroupPrivacy(self))
        # the group bound leaves nothing of delta (e.g. its ε overflows the slack)
        except ValueError:
            group = math.inf
        k = default_group_size(self.sensitivity.linf, plan.n)
        which = "Theorem 2" if theorem2 <= group else f"group privacy (k = {k})"
        note = (
            f"sensitivity Δ∞ = {self.sensitivity.linf:g}, Δ2 = {self.sensitivity.l2:g}: the"
            " pipeline (pre-processing then the run) by Hu et al. 2024 Theorem 2 ε ="
            f" {theorem2:.4g}, by group privacy (k = {k}) ε = {group:.4g}; the smaller ({which})"
            " charged, together with the training"
        )
        return PipelineCharge(
            min(theorem2, group),
            theorem2,
            group,
            k,
            "theorem2" if theorem2 <= group else "rdp (group privacy)",
            note,
        )


@dataclasses.dataclass(frozen=True)
class PipelineCharge:
    """What a pre-processed run's pipeline costs (:meth:`PreprocessedAccountant.pipeline`): the
    charged ``epsilon`` (the smaller bound), both bounds, the group size and a note saying which."""

    epsilon: float
    theorem2: float
    group: float
    group_size: int
    accountant: str
    note: str


class _GroupPrivacy:
    """The naive group-privacy bound of a pre-processed run as a plan accountant (epsilon only):
    the run's RDP at group size ``ceil(Δ∞) + 1`` (:func:`overall_privacy`'s ``group_epsilon``; ∞
    where it has none)."""

    def __init__(self, base: PreprocessedAccountant) -> None:
        self.base = base

    def epsilon(self, plan, noise_multiplier: float, delta: float) -> float:
        result = overall_privacy(
            self.base.mechanism(plan, noise_multiplier),
            self.base.sensitivity,
            delta=delta,
            mode=self.base.mode,
            combine=self.base.combine,
        )
        return math.inf if result.group_epsilon is None else float(result.group_epsilon)

    def calibrate(self, plan, target_epsilon: float, delta: float) -> float:  # pragma: no cover
        raise NotImplementedError("group privacy is read, not calibrated, here")
