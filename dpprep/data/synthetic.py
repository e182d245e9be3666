"""Synthetic data generators, deterministic given a seed (numpy ``default_rng``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from dpprep.data.loaders import Dataset
from dpprep.validation import check_positive, check_positive_int


def corrdp_mean(m: int) -> np.ndarray:
    """mu_i = (-1)^(i+1), 1-based (spec 5.2): +1, -1, +1, ..."""
    m = check_positive_int(m, "m")
    return np.where(np.arange(1, m + 1) % 2 == 1, 1.0, -1.0)


def corrdp_theta_star(m: int) -> np.ndarray:
    """theta*_i = (-1)^(i+1) sqrt(i+1), 1-based (spec 5.2): sqrt 2, -sqrt 3, ..."""
    i = np.arange(1, check_positive_int(m, "m") + 1)
    return corrdp_mean(m) * np.sqrt(i + 1.0)


def corrdp_covariance(m: int, m_s: int) -> np.ndarray:
    """Sigma of spec 5.2 with S = the first m_s features: diagonal 1 on S and 2 on U; off-diagonal
    0.5 within S, 0.5 within U and 0.1 between S and U."""
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


def corrdp_synthetic(n: int = 2000, m: int = 100, m_s: int = 10, noise_std: float = 5.0, seed: int = 0) -> SyntheticData:
    """The CorrDP synthetic regression set (spec 5.2): X ~ N(mu, Sigma), Y = theta*^T X + N(0, noise_std^2).

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
        f"CorrDP synthetic (spec 5.2): n={n}, m={m}, m_s={m_s}, noise_std={noise_std:g}, seed={seed}",
    )
    return SyntheticData(dataset, theta, mean, cov, tuple(range(m_s)), tuple(range(m_s, m)), noise_std, int(seed))
