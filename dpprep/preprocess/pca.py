"""PCA for rank reduction and dimension reduction (Hu et al. 2024, Prop. 5, App. C.3).

``A_k`` (d × k) holds the top-k eigenvectors of the centred empirical covariance
``Σ = (1/(n−1)) Σ_i (x_i − μ̂)(x_i − μ̂)ᵀ`` (App. C.3, Eq. 38). Rank reduction maps ``x ↦ A_k A_kᵀ
x`` (output in R^d), dimension reduction ``x ↦ A_kᵀ x`` (output in R^k); neither subtracts the mean.

Eigenvectors are only defined up to sign; we flip each so that its largest-magnitude coordinate
(first such coordinate on ties) is positive, so the same data — in any row order — gives the same
``A_k`` (up to floating-point summation order). The rank-reduction projector does not depend on
the sign at all, which is why the paper (and Table 2) prefer it.

Eigen-gaps ``δ_j = λ_j − λ_{j+1}`` (1-indexed, eigenvalues descending). The returned sensitivity
uses this dataset's own gaps as ``δ_min`` — the paper's conditional guarantee over a collection ℒ
whose datasets all have at least that gap; for a neighbouring pair use the smaller gap of the two
(one replacement moves every eigenvalue by at most ``2(3n+2)/(n(n−1))``, so the neighbour's gap is
at least ``gap − 4(3n+2)/(n(n−1))``), or pass ``gap_lower_bound`` for a known ℒ-wide bound.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

import numpy as np

from dpprep.preprocess.sensitivity import Sensitivity, pca_dim_sensitivity, pca_rank_sensitivity
from dpprep.preprocess.unit_ball import check_unit_ball
from dpprep.renames import module_renames
from dpprep.validation import check_positive, check_positive_int

Mode = Literal["rank", "dim"]


@dataclasses.dataclass(frozen=True, eq=False)
class PCAResult:
    """Output of ``pca_reduce``.

    ``data``: projected rows (n × d for ``rank``, n × k for ``dim``); ``components``: ``A_k``;
    ``eigenvalues``: all covariance eigenvalues, descending; ``mean``: the centring mean;
    ``gap_k = λ_k − λ_{k+1}``; ``gap_1``: ``λ1 − λ2`` for ``k ≤ 2``, else the smallest gap among
    the top k (what the eigenvectors' own stability needs); ``gap_used``: the ``δ_min`` the
    sensitivity was computed with; ``sensitivity``: Prop. 5's ``(n, Δ2)``.
    """

    mode: str
    k: int
    data: np.ndarray
    components: np.ndarray
    eigenvalues: np.ndarray
    mean: np.ndarray
    gap_k: float
    gap_1: float
    gap_used: float
    sensitivity: Sensitivity

    def transform(self, x) -> np.ndarray:
        """Applies the same fitted map to other rows (e.g. a test set)."""
        arr = np.asarray(x, dtype=np.float64)
        z = arr @ self.components
        return z @ self.components.T if self.mode == "rank" else z


def centred_covariance(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Σ, μ̂)`` with the unbiased ``1/(n−1)`` normalisation (needs n ≥ 2)."""
    mean = x.mean(axis=0)
    centred = x - mean
    return centred.T @ centred / (x.shape[0] - 1), mean


def sign_normalize(vectors: np.ndarray) -> np.ndarray:
    """Flips each column so that its entry of largest absolute value (first on ties) is positive."""
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


_TOL_FACTOR = 16


def gap_tolerance(x: np.ndarray, eigenvalues: np.ndarray) -> float:
    """The smallest eigen-gap of ``x``'s covariance that is not rounding error.

    Scaled by the data, not by ``λ1`` alone: centring rows that are (almost) all equal leaves
    rounding residue of order ``eps·‖x‖``, whose covariance has tiny eigenvalues *and* tiny gaps
    (constant rows gave ``λ1 ≈ 1e-31`` and a "sensitivity" of 1e29 under a ``λ1``-relative test).
    Eigenvalues computed from rows of norm ``≤ s`` (and ``eigh``'s ``O(d)·eps·‖Σ‖`` backward error)
    are uncertain to about ``d·eps·max(s², λ1)``; a gap below 16 times that is treated as a tie.
    """
    scale = max(float(np.max(np.einsum("ij,ij->i", x, x))), float(eigenvalues[0]))
    return (
        _TOL_FACTOR
        * x.shape[1]
        * float(np.finfo(np.float64).eps)
        * max(scale, np.finfo(np.float64).tiny)
    )


def pca_reduce(
    x, k: int, *, mode: Mode = "rank", gap_lower_bound: float | None = None
) -> PCAResult:
    """Top-k PCA of the unit-ball rows of ``x`` for rank (``mode="rank"``) or dimension
    (``mode="dim"``) reduction, with Prop. 5's sensitivity.

    ``gap_lower_bound``: a known ``δ_min`` over the collection ℒ; it must not exceed this
    dataset's own gap (else the dataset is not in ℒ). Without it the dataset's own gap is used.
    Raises ``ValueError`` for ``k`` outside ``[1, d−1]``, ``n < 2`` or an eigen-gap that is zero
    or rounding error (:func:`gap_tolerance`).
    """
    arr = check_unit_ball(x, "x")
    n, d = arr.shape
    if mode not in ("rank", "dim"):
        raise ValueError(f"mode must be 'rank' or 'dim', got {mode!r}")
    if n < 2:
        raise ValueError(f"PCA needs at least 2 rows, got {n}")
    k = check_positive_int(k, "k")
    if k >= d:
        raise ValueError(
            f"k must be smaller than the dimension d={d} (a gap λ_k − λ_(k+1) is needed), got {k}"
        )
    cov, mean = centred_covariance(arr)
    eigenvalues, vectors = np.linalg.eigh(cov)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, vectors = eigenvalues[order], vectors[:, order]
    components = sign_normalize(vectors[:, :k])
    gaps = eigenvalues[:-1] - eigenvalues[1:]
    gap_k = float(gaps[k - 1])
    gap_1 = float(gaps[:k].min()) if k >= 3 else float(gaps[0])
    own = gap_k if mode == "rank" else min(gap_k, gap_1)
    tol = gap_tolerance(arr, eigenvalues)
    if own <= tol:
        raise ValueError(
            f"the eigen-gap is {own:.3g}, within rounding error of a tie (tolerance {tol:.3g} ="
            f" {_TOL_FACTOR}·d·eps·max(max‖x_i‖², λ1) for d={d}): top-{k} PCA is not unique and"
            " Prop. 5 gives no bound"
        )
    if gap_lower_bound is None:
        gap_used = own
    else:
        gap_used = check_positive(gap_lower_bound, "gap_lower_bound")
        if gap_used > own:
            raise ValueError(
                f"gap_lower_bound={gap_used:.6g} exceeds this dataset's own gap {own:.6g}"
            )
    if mode == "rank":
        sens = pca_rank_sensitivity(n, gap_used)
        data = (arr @ components) @ components.T
    else:
        sens = pca_dim_sensitivity(n, gap_used, gap_used)
        data = arr @ components
    return PCAResult(mode, k, data, components, eigenvalues, mean, gap_k, gap_1, gap_used, sens)


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"sign_normalise": "sign_normalize"})
