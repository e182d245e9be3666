"""A rigorous DP-SGD-samp for Theorem 2: subsampled DP-SGD under replace-one adjacency.

Table 1's RDP ``α²ε²/2`` for DP-SGD with sampling is not a valid replace-one bound
(:func:`dpprep.preprocess.privacy.meta.check_mechanism` says why). :class:`SubsampledSGD` is a
Table-1-style mechanism whose RDP and SRDP are both proved, so that Theorem 2 (``meta.theorem2``
/ ``overall_privacy`` / ``calibrate_mechanism``) turns it into a guarantee for a pre-processed
pipeline.

The algorithm: T steps; each step draws a batch of the n record indices — ``"poisson"`` (each
index independently with rate q = B/n) or ``"without_replacement"`` (exactly B indices; B = 1 is
Hu et al.'s analysed A_SGD-samp, one uniform index per step) — sums the per-record gradients
clipped to norm ``C`` (``l2_clip_norm``; ``C ≥ L`` means no clipping), adds ``N(0, z²C²I)`` and
divides by the fixed normaliser B (what :mod:`dpprep.algorithms` does). ``z`` is the noise
multiplier; the Mechanism's own ``epsilon`` is ``1/z`` (a noise *level*, increasing in privacy
loss, so that ``meta.calibrate_mechanism`` applies).

RDP ``ε(α)`` (record-level replace-one), T times one step's:

- ``"without_replacement"``: dp-accounting's ``SampledWithoutReplacementDpEvent`` under
  ``REPLACE_ONE`` (Wang, Balle & Kasiviswanathan 2019, Thm 27) on a Gaussian base mechanism of
  multiplier ``z/2`` — replacing a record moves the clipped sum by up to 2C.
- ``"poisson"``: dp-accounting has no replace-one RDP for Poisson sampling (its RDP accountant
  refuses the event; its PLD accountant uses the pair below with a = −b). We prove one. The other
  records' contribution has the same law under both datasets and is added independently, so by
  data processing one step is bounded by ``D_α(P‖Q)``, ``P = (1−q)N_0 + qN_a``, ``Q = (1−q)N_0 +
  qN_b``
  (``N_c = N(c, z²C²I)``, ``‖a‖, ‖b‖ ≤ C``: the replaced record's clipped gradients). At each order
  we take the smallest of three bounds:

  * direct (integer α): ``E_Q[(P/Q)^α] = Σ_j C(α,j) q^j ∫(N_a − N_b)^j Q^{1−j}``; the j = 1 term is
    0;
    for j ≥ 2, ``Q ≥ (1−q)N_0`` bounds ``Q^{1−j}``; j = 2: ``∫(N_a−N_b)²/N_0 = e^{‖a‖²/σ²} +
    e^{‖b‖²/σ²}
    − 2e^{⟨a,b⟩/σ²} ≤ 2e^{1/z²} − 2e^{−1/z²}``; j ≥ 3: ``|N_a − N_b|^j ≤ N_a^j + N_b^j`` and
    ``∫N_a^j N_0^{1−j} = e^{j(j−1)‖a‖²/(2σ²)}``. Hence
    ``(α−1)D_α ≤ log(1 + C(α,2)q²(2e^{1/z²} − 2e^{−1/z²})/(1−q) + Σ_{j≥3} C(α,j) q^j (1−q)^{1−j}
    2e^{j(j−1)/(2z²)})``;
  * weak triangle through the dataset with the replaced record removed (Mironov 2017, Prop. 11):
    ``(αp−1)/(p(α−1))·ε_ar(pα) + ε_ar((pα−1)/(p−1))``, minimised over p > 1, with ``ε_ar``
    dp-accounting's add/remove RDP (Mironov, Talwar & Zhang 2019 bound both directions);
  * joint convexity of ``exp((α−1)D_α)`` over the mixture components: ``log(1 − q + q
    e^{2α(α−1)/z²})``.

  Tests check the result against the exact divergence of realisable pairs (antipodal a = −b, and
  b = 0) by numerical integration: it is within a few percent of it at most orders.

SRDP ``ε̃(α, τ)`` for Theorem 2's hybrid pairs (our derivation, no amplification by sampling for
the shift itself): the pairs differ in at most ``m = ⌊Δ∞⌋`` records, each moved by at most
``Δ2 = τ/Δ∞``; batches are drawn independently of the data, so both datasets can use the same
batch. Given a batch holding ``b`` changed records, the clipped sum moves by at most ``b·μΔ2``
(clipping is non-expansive, ℓ is μ-smooth in the data), a Gaussian divergence
``α b² μ²Δ2²/(2z²C²)``. ``exp((α−1)D_α)`` is jointly convex in the pair, so one step has
``(α−1)D_α ≤ log E_b[exp(α(α−1) b² μ²Δ2²/(2z²C²))]`` with ``b ~ Binomial(m, q)`` (Poisson) or
``Hypergeometric(n, m, B)`` (without replacement); T steps add up (adaptive composition). With
``m = n`` and a fixed batch this is the plain Gaussian ``α μ²Δ2²/(2σ_avg²)`` per step,
``σ_avg = zC/B``.
``linf`` (Δ∞) is therefore a parameter of the mechanism; ``meta.check_mechanism`` requires it to
equal the pre-processing's.

Evaluation: both curves are computed on a grid of orders and interpolated linearly in the
cumulant ``K(α) = (α−1)·D_α`` (with ``K(1) = 0``), through the lower convex hull of the grid's upper
bounds. The true ``K`` of every pair is convex in α (a log moment-generating function), so any chord
through upper bounds at two orders bounds it in between (as dp-accounting does for non-integer
orders, WBK19 Cor. 10). Orders beyond the grid's last finite point are inadmissible (``inf``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from typing import ClassVar, Literal

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as _rdp
from scipy import special, stats

from dpprep.accounting import dp
from dpprep.preprocess.privacy.table1 import DPSGDSampling, Mechanism
from dpprep.renames import renamed_fields, renamed_kwargs
from dpprep.validation import check_positive, check_positive_int

__all__ = [
    "SAMPLINGS",
    "ORDER_GRID",
    "SubsampledSGD",
    "subsampled_sgd",
    "from_table1",
    "add_remove_step_rdp",
    "replace_one_step_rdp",
    "srdp_step_cgf",
]

Sampling = Literal["poisson", "without_replacement"]
SAMPLINGS: tuple[str, ...] = ("poisson", "without_replacement")

#: Orders at which the per-step curves are computed (α−1 log-spaced in [1e−2, 1e3]); dp-accounting's
#: fractional-order series stops converging near α ≈ 2000 at small z, hence the cap.
ORDER_GRID = 1.0 + np.logspace(-2.0, 3.0, 241)
# dp-accounting's bound for sampling without replacement is exact at integer orders and its own
# chord in between (WBK19 Cor. 10): use the integers near ORDER_GRID (every integer up to ~20).
_INTEGER_GRID = np.unique(np.round(ORDER_GRID[ORDER_GRID >= 2.0]))
# Hölder exponents tried by the Poisson weak-triangle bound (p − 1 log-spaced).
_HOLDER = 1.0 + np.logspace(-3.0, 3.0, 121)


def _chord(grid: np.ndarray, cgf: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """ε(α) = K(α)/(α−1) with K linearly interpolated through (1, 0) and the grid; inf beyond it."""
    a = np.asarray(alpha, dtype=float)
    x = np.concatenate([[1.0], grid])
    y = np.concatenate([[0.0], cgf])
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.interp(a, x, y) / (a - 1.0)
    return np.where((a > 1.0) & (a <= grid[-1]), out, np.inf)


def _finite_points(grid: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid points with a finite bound (a chord across a skipped point is still an upper
    bound, by convexity); dp-accounting gives up (inf) where its series does not converge."""
    ok = np.isfinite(values) & (values >= 0)
    if not ok.any():
        raise ValueError(
            "the per-step RDP is infinite at every order of the grid (noise multiplier too small?)"
        )
    return grid[ok], values[ok]


@contextlib.contextmanager
def _quiet_dp_accounting():
    """dp-accounting logs a warning per order whose series does not converge (it returns inf
    there, which we skip): one INFO record instead
    (:func:`dpprep.accounting.dp.rdp_orders_summarised`), and no numpy warnings, for the duration
    of one grid computation."""
    with dp.rdp_orders_summarised(), np.errstate(all="ignore"):
        yield


@functools.lru_cache(maxsize=256)
def _add_remove_cgf(q: float, z: float) -> tuple[np.ndarray, np.ndarray]:
    with _quiet_dp_accounting():
        rdp = np.asarray(
            _rdp._compute_rdp_poisson_subsampled_gaussian(q, z, ORDER_GRID), dtype=float
        )
    grid, rdp = _finite_points(ORDER_GRID, rdp)
    return grid, rdp * (grid - 1.0)


def add_remove_step_rdp(q: float, noise_multiplier: float, alpha: float | np.ndarray) -> np.ndarray:
    """One step of the Poisson-subsampled Gaussian under add/remove (dp-accounting;
    chord-interpolated)."""
    grid, cgf = _add_remove_cgf(float(q), float(noise_multiplier))
    return _chord(grid, cgf, alpha)  # type: ignore[arg-type]  # _chord broadcasts a scalar alpha


@functools.lru_cache(maxsize=256)
def _replace_one_cgf(
    sampling: str, n: int, batch_size: int, z: float
) -> tuple[np.ndarray, np.ndarray]:
    q = batch_size / n
    if sampling == "without_replacement":
        with _quiet_dp_accounting():
            rdp = np.asarray(
                _rdp._compute_rdp_sample_wor_gaussian(q, z / 2.0, _INTEGER_GRID), dtype=float
            )
        grid, rdp = _finite_points(_INTEGER_GRID, rdp)
        return _lower_hull(grid, rdp * (grid - 1.0))
    if q == 1.0:  # full batch: the sum moves by 2C, exact Gaussian
        return ORDER_GRID, ORDER_GRID * (ORDER_GRID - 1.0) * 2.0 / z**2
    # Poisson: the best of three proved bounds at each order (module docstring), then the lower
    # hull.
    a = ORDER_GRID[:, None]
    p = _HOLDER[None, :]
    coef = (a * p - 1.0) / (p * (a - 1.0))
    first = add_remove_step_rdp(q, z, a * p)
    second = add_remove_step_rdp(q, z, (p * a - 1.0) / (p - 1.0))
    with np.errstate(invalid="ignore", over="ignore"):
        triangle = np.where(np.isnan(total := coef * first + second), np.inf, total).min(axis=1) * (
            ORDER_GRID - 1.0
        )
        mixed = np.logaddexp(
            math.log1p(-q), math.log(q) + 2.0 * ORDER_GRID * (ORDER_GRID - 1.0) / z**2
        )
    grid = np.concatenate([ORDER_GRID, _INTEGER_GRID])
    cgf = np.concatenate([np.minimum(triangle, mixed), _poisson_direct_cgf(q, z, _INTEGER_GRID)])
    grid, cgf = _finite_points(grid, cgf)
    return _lower_hull(grid, cgf)


def _poisson_direct_cgf(q: float, z: float, orders: np.ndarray) -> np.ndarray:
    """Direct replace-one cumulant bound of one Poisson step at integer orders (module docstring):
    ``log(1 + C(α,2) q²(2e^{1/z²} − 2e^{−1/z²})/(1−q) + Σ_{j=3}^{α} C(α,j) q^j
    (1−q)^{1−j}·2e^{j(j−1)/(2z²)})``.
    """
    out = np.empty(len(orders))
    log_q, log_1mq = math.log(q), math.log1p(-q)
    # log(2e^{1/z²} − 2e^{−1/z²}); at huge z (tiny targets) e^{−2/z²} rounds to 1 and log1p(−1)
    # is a domain error, so there log(−expm1(−2/z²)) (the same value, kept off the pinned range).
    x = 2.0 / z**2
    j2 = (
        math.log(2.0)
        + 1.0 / z**2
        + (math.log1p(-math.exp(-x)) if x > 1e-8 else math.log(-math.expm1(-x)))
    )
    for i, alpha in enumerate(orders):
        m = int(alpha)
        j = np.arange(2, m + 1, dtype=float)
        log_binom = (
            special.gammaln(m + 1.0) - special.gammaln(j + 1.0) - special.gammaln(m - j + 1.0)
        )
        terms = (
            log_binom
            + j * log_q
            + (1.0 - j) * log_1mq
            + math.log(2.0)
            + j * (j - 1.0) / (2.0 * z**2)
        )
        terms[0] = log_binom[0] + 2.0 * log_q - log_1mq + j2
        out[i] = np.logaddexp(0.0, special.logsumexp(terms))
    return out


def _lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower convex hull of the points (1, 0) ∪ {(x, y)}, without (1, 0): the chord through its
    vertices is the smallest chord through upper bounds of a convex function with K(1) = 0."""
    order = np.lexsort((y, x))
    xs = np.concatenate([[1.0], x[order]])
    ys = np.concatenate([[0.0], y[order]])
    hull: list[int] = []
    for i in range(len(xs)):
        if hull and xs[hull[-1]] == xs[i]:
            continue  # same order: the first (smallest y, by the sort) is kept
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is above the chord a → i: drop it
            if (ys[b] - ys[a]) * (xs[i] - xs[a]) >= (ys[i] - ys[a]) * (xs[b] - xs[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    idx = np.array(hull[1:], dtype=int)
    return xs[idx], ys[idx]


def replace_one_step_rdp(
    sampling: str, n: int, batch_size: int, noise_multiplier: float, alpha: float | np.ndarray
) -> np.ndarray:
    """One step's replace-one RDP bound (see the module docstring); ``inf`` beyond the grid."""
    grid, cgf = _replace_one_cgf(sampling, int(n), int(batch_size), float(noise_multiplier))
    return _chord(grid, cgf, alpha)  # type: ignore[arg-type]  # _chord broadcasts a scalar alpha


def _changed_weights(
    sampling: str, n: int, batch_size: int, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Support and log-probabilities of b = how many of the m changed records one batch holds."""
    if sampling == "poisson":
        b = np.arange(m + 1)
        return b, stats.binom.logpmf(b, m, batch_size / n)
    b = np.arange(min(m, batch_size) + 1)
    return b, stats.hypergeom.logpmf(b, n, m, batch_size)


@functools.lru_cache(maxsize=256)
def _srdp_cgf(sampling: str, n: int, batch_size: int, m: int, shift: float) -> np.ndarray:
    b, logw = _changed_weights(sampling, n, batch_size, m)
    keep = np.isfinite(logw)
    b, logw = b[keep], logw[keep]
    a = ORDER_GRID[:, None]
    return special.logsumexp(
        logw[None, :] + a * (a - 1.0) * (b[None, :] * shift) ** 2 / 2.0, axis=1
    )


def srdp_step_cgf(
    sampling: str, n: int, batch_size: int, changed: int, shift: float, alpha: float | np.ndarray
) -> np.ndarray:
    """One step's SRDP cumulant bound ``log E_b exp(α(α−1)(b·shift)²/2)`` at ``alpha`` (exact
    formula, no grid): ``changed`` records moved, each shifting the clipped sum by ≤ ``shift``
    noise standard deviations (``shift = μΔ2/(zC)``)."""
    b, logw = _changed_weights(sampling, n, batch_size, changed)
    keep = np.isfinite(logw)
    a = np.asarray(alpha, dtype=float)[..., None]
    return special.logsumexp(logw[keep] + a * (a - 1.0) * (b[keep] * shift) ** 2 / 2.0, axis=-1)


@renamed_fields(clip_norm="l2_clip_norm")
@dataclasses.dataclass(frozen=True, kw_only=True)
class SubsampledSGD(Mechanism):
    """Subsampled DP-SGD with rigorous replace-one RDP and Theorem-2 SRDP (module docstring).

    ``epsilon`` = 1/z (build it with :func:`subsampled_sgd`); ``linf`` = Δ∞ of the pre-processing
    whose hybrid pairs the SRDP covers (``n`` for PCA, where every record moves).
    """

    n: int
    batch_size: int
    steps: int
    linf: float
    sampling: str = "poisson"
    l2_clip_norm: float = 1.0
    smoothness: float = 1.0
    name: ClassVar[str] = "subsampled_sgd"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        n = check_positive_int(self.n, "n", minimum=2)
        object.__setattr__(self, "n", n)
        b = check_positive_int(self.batch_size, "batch_size")
        if b > n:
            raise ValueError(f"batch_size must be <= n={n}, got {b}")
        object.__setattr__(self, "batch_size", b)
        object.__setattr__(self, "steps", check_positive_int(self.steps, "steps"))
        linf = check_positive(self.linf, "linf", allow_zero=True)
        if linf > n:
            raise ValueError(f"linf (Δ∞) must be <= n={n}, got {linf!r}")
        object.__setattr__(self, "linf", float(linf))
        check_positive(self.l2_clip_norm, "l2_clip_norm")
        check_positive(self.smoothness, "smoothness")
        if not self.enforce_range:
            raise ValueError("subsampled_sgd has no formula-only form; enforce_range must be True")

    @property
    def noise_multiplier(self) -> float:
        return 1.0 / self.epsilon

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / self.n

    @property
    def noise(self) -> float:
        """Noise std on the *averaged* (sum / batch_size) gradient: zC/B."""
        return self.noise_multiplier * self.l2_clip_norm / self.batch_size

    def _grid(self) -> np.ndarray:
        return _replace_one_cgf(self.sampling, self.n, self.batch_size, self.noise_multiplier)[0]

    def alpha_range(self) -> tuple[float, float]:
        return (1.0, float(self._grid()[-1]))

    def _range_note(self) -> str:
        return " (the end of the computed order grid)"

    def srdp_valid(self, alpha, tau):
        # τ = 0: no shift, the SRDP is 0 at every order (Theorem 2 then recovers ε(α) as p → ∞).
        return (
            (alpha > 1.0)
            & np.isfinite(alpha)
            & ((alpha <= ORDER_GRID[-1]) | (np.asarray(tau) == 0.0))
        )

    def _rdp(self, alpha):
        return self.steps * replace_one_step_rdp(
            self.sampling, self.n, self.batch_size, self.noise_multiplier, alpha
        )

    def _srdp(self, alpha, tau):
        a, t = np.broadcast_arrays(np.asarray(alpha, dtype=float), np.asarray(tau, dtype=float))
        out = np.empty(a.shape, dtype=float)
        values, index = np.unique(t, return_inverse=True)
        index = index.reshape(a.shape)
        for i, tau_i in enumerate(values):
            mask = index == i
            out[mask] = self._srdp_one(a[mask], float(tau_i))
        return out

    def _srdp_one(self, alpha: np.ndarray, tau: float) -> np.ndarray:
        m = min(int(math.floor(self.linf)), self.n)
        if tau == 0.0 or m == 0:
            return np.zeros_like(alpha)
        shift = self.smoothness * (tau / self.linf) / (self.noise_multiplier * self.l2_clip_norm)
        cgf = _srdp_cgf(self.sampling, self.n, self.batch_size, m, shift)
        return self.steps * _chord(ORDER_GRID, cgf, alpha)


@renamed_kwargs(clip_norm="l2_clip_norm")
def subsampled_sgd(
    *,
    noise_multiplier: float,
    n: int,
    batch_size: int,
    steps: int,
    linf: float,
    sampling: Sampling = "poisson",
    l2_clip_norm: float = 1.0,
    smoothness: float = 1.0,
) -> SubsampledSGD:
    z = check_positive(noise_multiplier, "noise_multiplier")
    return SubsampledSGD(
        epsilon=1.0 / z,
        n=n,
        batch_size=batch_size,
        steps=steps,
        linf=linf,
        sampling=sampling,
        l2_clip_norm=l2_clip_norm,
        smoothness=smoothness,
    )


def from_table1(mechanism: DPSGDSampling, linf: float) -> SubsampledSGD:
    """The rigorous mechanism of the algorithm Table 1's DP-SGD-samp row describes: one uniform
    index per step (batch 1, ``"without_replacement"``), noise multiplier ``z = σ/L`` with Table 1's
    σ = L·sqrt(2cT)/(εn), no clipping (C = L)."""
    if not isinstance(mechanism, DPSGDSampling):
        raise TypeError(f"mechanism must be a table1 DPSGDSampling, got {type(mechanism).__name__}")
    return subsampled_sgd(
        noise_multiplier=mechanism.noise_multiplier,
        n=mechanism.n,
        batch_size=1,
        steps=mechanism.steps,
        linf=min(float(linf), float(mechanism.n)),
        sampling="without_replacement",
        l2_clip_norm=mechanism.lipschitz,
        smoothness=mechanism.smoothness,
    )
