"""Differentially private PCA by "Analyze Gauss" (Dwork, Talwar, Thakurta, Zhang 2014): the DP-PCA
baseline of Hu et al. (2024) Figure 3 (the paper does not say which DP-PCA it runs; this is our
choice).

Release ``M̂ = (1/n) XᵀX + E`` with ``E`` symmetric, its upper-triangular entries (diagonal
included)
i.i.d. ``N(0, s²)``. Under replace-one adjacency in the unit ball the upper-triangular vector of
``(1/n) XᵀX`` moves by at most ``‖xxᵀ − x'x'ᵀ‖_F / n ≤ sqrt(2)/n`` (``‖xxᵀ − x'x'ᵀ‖_F² =
‖x‖⁴ + ‖x'‖⁴ − 2(xᵀx')² ≤ 2``; an off-diagonal pair counts once). The top-k eigenvectors ``Â_k`` of
``M̂`` are post-processing, so the projections ``x ↦ Â_kÂ_kᵀx`` (rank) and ``x ↦ Â_kᵀx`` (dim) and
anything trained on them compose cleanly with the release.

Calibration (:func:`analyze_gauss_noise`): ``"lemma_m"`` (default, the conversion Hu et al. use
everywhere): the Gaussian mechanism's RDP ``αΔ²/(2s²)`` through Lemma M over all α > 1 has the
closed form ``ε = u²/2 + u·sqrt(2 log(1/δ))`` with ``u = Δ/s``, so
``u = −c0 + sqrt(c0² + 2ε)``, ``c0 = sqrt(2 log(1/δ))``; ``"analytic"``: the exact (tighter)
analytic Gaussian mechanism of Balle & Wang (2018) via dp-accounting.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import numpy as np
import scipy.sparse.linalg

from dpprep.accounting.dp import analytic_gaussian_sigma

from dpprep.preprocess.pca import sign_normalize
from dpprep.preprocess.unit_ball import check_unit_ball
from dpprep.validation import check_delta, check_epsilon, check_key, check_positive_int

__all__ = [
    "DPPCAResult",
    "analyze_gauss_sensitivity",
    "analyze_gauss_noise",
    "analyze_gauss_release",
    "dp_pca",
]

Calibration = Literal["lemma_m", "analytic"]
# Dense eigendecomposition up to this d; ARPACK (top-k only) above it.
DENSE_MAX_D = 200


def analyze_gauss_sensitivity(n: int) -> float:
    """``sqrt(2)/n``: replace-one L2 sensitivity of the upper triangle of ``(1/n) XᵀX`` (unit
    ball)."""
    return math.sqrt(2.0) / check_positive_int(n, "n", minimum=1)


def analyze_gauss_noise(
    epsilon: float, delta: float, n: int, *, calibration: Calibration = "lemma_m"
) -> float:
    """Noise std ``s`` per upper-triangular entry making the release ``(epsilon, delta)``-DP."""
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    sens = analyze_gauss_sensitivity(n)
    if calibration == "lemma_m":
        c0 = math.sqrt(2.0 * math.log(1.0 / delta))
        # = −c0 + sqrt(c0² + 2ε), cancellation-free
        u = 2.0 * eps / (c0 + math.sqrt(c0 * c0 + 2.0 * eps))
        return sens / u
    if calibration == "analytic":
        return analytic_gaussian_sigma(eps, delta, sensitivity=sens)
    raise ValueError(f"calibration must be 'lemma_m' or 'analytic', got {calibration!r}")


def analyze_gauss_release(
    x,
    epsilon: float,
    delta: float,
    key,
    *,
    calibration: Calibration = "lemma_m",
    second_moment: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """``(M̂, s)``: the noisy second-moment matrix (float64, symmetric) and the entry noise std.

    ``second_moment``: ``(1/n) XᵀX`` of these same rows if already computed (many releases of one
    dataset share it; it is O(n d²))."""
    arr = check_unit_ball(x, "x")
    key = check_key(key)
    n, d = arr.shape
    s = analyze_gauss_noise(epsilon, delta, n, calibration=calibration)
    if second_moment is None:
        second_moment = arr.T @ arr / n
    elif np.shape(second_moment) != (d, d):
        raise ValueError(
            f"second_moment must be the d × d matrix (1/n) XᵀX, got shape {np.shape(second_moment)}"
        )
    g = np.asarray(jax.random.normal(key, (d, d)), dtype=np.float64) * s
    upper = np.triu(g)
    return second_moment + upper + np.triu(upper, 1).T, s


@dataclasses.dataclass(frozen=True, eq=False)
class DPPCAResult:
    """``components``: ``Â_k`` (d × k, orthonormal, sign-normalised); ``data``: the projected rows
    (n × d for ``rank``, n × k for ``dim``); ``noise_std``: ``s``; ``eigenvalues``: the top k of M̂.
    """

    mode: str
    k: int
    components: np.ndarray
    eigenvalues: np.ndarray
    noise_std: float
    data: np.ndarray

    def transform(self, x) -> np.ndarray:
        z = np.asarray(x, dtype=np.float64) @ self.components
        return z @ self.components.T if self.mode == "rank" else z


def _top_k(matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = matrix.shape[0]
    if d <= DENSE_MAX_D:
        values, vectors = np.linalg.eigh(matrix)
        order = np.argsort(values)[::-1][:k]
        return values[order], vectors[:, order]
    # Deterministic start vector: the same release gives the same components.
    # (A wider Krylov space: a noise-dominated spectrum is clustered at its edge.)
    values, vectors = scipy.sparse.linalg.eigsh(
        matrix, k=k, which="LA", v0=np.ones(d), tol=1e-9, ncv=min(d - 1, max(2 * k + 1, 40))
    )
    order = np.argsort(values)[::-1]
    return values[order], vectors[:, order]


def dp_pca(
    x,
    k: int,
    epsilon: float,
    delta: float,
    key,
    *,
    mode: str = "rank",
    calibration: Calibration = "lemma_m",
    second_moment: np.ndarray | None = None,
) -> DPPCAResult:
    """``(epsilon, delta)``-DP top-k PCA of the unit-ball rows ``x`` (Analyze Gauss) and the rows
    projected by it: ``mode="rank"``: ``x ↦ Â_kÂ_kᵀx``; ``mode="dim"``: ``x ↦ Â_kᵀx``.
    ``second_moment``: see :func:`analyze_gauss_release`."""
    arr = check_unit_ball(x, "x")
    d = arr.shape[1]
    k = check_positive_int(k, "k")
    if k >= d:
        raise ValueError(f"k must be smaller than the dimension d={d}, got {k}")
    if mode not in ("rank", "dim"):
        raise ValueError(f"mode must be 'rank' or 'dim', got {mode!r}")
    release, s = analyze_gauss_release(
        arr, epsilon, delta, key, calibration=calibration, second_moment=second_moment
    )
    values, vectors = _top_k(release, k)
    comps = sign_normalize(vectors)
    z = arr @ comps
    return DPPCAResult(mode, k, comps, values, s, z @ comps.T if mode == "rank" else z)
