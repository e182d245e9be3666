"""Closed-form pre-processing sensitivities (Δ∞, Δ2) of Hu, Sanyal & Schölkopf (ICML 2024).

Definition 4 of the paper, replace-one neighbours ``S1 = S ∪ {z1}``, ``S2 = S ∪ {z2}``:

- ``Δ∞`` (``Sensitivity.linf``): how many of the ``n − 1`` *common* records are processed
  differently under ``π_{S1}`` and ``π_{S2}``;
- ``Δ2`` (``Sensitivity.l2``): the largest L2 distance between the two processed versions of one
  common record.

The induced L12 budget that Theorem 2 plugs into the SRDP of the mechanism is ``τ* = Δ2 · Δ∞``
(``l2 · linf``). Every bound assumes rows in the unit L2 ball (§4 of the paper) and is a bound over
a dataset collection ``ℒ``: the data-dependent arguments (``p``, order statistics, eigenvalues,
eigen-gaps) must hold for *every* dataset the guarantee is meant to cover — for one neighbouring
pair that means both datasets (the larger ``p``, the smaller gap). The pre-processing functions in
``dpprep.preprocess`` compute these arguments on the dataset they process.

Each function validates its inputs and raises ``ValueError`` naming the bad argument.
"""

from __future__ import annotations

import dataclasses
import math

from dpprep.validation import check_positive, check_positive_int

__all__ = [
    "Sensitivity",
    "dedup_sensitivity",
    "quantization_sensitivity",
    "mean_imputation_sensitivity",
    "median_imputation_sensitivity",
    "trimmed_mean_imputation_sensitivity",
    "regression_imputation_sensitivity",
    "pca_covariance_perturbation",
    "pca_rank_sensitivity",
    "pca_dim_sensitivity",
    "pca_rank_tau_constant",
]


@dataclasses.dataclass(frozen=True)
class Sensitivity:
    """Sensitivities of a pre-processing (Def. 4): ``linf`` = Δ∞ (how many common records can be
    processed differently when one record is replaced) and ``l2`` = Δ2 (how far each can move, in
    the unit-ball instance space). ``tau`` = Δ2·Δ∞ is the induced L12 budget τ* of Theorem 2."""

    linf: float
    l2: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "linf", check_positive(self.linf, "linf", allow_zero=True))
        object.__setattr__(self, "l2", check_positive(self.l2, "l2", allow_zero=True))

    @property
    def tau(self) -> float:
        return self.l2 * self.linf


def _check_count(value: int, name: str) -> int:
    return check_positive_int(value, name, minimum=0)


def dedup_sensitivity(p: int) -> Sensitivity:
    """η-approximate deduplication (Prop. 3): ``Δ∞ = p``, ``Δ2 = 1``.

    ``p`` is the L∞ sensitivity itself (Table 2's ``p``); under replace-one adjacency Prop. 3 gives
    ``p = 2 · (largest good-cluster size over ℒ)``. ``Δ2 = 1`` because a removed record becomes the
    zero (null) record (our encoding: the paper does not define removed points) and
    ``||x − 0|| ≤ 1`` in the unit ball.
    """
    p = _check_count(p, "p")
    return Sensitivity(linf=float(p), l2=1.0)


def quantization_sensitivity(p: int, eta: float, *, conservative: bool = True) -> Sensitivity:
    """η-quantization (Prop. 3): ``Δ∞ = p``, ``Δ2 = 2η`` (``conservative``, default) or ``η``
    (paper).

    The paper's ``Δ2 = η`` holds when a common record is either left alone in one dataset or mapped
    to the same representative in both. If its cluster's representative differs between ``S1`` and
    ``S2`` (both representatives lie within η of the record) the change can reach ``2η``
    (the proof of Prop. 3 misses this case; tests/preprocess/test_dedup_quantize.py pins one at
    1.8η), so the default is that always-valid bound, as in :func:`dpprep.preprocess.quantize`. Pass
    ``conservative=False`` to reproduce the paper's Table 2 / Figure 2.
    """
    p = _check_count(p, "p")
    eta = check_positive(eta, "eta")
    return Sensitivity(linf=float(p), l2=(2.0 if conservative else 1.0) * eta)


def mean_imputation_sensitivity(n: int, p: int, *, max_missing_per_row: int = 1) -> Sensitivity:
    """Mean imputation (Cor. 4): ``Δ∞ = p``, ``Δ2 = 2/(n − p)``, so ``τ* = 2p/(n − p)``.

    ``n`` is the dataset size and ``p`` the largest number of records with at least one missing
    value over ℒ (each feature keeps ``n_j ≥ n − p`` observed values). Needs ``n > p``.

    The proof bounds the change of one record's imputed means by ``||z1 − z2|| / (n − p)``, which is
    right when a record misses one feature. With ``q = max_missing_per_row > 1`` and neighbours
    whose
    missingness differs, a changed feature mean moves by ``(z1_j − m_j)/n_j`` with ``m_j`` another
    feature mean, and the per-feature means of a record need not form a unit-ball vector; the valid
    bound is then ``2·sqrt(q)/(n − p)`` [DERIVED], which this returns (``q = 1``: the paper's
    value).
    """
    n = check_positive_int(n, "n")
    p = _check_count(p, "p")
    q = check_positive_int(max_missing_per_row, "max_missing_per_row")
    if n <= p:
        raise ValueError(
            f"mean imputation needs n > p (fewer missing rows than rows), got n={n}, p={p}"
        )
    return Sensitivity(linf=float(p), l2=2.0 * math.sqrt(q) / (n - p))


def median_imputation_sensitivity(
    p: int, spread: float, *, max_missing_per_row: int = 1
) -> Sensitivity:
    """Median imputation (Table 3): ``Δ∞ = p``, ``Δ2 = spread · sqrt(max_missing_per_row)``.

    Table 3 prints the per-feature scalar ``x^max_((n+1)/2) − x^min_(n/2)``: the largest value any
    neighbour's median can take minus the smallest, over ℒ. Pass that difference as ``spread``;
    a record with ``q`` missing features moves by at most ``sqrt(q) · spread`` [DERIVED].
    ``dpprep.preprocess.impute_median`` computes a per-feature local ``spread`` on the data.
    """
    p = _check_count(p, "p")
    spread = check_positive(spread, "spread", allow_zero=True)
    q = check_positive_int(max_missing_per_row, "max_missing_per_row")
    return Sensitivity(linf=float(p), l2=spread * math.sqrt(q))


def trimmed_mean_imputation_sensitivity(
    n: int, p: int, m: int, spread: float, *, max_missing_per_row: int = 1
) -> Sensitivity:
    """m-trimmed-mean imputation (Table 3): ``Δ∞ = p``, ``Δ2 = sqrt(q) · spread / (n − 2m − p)``.

    ``spread = x^max_(m) − x^min_(n−m)`` in the paper's (decreasing) order-statistic indexing, i.e.
    the width of the window the retained values of any neighbour can occupy; ``n − 2m − p`` is the
    smallest number of values the trimmed mean averages. Needs ``n − 2m − p ≥ 1``.
    """
    n = check_positive_int(n, "n")
    p = _check_count(p, "p")
    m = check_positive_int(m, "m")
    spread = check_positive(spread, "spread", allow_zero=True)
    q = check_positive_int(max_missing_per_row, "max_missing_per_row")
    kept = n - 2 * m - p
    if kept < 1:
        raise ValueError(f"trimmed mean needs n - 2m - p >= 1, got n={n}, m={m}, p={p}")
    return Sensitivity(linf=float(p), l2=math.sqrt(q) * spread / kept)


def regression_imputation_sensitivity(
    p: int, lambda_max: float, lambda_min: float, *, replace_one: bool = True
) -> Sensitivity:
    """Linear-regression imputation (Table 3; no intercept), per imputed feature.

    ``lambda_max`` / ``lambda_min``: largest / smallest eigenvalue of the (unnormalised) Gram
    matrix ``XᵀX`` of the complete rows over ℒ (``lambda_max`` of the Gram of regressors *and*
    target, ``lambda_min`` of the regressors' Gram).

    ``replace_one=False`` returns Table 3 as printed, ``λmax²/((λmax+1)λmin²) + 1/λmin``, which the
    paper derives for *add-one* neighbours. Replace-one (the package default, as in Def. 4) is
    remove-one then add-one around the common part, whose Gram has smallest eigenvalue
    ``≥ λmin − 1`` (Weyl, ``||zzᵀ|| ≤ 1``), so ``Δ2 = 2 · [λmax²/((λmax+1)(λmin−1)²) + 1/(λmin−1)]``
    [DERIVED]; needs ``λmin > 1``.
    """
    p = _check_count(p, "p")
    lmax = check_positive(lambda_max, "lambda_max")
    lmin = check_positive(lambda_min, "lambda_min")
    if lmin > lmax:
        raise ValueError(f"lambda_min ({lmin}) must not exceed lambda_max ({lmax})")
    if replace_one:
        if lmin <= 1.0:
            raise ValueError(f"replace-one regression sensitivity needs lambda_min > 1, got {lmin}")
        base = lmin - 1.0
        l2 = 2.0 * (lmax**2 / ((lmax + 1.0) * base**2) + 1.0 / base)
    else:
        l2 = lmax**2 / ((lmax + 1.0) * lmin**2) + 1.0 / lmin
    return Sensitivity(linf=float(p), l2=l2)


def pca_covariance_perturbation(n: int) -> float:
    """``2(3n+2)/(n(n−1))``: Frobenius change of the centred ``1/(n−1)`` covariance under one
    replacement in the unit ball (Eq. 41; ``6.1/n`` at ``n = 101``)."""
    n = check_positive_int(n, "n", minimum=2)
    return 2.0 * (3 * n + 2) / (n * (n - 1))


def pca_rank_tau_constant(n: int) -> float:
    """``4(3n+2)/(n−1)``: ``τ* · δ_min^k`` of PCA rank reduction (12.2 at n = 101, → 12)."""
    n = check_positive_int(n, "n", minimum=2)
    return 4.0 * (3 * n + 2) / (n - 1)


def pca_rank_sensitivity(n: int, gap: float) -> Sensitivity:
    """PCA rank reduction ``x ↦ A_k A_kᵀ x`` (Prop. 5): ``Δ∞ = n``, ``Δ2 = 4(3n+2)/(n(n−1)·gap)``.

    ``gap`` is ``δ_min^k``, the smallest k-th eigen-gap ``λ_k − λ_{k+1}`` of the centred covariance
    over ℒ (Zwald–Blanchard, Lemma L in App. C.3, needs only this gap). ``τ* =
    4(3n+2)/((n−1)·gap)``.
    """
    n = check_positive_int(n, "n", minimum=2)
    gap = check_positive(gap, "gap")
    return Sensitivity(linf=float(n), l2=2.0 * pca_covariance_perturbation(n) / gap)


def pca_dim_sensitivity(n: int, gap_k: float, gap_1: float) -> Sensitivity:
    """PCA dimension reduction ``x ↦ A_kᵀ x`` (Prop. 5): ``Δ∞ = n``,
    ``Δ2 = 8(3n+2)/(n(n−1)·min(gap_k, gap_1))``.

    ``gap_k = δ_min^k`` and ``gap_1 = δ_min^1 = min (λ1 − λ2)`` over ℒ (the paper's choice). The
    individual eigenvectors — not just the subspace — must be stable for ``A_kᵀx`` to be, so for
    ``k ≥ 3`` pass the smallest inner gap ``min_{j<k} (λ_j − λ_{j+1})`` as ``gap_1`` (what
    ``dpprep.preprocess.pca_reduce`` does; equal to ``λ1 − λ2`` for ``k ≤ 2``).
    """
    n = check_positive_int(n, "n", minimum=2)
    gap_k = check_positive(gap_k, "gap_k")
    gap_1 = check_positive(gap_1, "gap_1")
    return Sensitivity(linf=float(n), l2=4.0 * pca_covariance_perturbation(n) / min(gap_k, gap_1))
