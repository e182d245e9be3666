"""Synthetic data generators, deterministic given a seed (numpy ``default_rng``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from dpprep.data.loaders import Dataset
from dpprep.validation import check_positive, check_positive_int


def corrdp_mean(m: int) -> np.ndarray:
    """mu_i = (-1)^(i+1), 1-based (Wang et al. 2026, §5.1): +1, -1, +1, ..."""
    m = check_positive_int(m, "m")
    return np.where(np.arange(1, m + 1) % 2 == 1, 1.0, -1.0)


def corrdp_theta_star(m: int) -> np.ndarray:
    """theta*_i = (-1)^(i+1) sqrt(i+1), 1-based (Wang et al. 2026, §5.1): sqrt 2, -sqrt 3, ..."""
    i = np.arange(1, check_positive_int(m, "m") + 1)
    return corrdp_mean(m) * np.sqrt(i + 1.0)


def corrdp_covariance(m: int, m_s: int) -> np.ndarray:
    """Sigma of Wang et al. 2026, §5.1 with S = the first m_s features: diagonal 1 on S and 2 on U;
    off-diagonal 0.5 within S, 0.5 within U and 0.1 between S and U."""
    m = check_positive_int(m, "m")
    m_s = check_positive_int(m_s, "m_s")
    if m_s > m:
        raise ValueError(f"m_s must be <= m, got m_s={m_s}, m={m}")
    sensitive = np.arange(m) < m_s
    same_block = sensitive[:, None] == sensitive[None, :]
    cov = np.where(same_block, 0.5, 0.1)
    np.fill_diagonal(cov, np.where(sensitive, 1.0, 2.0))
    return cov


@dataclasses.dataclass(frozen=True, eq=False)
class SyntheticData:
    """A synthetic Dataset with the truth that generated it (arrays read-only, float64)."""

    dataset: Dataset
    theta_star: np.ndarray
    mean: np.ndarray
    cov: np.ndarray
    sensitive: tuple[int, ...]  # 0-based column indices of S
    insensitive: tuple[int, ...]  # 0-based column indices of U
    noise_std: float
    seed: int

    def __post_init__(self) -> None:
        for field in ("theta_star", "mean", "cov"):
            getattr(self, field).setflags(write=False)


def corrdp_synthetic(
    n: int = 2000, m: int = 100, m_s: int = 10, noise_std: float = 5.0, seed: int = 0
) -> SyntheticData:
    """The CorrDP synthetic regression set (Wang et al. 2026, §5.1): X ~ N(mu, Sigma),
    Y = theta*^T X + N(0, noise_std^2).

    S is the first ``m_s`` features (columns ``x1..x{m_s}``), U the rest; no intercept, no split
    (all rows in x_train). Rows are drawn as mu + Z L^T with L the Cholesky factor of Sigma, so a
    given (n, m, m_s, noise_std, seed) always gives the same data.
    """
    n = check_positive_int(n, "n")
    noise_std = check_positive(noise_std, "noise_std", allow_zero=True)
    mean, theta, cov = corrdp_mean(m), corrdp_theta_star(m), corrdp_covariance(m, m_s)
    rng = np.random.default_rng(seed)
    x = mean + rng.standard_normal((n, m)) @ np.linalg.cholesky(cov).T
    y = x @ theta + noise_std * rng.standard_normal(n)
    names = [f"x{i}" for i in range(1, m + 1)]
    dataset = Dataset(
        "corrdp_synthetic",
        x.astype(np.float32),
        y.astype(np.float32),
        np.zeros((0, m), np.float32),
        np.zeros((0,), np.float32),
        tuple(names),
        "regression",
        None,
        {name: (i,) for i, name in enumerate(names)},
        dict.fromkeys(names, "continuous"),
        "y",
        (),
        f"CorrDP synthetic (Wang et al. 2026, §5.1, App. E.1): n={n}, m={m}, m_s={m_s},"
        f" noise_std={noise_std:g}, seed={seed}",
    )
    return SyntheticData(
        dataset, theta, mean, cov, tuple(range(m_s)), tuple(range(m_s, m)), noise_std, int(seed)
    )


@dataclasses.dataclass(frozen=True, eq=False)
class LowRankData:
    """Approximately low-rank logistic data (Hu et al. 2024, Figure 3), arrays read-only.

    ``x`` (n × d, rows in the unit ball, centred before the final clip), ``y`` labels in {0, 1}
    (±1 labels encoded as 1/0), ``basis`` the orthonormal ``U`` (d × k) of the signal subspace,
    ``w`` the unit label direction in span(U)."""

    x: np.ndarray
    y: np.ndarray
    basis: np.ndarray
    w: np.ndarray
    radius: float
    tail_mass: float
    label_scale: float
    seed: int

    def __post_init__(self) -> None:
        for field in ("x", "y", "basis", "w"):
            getattr(self, field).setflags(write=False)


def _clip_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1.0)


def low_rank_logistic(
    n: int,
    d: int,
    k: int = 1,
    *,
    radius: float = 0.9,
    tail_mass: float = 0.1,
    label_scale: float = 4.0,
    seed: int = 0,
) -> LowRankData:
    """Our generator (Hu et al. only say "approximately low rank" with "small yet positive" tail
    eigenvalues): ``x_i = r·U s_i + ξ_i`` with ``U`` a random orthonormal d × k basis (QR of a
    Gaussian), ``s_i`` uniform on the unit sphere of R^k and ``ξ_i ~ N(0, (Λ0/d) I)``; rows
    clipped to norm ≤ 1, centred, clipped again. Labels ``y_i = 1`` w.p. ``sigmoid(c⟨w, x_i⟩)``,
    ``w`` a random unit vector of span(U). Covariance spectrum ≈ ``r²/k + Λ0/d`` (top k) and
    ``Λ0/d`` (the d − k tail eigenvalues: "small yet positive"). Same arguments, same data."""
    n = check_positive_int(n, "n", minimum=2)
    d = check_positive_int(d, "d", minimum=2)
    k = check_positive_int(k, "k")
    if k >= d:
        raise ValueError(f"k must be smaller than d={d}, got {k}")
    radius = check_positive(radius, "radius")
    if radius > 1.0:
        raise ValueError(f"radius must be <= 1 (rows live in the unit ball), got {radius}")
    tail_mass = check_positive(tail_mass, "tail_mass", allow_zero=True)
    label_scale = check_positive(label_scale, "label_scale", allow_zero=True)
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))
    s = rng.standard_normal((n, k))
    s /= np.linalg.norm(s, axis=1, keepdims=True)
    x = radius * s @ basis.T + rng.standard_normal((n, d)) * np.sqrt(tail_mass / d)
    x = _clip_rows(x)
    x = _clip_rows(x - x.mean(axis=0))
    v = rng.standard_normal(k)
    w = basis @ (v / np.linalg.norm(v))
    p = 1.0 / (1.0 + np.exp(-label_scale * (x @ w)))
    y = (rng.random(n) < p).astype(np.float64)
    return LowRankData(
        x, y, basis, w, float(radius), float(tail_mass), float(label_scale), int(seed)
    )
