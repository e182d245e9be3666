"""One unit of Hu, Sanyal, Schölkopf (2024) Table 3 on Adult: load Adult into the unit ball, remove
values completely at random, impute, and measure the imputation's sensitivity against sampled
replace-one neighbours (:func:`run_setting`)."""

from __future__ import annotations

import math

import numpy as np

from dpprep import data as datasets
from dpprep.preprocess import (
    ImputeResult,
    impute_mean,
    impute_median,
    impute_regression,
    impute_trimmed_mean,
    scale_into_unit_ball,
)

from .config import CONTINUOUS, Table3Config


def load_adult_unit_ball(
    data_dir, n_rows: int | None, seed: int
) -> tuple[np.ndarray, np.ndarray, dict[str, tuple[int, ...]]]:
    """Adult features scaled into the unit ball by the public bound ``sqrt(#raw features)`` (one-hot
    groups contribute 1 and [0,1] features at most 1 to the squared norm); optional seeded row
    subsample. Returns ``(x, y, feature_groups)``."""
    ds = datasets.load("adult", data_dir=data_dir)
    x = ds.x_train.astype(np.float64)
    y = ds.y_train.astype(np.int64)
    if n_rows is not None and n_rows < x.shape[0]:
        rows = np.sort(np.random.default_rng(seed).choice(x.shape[0], n_rows, replace=False))
        x, y = x[rows], y[rows]
    bound = math.sqrt(len(ds.feature_groups))
    return scale_into_unit_ball(x, bound), y, dict(ds.feature_groups)


def inject_mcar(x: np.ndarray, columns: list[int], rate: float, seed: int) -> np.ndarray:
    """Sets each entry of ``columns`` to NaN independently with probability ``rate``."""
    rng = np.random.default_rng(seed)
    out = x.copy()
    for j in columns:
        out[rng.random(x.shape[0]) < rate, j] = np.nan
    return out


def imputer(method: str, n: int, regressors: list[int], trim_fraction: float = 0.05):
    if method == "mean":
        return impute_mean
    if method == "median":
        return impute_median
    if method == "trimmed_mean":
        m = max(1, int(trim_fraction * n))
        return lambda x: impute_trimmed_mean(x, m)
    if method == "regression":
        return lambda x: impute_regression(x, regressors=regressors)
    raise ValueError(f"unknown imputation method {method!r}")


def _neighbour(
    x: np.ndarray, rng: np.random.Generator, columns: list[int]
) -> tuple[int, np.ndarray]:
    i = int(rng.integers(x.shape[0]))
    if rng.random() < 0.5:
        return i, x[int(rng.integers(x.shape[0]))].copy()  # another real record (with its NaNs)
    z = np.zeros(x.shape[1])
    j = columns[int(rng.integers(len(columns)))]
    z[j] = rng.choice([-1.0, 1.0])
    if rng.random() < 0.3:
        z[[c for c in columns if c != j] or [j]] = np.nan
    return i, z


def measure(
    x: np.ndarray, impute, base: ImputeResult, columns: list[int], neighbours: int, seed: int
) -> dict:
    """Largest Hamming distance and L2 change of the common records over sampled neighbours."""
    rng = np.random.default_rng(seed)
    worst_h, worst_l2, worst_ratio = 0, 0.0, 0.0
    for _ in range(neighbours):
        i, z = _neighbour(x, rng, columns)
        x2 = x.copy()
        x2[i] = z
        other = impute(x2)
        keep = np.ones(x.shape[0], bool)
        keep[i] = False
        dist = np.linalg.norm(base.data[keep] - other.data[keep], axis=1)
        worst_h = max(worst_h, int(np.count_nonzero(dist > 1e-13)))
        l2 = float(dist.max(initial=0.0))
        worst_l2 = max(worst_l2, l2)
        # The bound for this pair: either dataset's own (local) Δ2 covers it; use the smaller.
        bound = min(base.sensitivity.l2, other.sensitivity.l2)
        worst_ratio = max(worst_ratio, l2 / bound if bound > 0 else (0.0 if l2 == 0 else math.inf))
    return {"measured_linf": worst_h, "measured_l2": worst_l2, "worst_ratio": worst_ratio}


def run_setting(
    x: np.ndarray,
    groups: dict,
    columns_named: tuple[str, ...],
    rate: float,
    method: str,
    cfg: Table3Config,
) -> dict:
    """One unit: ``columns_named`` missing at ``rate``, imputed by ``method``; its bound (Δ∞, Δ2,
    τ*), Table 3's printed Δ2 and the worst measured change (or the error when no finite bound
    exists)."""
    columns = [groups[c][0] for c in columns_named]
    continuous = [groups[c][0] for c in CONTINUOUS]
    regressors = [c for c in continuous if c not in columns]
    xm = inject_mcar(x, columns, rate, cfg.seed)
    n = x.shape[0]
    impute = imputer(method, n, regressors, cfg.trim_fraction)
    row = {"columns": "+".join(columns_named), "missing_rate": rate, "method": method, "n": n}
    try:
        res = impute(xm)
    except ValueError as err:  # e.g. regression with λmin <= 1: no finite bound
        return row | {"error": str(err)}
    row |= {
        "p": res.p,
        "max_missing_per_row": res.max_missing_per_row,
        "linf": res.sensitivity.linf,
        "l2": res.sensitivity.l2,
        "tau": res.sensitivity.tau,
        "table3_l2": res.table3_l2,
        "fill": "; ".join(
            f"{k}={v:.5g}" if np.isscalar(v) else f"{k}=coef[{', '.join(f'{c:.4g}' for c in v)}]"
            for k, v in res.fill.items()
        ),
    }
    row |= measure(xm, impute, res, columns, cfg.neighbours, cfg.seed + 1)
    return row
