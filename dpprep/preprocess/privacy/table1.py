"""Table 1 of Hu, Sanyal, Schölkopf (2024): RDP ``ε(α)`` and Smooth-RDP ``ε̃(α, τ)`` of six
mechanisms.

Each mechanism is a frozen dataclass carrying its own privacy parameter ``epsilon`` (the *noise
level* as in Table 1, not a pipeline's final ε), its constants (Lipschitz ``L``, data-smoothness
``μ``, global sensitivity ``Δ``, and n/T/κ/γ where the row needs them) and

- ``rdp(alpha)`` / ``srdp(alpha, tau)``: the Table-1 bounds (vectorised over α), which raise
  ``ValueError`` for an order outside the range where the theorem holds — they never extrapolate;
- ``rdp_or_inf`` / ``srdp_or_inf``: the same with ``inf`` outside the range (used by the
  Theorem-2 optimiser, where an inadmissible Hölder exponent must simply lose);
- ``alpha_range()``: the admissible orders as ``(low, high)`` (low exclusive, high inclusive);
- ``noise``: the noise scale the bound assumes.

Corrections of the printed paper applied here (each repeated where it applies): DP-GD RDP is
``2αε²`` (Theorem 12's proof and Table 1; its statement says ``αε²/2``); the Gaussian SRDP carries
``/Δ_f²`` (Theorem 9's proof and Table 1; its statement drops it); DP-SGD-iter uses Theorem 14's σ
(Table 1 adds an η), its SRDP carries ``ε²`` (Table 1 omits it; Table 2 and the proof need it), its
α-range is Theorem 14's explicit σ condition with μ in the τ-term (as the proof of Lemma 3 needs)
rather than Table 1's "ε = O(1/(nα²))"; DP-SGD-samp uses σ = L·sqrt(2cT)/(εn) so that the tabulated
``α²ε²/2`` holds (Theorem 13's algebra gives ``α²ε²/T`` per step with the printed σ).

``enforce_range=False`` turns a mechanism into a purely algebraic evaluation of the Table-1
formula (no α-range check). It exists only to evaluate the *printed* symbolic Table 2 at the
default :class:`~dpprep.preprocess.privacy.table2.Table2Point`, which lies outside Theorem 14's
range for DP-SGD-iter (``table2.derived_cell`` and ``meta.eq43``); every caller that uses it says
so in its output. Such a mechanism carries no privacy guarantee, so ``meta.theorem2``,
``meta.overall_privacy`` and ``meta.calibrate_mechanism`` refuse it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from dpprep.accounting.dp import sgd_iter_max_order
from dpprep.preprocess.privacy.renyi import check_alpha
from dpprep.validation import check_epsilon, check_positive, check_positive_int

__all__ = [
    "Mechanism",
    "Gaussian",
    "Laplace",
    "Exponential",
    "DPGD",
    "DPSGDSampling",
    "DPSGDIteration",
    "gaussian",
    "laplace",
    "exponential",
    "dp_gd",
    "dp_sgd_sampling",
    "dp_sgd_iteration",
    "TABLE1_ROWS",
    "SGD_SAMP_MIN_ORDER",
    "sgd_remark1_coefficient",
]

#: Smallest Rényi order at which DP-SGD-samp's ``α²ε²/2`` is used (see :class:`DPSGDSampling`).
SGD_SAMP_MIN_ORDER = 3.25


def _out(
    values: np.ndarray, alpha: float | np.ndarray, tau: float | np.ndarray = 0.0
) -> float | np.ndarray:
    return float(values) if np.ndim(alpha) == 0 and np.ndim(tau) == 0 else values


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mechanism:
    """Base class: a Table-1 row. Subclasses define ``_rdp``, ``_srdp`` and optionally the validity
    masks."""

    epsilon: float
    enforce_range: bool = True

    name: ClassVar[str] = "mechanism"
    pure: ClassVar[bool] = False  # pure ε-DP: bounds hold for every α including ∞ (Eqs. 44–45)
    # Whether the ends of alpha_range() are admissible themselves (default: low < α ≤ high).
    low_inclusive: ClassVar[bool] = False
    high_inclusive: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    # --- formulas (no range check) -------------------------------------------------------------
    def _rdp(self, alpha: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _srdp(self, alpha: np.ndarray, tau: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # --- validity --------------------------------------------------------------------------------
    def alpha_range(self) -> tuple[float, float]:
        """Admissible RDP orders ``(low, high)``: ``low < α ≤ high`` unless the class says an end
        is inclusive/exclusive (``low_inclusive``, ``high_inclusive``); ``high < low`` means none.
        """
        return (1.0, math.inf)

    def rdp_valid(self, alpha: np.ndarray) -> np.ndarray:
        lo, hi = self.alpha_range()
        above = alpha >= lo if self.low_inclusive else alpha > lo
        below = alpha <= hi if self.high_inclusive else alpha < hi
        ok = (alpha > 1.0) & above & below
        return ok if self.pure else ok & np.isfinite(alpha)

    def srdp_valid(self, alpha: np.ndarray, tau: np.ndarray) -> np.ndarray:
        return self.rdp_valid(alpha) & np.ones_like(tau, dtype=bool)

    # --- public API ------------------------------------------------------------------------------
    def rdp(self, alpha: float | np.ndarray) -> float | np.ndarray:
        """Table-1 RDP ``ε(α)``; ``ValueError`` for an order outside :meth:`alpha_range`."""
        a = check_alpha(alpha, allow_inf=self.pure)
        if self.enforce_range and not np.all(self.rdp_valid(a)):
            raise ValueError(self._range_message(a))
        return _out(self._rdp(a), alpha)

    def srdp(self, alpha: float | np.ndarray, tau: float | np.ndarray) -> float | np.ndarray:
        """Table-1 Smooth RDP ``ε̃(α, τ)`` for L12 budget ``τ ≥ 0``; ``ValueError`` outside the
        range."""
        a = check_alpha(alpha, allow_inf=self.pure)
        t = _check_tau(tau)
        a, t = np.broadcast_arrays(a, t)
        if self.enforce_range and not np.all(self.srdp_valid(a, t)):
            raise ValueError(self._range_message(a, t))
        return _out(self._srdp(a, t), alpha, tau)

    def rdp_or_inf(self, alpha: np.ndarray) -> np.ndarray:
        """``rdp`` with ``inf`` where the order is inadmissible (no exception; for optimisers)."""
        a = np.asarray(alpha, dtype=float)
        with np.errstate(invalid="ignore", over="ignore"):
            values = self._rdp(np.where(a > 1, a, 2.0))
        ok = (a > 1) & (self.rdp_valid(a) if self.enforce_range else np.isfinite(a) | self.pure)
        return np.where(ok, values, np.inf)

    def srdp_or_inf(self, alpha: np.ndarray, tau: np.ndarray | float) -> np.ndarray:
        a, t = np.broadcast_arrays(np.asarray(alpha, dtype=float), np.asarray(tau, dtype=float))
        with np.errstate(invalid="ignore", over="ignore"):
            values = self._srdp(np.where(a > 1, a, 2.0), t)
        ok = (a > 1) & (self.srdp_valid(a, t) if self.enforce_range else np.isfinite(a) | self.pure)
        return np.where(ok, values, np.inf)

    def _range_message(self, alpha: np.ndarray, tau: np.ndarray | None = None) -> str:
        lo, hi = self.alpha_range()
        where = f" at tau={float(np.max(tau))!r}" if tau is not None else ""
        low_op = "<=" if self.low_inclusive else "<"
        high_op = "<=" if self.high_inclusive else "<"
        return (
            f"{self.name}: Rényi order(s) outside the range where Table 1 holds{where}: need {lo:g}"
            f" {low_op} alpha {high_op} {hi:g}{self._range_note()}, got"
            f" {np.unique(alpha)[:5].tolist()}"
        )

    def _range_note(self) -> str:
        return ""

    def params(self) -> dict:
        """Constructor parameters plus the mechanism name, for results tables."""
        return {"mechanism": self.name, **dataclasses.asdict(self)}


def _check_tau(tau: float | np.ndarray) -> np.ndarray:
    t = np.asarray(tau, dtype=float)
    if np.any(~np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"tau (L12 distance budget) must be finite and >= 0, got {tau!r}")
    return t


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gaussian(Mechanism):
    """Gaussian mechanism ``f(S) + N(0, Δ_f²/ε²)``, f L-Lipschitz w.r.t. ‖S−S'‖_F (Theorem 9).

    RDP ``αε²/2``; SRDP ``αL²τ²ε²/(2Δ_f²)`` (the theorem statement drops ``/Δ_f²``; proof and Table
    1 have it). All α > 1.
    """

    lipschitz: float = 1.0
    sensitivity: float = 1.0
    name: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.lipschitz, "lipschitz")
        check_positive(self.sensitivity, "sensitivity")

    @property
    def noise(self) -> float:
        """Noise standard deviation Δ_f/ε."""
        return self.sensitivity / self.epsilon

    def _rdp(self, alpha):
        return alpha * self.epsilon**2 / 2.0

    def _srdp(self, alpha, tau):
        return alpha * self.lipschitz**2 * tau**2 * self.epsilon**2 / (2.0 * self.sensitivity**2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Laplace(Mechanism):
    """Laplace mechanism ``f(S) + Lap(Δ_f/ε)`` (Theorem 10): pure ε-DP ⇒ RDP ``ε`` for every α ∈ (1,
    ∞]; SRDP ``(Lτ/Δ_f)·ε`` from ``D_∞ ≤ Lτε/Δ_f``."""

    lipschitz: float = 1.0
    sensitivity: float = 1.0
    name: ClassVar[str] = "laplace"
    pure: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.lipschitz, "lipschitz")
        check_positive(self.sensitivity, "sensitivity")

    @property
    def noise(self) -> float:
        """Laplace scale b = Δ_f/ε."""
        return self.sensitivity / self.epsilon

    def _rdp(self, alpha):
        return np.full_like(alpha, self.epsilon, dtype=float)

    def _srdp(self, alpha, tau):
        return np.broadcast_to(
            self.lipschitz * tau / self.sensitivity * self.epsilon, np.shape(alpha)
        ).astype(float)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Exponential(Laplace):
    """Exponential mechanism, ``P(h) ∝ exp(εQ(S,h)/(2Δ_Q))`` with Q L-Lipschitz (Theorem 11): RDP
    ``ε``, SRDP ``(Lτ/Δ_Q)·ε`` for every α ∈ (1, ∞]. ``sensitivity`` is Δ_Q."""

    name: ClassVar[str] = "exponential"

    @property
    def noise(self) -> float:
        """Inverse temperature ε/(2Δ_Q) of the sampling distribution."""
        return self.epsilon / (2.0 * self.sensitivity)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPGD(Mechanism):
    """Full-batch DP-GD with noise ``σ = L√T/(εn)`` on the average gradient (Theorem 12).

    RDP ``2αε²``: the replace-one sensitivity of the average gradient is 2L/n, so each of T steps
    costs ``α(2L/n)²/(2σ²) = 2αε²/T`` (the theorem statement's ``αε²/2`` is a typo).
    SRDP ``αμ²τ²ε²/(2L²)`` with μ the smoothness *in the data* (Def. 6). All α > 1.
    """

    lipschitz: float = 1.0
    smoothness: float = 1.0
    name: ClassVar[str] = "dp_gd"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.lipschitz, "lipschitz")
        check_positive(self.smoothness, "smoothness")

    def noise_std(self, n: int, steps: int) -> float:
        """σ = L√T/(εn) for dataset size ``n`` and ``steps`` = T."""
        n = check_positive_int(n, "n")
        steps = check_positive_int(steps, "steps")
        return self.lipschitz * math.sqrt(steps) / (self.epsilon * n)

    def _rdp(self, alpha):
        return 2.0 * alpha * self.epsilon**2

    def _srdp(self, alpha, tau):
        return alpha * self.smoothness**2 * tau**2 * self.epsilon**2 / (2.0 * self.lipschitz**2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPSGDSampling(Mechanism):
    """DP-SGD sampling one index per step (Theorem 13; batch size 1, as its proof analyses it).

    RDP ``α²ε²/2`` (Abadi et al.'s moments lemma, sampling rate q = 1/n) and SRDP
    ``αμ²τ²ε²γ_pw²/(2L²)`` with ``γ_pw`` the inverse point-wise distance of the compared datasets
    (Def. 7). In Theorem 2 the compared pairs are the hybrids: up to Δ∞ records each move ≤ Δ2 =
    τ*/Δ∞, so relative to τ* = Δ2·Δ∞ one needs ``γ_pw ≥ n/Δ∞``; γ_pw = 1 only when
    Δ∞ = n (PCA, as Theorem 16 (iii) uses it). ``meta.overall_privacy`` checks this against the
    pre-processing.

    Noise: σ = L·sqrt(2cT)/(εn). The paper's σ = L·sqrt(cT)/(εn) gives ``α²ε²/T`` per step, i.e.
    twice the tabulated value; we keep the table and double the noise variance instead.

    Admissible RDP orders: ``SGD_SAMP_MIN_ORDER = 3.25 ≤ α ≤ min{√T/ε, z² log(n/z)}`` with the noise
    multiplier ``z = σ/L``, which must satisfy ``1 ≤ z < n/16`` (Abadi et al.'s conditions σ ≥ 1 and
    q < 1/(16σ); the printed range's ``L²`` is dimensionally odd, this is its noise-multiplier
    reading). Otherwise no order is admissible and :meth:`rdp` raises.

    Why the lower end (our finding, experiment hu2024_table1): Abadi et al.'s lemma is asymptotic
    and for add/remove adjacency; this algorithm's replace-one RDP is about linear in α, so the
    quadratic ``α²ε²/2`` is *false* at small orders (e.g. n = 1000, z = 2: true RDP at α = 1.5 is
    ≥ 1.35× the table value). Against dp-accounting's RDP bound for exactly this algorithm
    (sampling without replacement, batch 1, replace-one) — which depends on (n, z) only, not on T —
    the table value dominates for every α ≥ 3 when n ≥ 28, but at n ∈ [19, 27], z ≈ 1.2 it fails up
    to α ≈ 3.1 (by ≤ 1 %); from α = 3.25 it holds on a sweep over n ≥ 17, 1 ≤ z < n/16 (worst
    margin 2 %, tests/accounting/test_table1.py pins the worst case). Orders below 3.25 are refused.
    Table 2 / Eq. 43 use 2α ≥ 22, far inside the range. The SRDP step is a plain Gaussian bound on
    a mixture and holds for all α > 1.

    Open caveat (not resolved here): that cross-check, like Abadi et al.'s lemma, takes the
    sampled gradient to move by L (noise multiplier z at face value). Under replace-one a sampled
    gradient can move by 2L (‖∇ℓ(z1) − ∇ℓ(z2)‖ ≤ 2L), i.e. multiplier z/2, and then the quadratic
    bound fails on much of this range (e.g. n = 1000, z = 2, α = 22: an exact lower bound of the
    one-step divergence exceeds the table value).
    """

    lipschitz: float = 1.0
    smoothness: float = 1.0
    n: int
    steps: int
    gamma_pw: float = 1.0
    moments_constant: float = 1.0
    name: ClassVar[str] = "dp_sgd_sampling"
    low_inclusive: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.lipschitz, "lipschitz")
        check_positive(self.smoothness, "smoothness")
        object.__setattr__(self, "n", check_positive_int(self.n, "n", minimum=2))
        object.__setattr__(self, "steps", check_positive_int(self.steps, "steps"))
        if not (1.0 <= float(self.gamma_pw) <= self.n):
            raise ValueError(f"gamma_pw must lie in [1, n={self.n}], got {self.gamma_pw!r}")
        if check_positive(self.moments_constant, "moments_constant") < 1.0:
            raise ValueError(
                f"moments_constant (c of Abadi et al.) must be >= 1, got {self.moments_constant!r}"
            )

    @property
    def noise(self) -> float:
        """Per-step gradient noise std σ = L·sqrt(2cT)/(εn)."""
        return (
            self.lipschitz
            * math.sqrt(2.0 * self.moments_constant * self.steps)
            / (self.epsilon * self.n)
        )

    @property
    def noise_multiplier(self) -> float:
        return self.noise / self.lipschitz

    def alpha_range(self) -> tuple[float, float]:
        z = self.noise_multiplier
        if not (1.0 <= z < self.n / 16.0):
            return (
                SGD_SAMP_MIN_ORDER,
                1.0,
            )  # Abadi et al.'s lemma needs 1 <= z < n/16: empty range
        return (
            SGD_SAMP_MIN_ORDER,
            min(math.sqrt(self.steps) / self.epsilon, z**2 * math.log(self.n / z)),
        )

    def _range_note(self) -> str:
        z = self.noise_multiplier
        return (
            f" (noise multiplier z={z:.4g} must satisfy 1 <= z < n/16={self.n / 16:.4g}; "
            f"alpha <= min(sqrt(T)/eps, z^2 log(n/z)); below alpha={SGD_SAMP_MIN_ORDER:g} the "
            "quadratic bound is not valid for this algorithm)"
        )

    def srdp_valid(self, alpha, tau):
        return (alpha > 1.0) & np.isfinite(alpha) & np.ones_like(tau, dtype=bool)

    def _rdp(self, alpha):
        return alpha**2 * self.epsilon**2 / 2.0

    def _srdp(self, alpha, tau):
        return (
            alpha
            * self.smoothness**2
            * tau**2
            * self.epsilon**2
            * self.gamma_pw**2
            / (2.0 * self.lipschitz**2)
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPSGDIteration(Mechanism):
    """DP-SGD by iteration (random stopping T ~ Unif{1..n−κ+1} of fixed-order DP-FGD; Theorem 14).

    Noise σ = sqrt(2 log n / n)·8L/ε on the gradient (Theorem 14; Table 1's extra η is the CNI
    parameter-noise scale ησ). RDP ``αε²/2``; SRDP
    ``αε²τ²μ² n log(n−κ+2) / (2(n−κ+1) L² log n)`` (Table 1 prints it without ε²; Table 2 uses
    it with). With this σ the derivation actually gives 1/16 of both ([DERIVED] by substituting
    Theorem 14's σ); the tabulated values are kept as valid upper bounds.

    The proofs bound the random-stopping sums ``Σ_{j≤m} 1/j`` by ``log(m+1)``, which is a *lower*
    bound of the harmonic number H_m (Feldman et al. likewise state ``log n``); the safe sums give
    ``H_n/log n`` and ``H_m/log(m+1)`` times the derived values, still ≤ 16 × them, so the slack of
    Theorem 14's σ keeps the tabulated values valid.
    :func:`dpprep.accounting.dp.sgd_iter_linearized_rdp` is Thm 26 with the exact H_n; what the plan
    charges, :func:`dpprep.accounting.dp.sgd_iter_rdp`, is the same mixture without Thm 26's
    linearization (≈ half of it, at every α > 1).

    α-range: ``L·sqrt(2α(α−1)) < σ`` for RDP, i.e. ``α < dp.sgd_iter_max_order(σ, L)`` — strict as
    in Theorem 14 (Feldman et al.'s Thm 26, ``dp.sgd_iter_linearized_rdp``, allows equality) — and
    additionally ``τμ·sqrt(2α(α−1)) < σ`` for SRDP (μ, not L, in the τ-term, as the proof of Lemma 3
    needs). Table 1's "ε = O(1/(nα²))" is dropped in favour of these explicit conditions (the two
    do not match). Assumptions not
    checkable here: ℓ convex and β-smooth in θ with step η ≤ 2/β, ``kappa`` = κ_τ bounds the
    Hamming distance of the compared pairs, and the differing records are consecutive in the
    processing order (a modelling assumption for dedup/imputation outputs).
    """

    lipschitz: float = 1.0
    smoothness: float = 1.0
    n: int
    kappa: int
    name: ClassVar[str] = "dp_sgd_iteration"
    high_inclusive: ClassVar[bool] = False  # Theorem 14: L·sqrt(2α(α−1)) < σ (strict)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.lipschitz, "lipschitz")
        check_positive(self.smoothness, "smoothness")
        object.__setattr__(self, "n", check_positive_int(self.n, "n", minimum=2))
        kappa = check_positive_int(self.kappa, "kappa", minimum=0)
        if kappa > self.n:
            raise ValueError(f"kappa must be <= n={self.n}, got {kappa}")
        object.__setattr__(self, "kappa", kappa)

    @property
    def noise(self) -> float:
        """Gradient noise std σ = sqrt(2 log n / n)·8L/ε (Theorem 14)."""
        return math.sqrt(2.0 * math.log(self.n) / self.n) * 8.0 * self.lipschitz / self.epsilon

    def alpha_range(self) -> tuple[float, float]:
        # L sqrt(2α(α−1)) < σ  ⇔  α < sgd_iter_max_order(σ, L)  (high end excluded)
        return (1.0, sgd_iter_max_order(self.noise, self.lipschitz))

    def _range_note(self) -> str:
        return f" (sigma={self.noise:.4g}; SRDP also needs tau*mu*sqrt(2 alpha(alpha-1)) < sigma)"

    def srdp_valid(self, alpha, tau):
        # τμ·sqrt(2α(α−1)) < σ  ⇔  α < sgd_iter_max_order(σ, τμ); no condition where τμ = 0.
        shift = np.asarray(tau, dtype=float) * self.smoothness
        values, index = np.unique(shift, return_inverse=True)
        limits = np.array(
            [sgd_iter_max_order(self.noise, v) if v > 0 else math.inf for v in values]
        )
        return self.rdp_valid(alpha) & (alpha < limits[index].reshape(shift.shape))

    def _rdp(self, alpha):
        return alpha * self.epsilon**2 / 2.0

    def _srdp(self, alpha, tau):
        n, k = self.n, self.kappa
        factor = n * math.log(n - k + 2) / ((n - k + 1) * math.log(n))
        return (
            alpha
            * self.epsilon**2
            * tau**2
            * self.smoothness**2
            * factor
            / (2.0 * self.lipschitz**2)
        )


def sgd_remark1_coefficient(n: int) -> float:
    """Remark 1 (DP-SGD-samp without Def. 7): the per-step SRDP factor
    ``min_k [(1/k²)(1−(k−1)/n) + (k−1)/n]`` at the paper's ``k = sqrt(2n−3)``:
    ``1/(2n−3) + (2n−4)(sqrt(2n−3)−1)/(n(2n−3))`` (≤ 2/√n)."""
    n = check_positive_int(n, "n", minimum=2)
    m = 2 * n - 3
    return 1.0 / m + (2 * n - 4) * (math.sqrt(m) - 1.0) / (n * m)


# Factory functions (the names the rest of the package uses).
def gaussian(*, epsilon: float, lipschitz: float = 1.0, sensitivity: float = 1.0, **kw) -> Gaussian:
    return Gaussian(epsilon=epsilon, lipschitz=lipschitz, sensitivity=sensitivity, **kw)


def laplace(*, epsilon: float, lipschitz: float = 1.0, sensitivity: float = 1.0, **kw) -> Laplace:
    return Laplace(epsilon=epsilon, lipschitz=lipschitz, sensitivity=sensitivity, **kw)


def exponential(
    *, epsilon: float, lipschitz: float = 1.0, sensitivity: float = 1.0, **kw
) -> Exponential:
    return Exponential(epsilon=epsilon, lipschitz=lipschitz, sensitivity=sensitivity, **kw)


def dp_gd(*, epsilon: float, lipschitz: float = 1.0, smoothness: float = 1.0, **kw) -> DPGD:
    return DPGD(epsilon=epsilon, lipschitz=lipschitz, smoothness=smoothness, **kw)


def dp_sgd_sampling(
    *,
    epsilon: float,
    n: int,
    steps: int,
    lipschitz: float = 1.0,
    smoothness: float = 1.0,
    gamma_pw: float = 1.0,
    **kw,
) -> DPSGDSampling:
    return DPSGDSampling(
        epsilon=epsilon,
        n=n,
        steps=steps,
        lipschitz=lipschitz,
        smoothness=smoothness,
        gamma_pw=gamma_pw,
        **kw,
    )


def dp_sgd_iteration(
    *, epsilon: float, n: int, kappa: int, lipschitz: float = 1.0, smoothness: float = 1.0, **kw
) -> DPSGDIteration:
    return DPSGDIteration(
        epsilon=epsilon, n=n, kappa=kappa, lipschitz=lipschitz, smoothness=smoothness, **kw
    )


# Symbolic Table 1 (with the corrections listed in the module docstring) for the markdown / LaTeX
# renderings.
# (mechanism, assumptions, RDP, SRDP, α-range, correction note): (markdown, LaTeX) pairs.
TABLE1_ROWS: list[dict[str, tuple[str, str]]] = [
    {
        "mechanism": ("Gaussian M_G", r"Gaussian $\mathcal{M}_G$"),
        "assumptions": (
            "f L-Lipschitz, noise N(0, Δ_f²/ε²)",
            r"$f$ $L$-Lipschitz, noise $\mathcal{N}(0,\Delta_f^2/\varepsilon^2)$",
        ),
        "rdp": ("α ε² / 2", r"$\frac{\alpha\varepsilon^2}{2}$"),
        "srdp": ("α L² τ² ε² / (2 Δ_f²)", r"$\frac{\alpha L^2\tau^2\varepsilon^2}{2\Delta_f^2}$"),
        "range": ("α > 1", r"$\alpha>1$"),
        "note": ("Thm 9 statement drops /Δ_f²", r"Thm 9 statement drops $/\Delta_f^2$"),
    },
    {
        "mechanism": ("Laplace M_L", r"Laplace $\mathcal{M}_L$"),
        "assumptions": (
            "f L-Lipschitz, noise Lap(Δ_f/ε)",
            r"$f$ $L$-Lipschitz, noise $\mathrm{Lap}(\Delta_f/\varepsilon)$",
        ),
        "rdp": ("ε", r"$\varepsilon$"),
        "srdp": ("(L τ / Δ_f) ε", r"$\frac{L\tau}{\Delta_f}\varepsilon$"),
        "range": ("α ∈ (1, ∞]", r"$\alpha\in(1,\infty]$"),
        "note": ("pure DP", "pure DP"),
    },
    {
        "mechanism": ("Exponential M_E", r"Exponential $\mathcal{M}_E$"),
        "assumptions": (
            "Q L-Lipschitz, P(h) ∝ exp(εQ/(2Δ_Q))",
            r"$Q$ $L$-Lipschitz, $P(h)\propto e^{\varepsilon Q/(2\Delta_Q)}$",
        ),
        "rdp": ("ε", r"$\varepsilon$"),
        "srdp": ("(L τ / Δ_Q) ε", r"$\frac{L\tau}{\Delta_Q}\varepsilon$"),
        "range": ("α ∈ (1, ∞]", r"$\alpha\in(1,\infty]$"),
        "note": ("pure DP", "pure DP"),
    },
    {
        "mechanism": ("DP-GD A_GD", r"DP-GD $\mathcal{A}_{\mathrm{GD}}$"),
        "assumptions": (
            "ℓ L-Lipschitz, μ-smooth in data, σ = L√T/(εn)",
            r"$\ell$ $L$-Lip., $\mu$-smooth (data), $\sigma=\frac{L\sqrt{T}}{\varepsilon n}$",
        ),
        "rdp": ("2 α ε²", r"$2\alpha\varepsilon^2$"),
        "srdp": ("α μ² τ² ε² / (2 L²)", r"$\frac{\alpha\mu^2\tau^2\varepsilon^2}{2L^2}$"),
        "range": ("α > 1", r"$\alpha>1$"),
        "note": (
            "Thm 12 statement's αε²/2 is a typo",
            r"Thm 12 statement's $\alpha\varepsilon^2/2$ is a typo",
        ),
    },
    {
        "mechanism": (
            "DP-SGD (sampling) A_SGD-samp",
            r"DP-SGD-samp $\mathcal{A}_{\mathrm{SGD\text{-}samp}}$",
        ),
        "assumptions": (
            "ℓ L-Lip., μ-smooth, batch 1, σ = L√(2cT)/(εn), inverse point-wise distance γ_pw",
            (
                r"$\ell$ $L$-Lip., $\mu$-smooth, batch 1, $\sigma=\frac{L\sqrt{2cT}}{\varepsilon"
                r" n}$, $\gamma_{pw}$"
            ),
        ),
        "rdp": ("α² ε² / 2", r"$\frac{\alpha^2\varepsilon^2}{2}$"),
        "srdp": (
            "α μ² τ² ε² γ_pw² / (2 L²)",
            r"$\frac{\alpha\mu^2\tau^2\varepsilon^2\gamma_{pw}^2}{2L^2}$",
        ),
        "range": (
            "1 < α ≤ min{√T/ε, z² log(n/z)}, z = σ/L ≥ 1",
            (
                r"$1<\alpha\le\min\{\frac{\sqrt T}{\varepsilon}, z^2\log\frac{n}{z}\}$,"
                r" $z=\sigma/L\ge1$"
            ),
        ),
        "note": (
            "σ doubled in variance so α²ε²/2 holds",
            r"$\sigma$ variance doubled so $\alpha^2\varepsilon^2/2$ holds",
        ),
    },
    {
        "mechanism": (
            "DP-SGD (iteration) A_SGD-iter",
            r"DP-SGD-iter $\mathcal{A}_{\mathrm{SGD\text{-}iter}}$",
        ),
        "assumptions": (
            (
                "ℓ convex, L-Lip., μ-smooth, σ = 8L·sqrt(2 log n / n)/ε, max. Hamming distance κ_τ,"
                " consecutive differing records"
            ),
            (
                r"$\ell$ convex, $L$-Lip., $\mu$-smooth,"
                r" $\sigma=\frac{8L}{\varepsilon}\sqrt{\frac{2\log n}{n}}$, $\kappa_\tau$"
            ),
        ),
        "rdp": ("α ε² / 2", r"$\frac{\alpha\varepsilon^2}{2}$"),
        "srdp": (
            "α ε² τ² μ² n log(n−κ_τ+2) / (2 (n−κ_τ+1) L² log n)",
            (
                r"$\frac{\alpha\varepsilon^2\tau^2\mu^2"
                r" n\log(n-\kappa_\tau+2)}{2(n-\kappa_\tau+1)L^2\log n}$"
            ),
        ),
        "range": (
            "max{L, τμ}·sqrt(2α(α−1)) < σ",
            r"$\max\{L,\tau\mu\}\sqrt{2\alpha(\alpha-1)}<\sigma$",
        ),
        "note": (
            "printed SRDP lacks ε², printed σ has an extra η",
            r"printed SRDP lacks $\varepsilon^2$; $\sigma$ per Thm 14",
        ),
    },
]
