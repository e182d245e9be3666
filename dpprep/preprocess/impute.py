"""Model-based imputation (Hu et al. 2024, Prop. 15, Cor. 4, Table 3).

Missing entries are NaN. Each function fits its model on the observed values of the dataset and
fills every missing entry with the model's prediction; rows are then projected back onto the unit
ball (``project=True``; row-wise and non-expansive, so the sensitivities are unchanged; imputed
rows may leave the ball, which the paper does not address).
Only rows with a missing entry change, so ``Δ∞ = p`` = number of rows with at least one NaN.

``Δ2`` per method (``ImputeResult.sensitivity``):

- mean: Cor. 4, ``2·sqrt(q)/(n − p)`` (``q`` = most missing entries in one row; ``q = 1``: paper).
- median, m-trimmed mean: Table 3 bounds the change of a feature's statistic by a spread of order
  statistics over ℒ. We compute that change *exactly* for the dataset at hand: both statistics are
  non-decreasing in every value, so the extreme replace-one neighbours (drop the smallest/largest
  observed value and/or add a value ±1, the ends of the unit-ball coordinate range) give the
  largest and smallest value any neighbour's statistic can take. ``feature_l2[j]`` is the largest
  distance from this dataset's statistic to that range; ``Δ2 = sqrt(q) · max_j feature_l2[j]``.
  ``table3_l2`` holds Table 3's printed form evaluated on the same order statistics.
- regression (no intercept, each incomplete column regressed on fully observed columns): Table 3's
  bound in its replace-one form (``regression_imputation_sensitivity``) from the Gram eigenvalues.

These are local quantities of the processed dataset ``S``: they bound the change between ``S`` and
any replace-one neighbour. For a guarantee over a collection ℒ the values must hold for every
dataset in it (e.g. for a pair, take the larger of the two).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, Sequence

import numpy as np

from dpprep.preprocess.sensitivity import (
    Sensitivity,
    mean_imputation_sensitivity,
    median_imputation_sensitivity,
    regression_imputation_sensitivity,
    trimmed_mean_imputation_sensitivity,
)
from dpprep.preprocess.unit_ball import check_unit_ball, project_to_unit_ball
from dpprep.validation import check_positive_int


@dataclasses.dataclass(frozen=True, eq=False)
class ImputeResult:
    """Output of the ``impute_*`` functions.

    ``data``: completed rows; ``missing_mask``: the NaN pattern of the input; ``n``; ``p``: rows
    with at least one missing entry (= ``Δ∞``); ``max_missing_per_row`` (``q``); ``fill``: column ->
    imputed value (mean/median/trimmed) or regression coefficients; ``feature_l2``: column -> bound
    on the change of that column's imputed value between neighbours; ``sensitivity``: ``(p, Δ2)``;
    ``table3_l2``: Table 3's printed ``Δ2`` on the same data where it differs from ours.
    """

    method: str
    data: np.ndarray
    missing_mask: np.ndarray
    n: int
    p: int
    max_missing_per_row: int
    fill: Mapping[int, float | np.ndarray]
    feature_l2: dict[int, float]
    sensitivity: Sensitivity
    table3_l2: float | None = None
    details: dict[str, float] = dataclasses.field(default_factory=dict)


def _prepare(x) -> tuple[np.ndarray, np.ndarray, int, int, np.ndarray]:
    arr = check_unit_ball(x, "x", allow_nan=True)
    missing = np.isnan(arr)
    if not missing.any():
        raise ValueError("x has no missing (NaN) entries; nothing to impute")
    rows_missing = missing.any(axis=1)
    p = int(rows_missing.sum())
    q = int(missing.sum(axis=1).max())
    columns = np.flatnonzero(missing.any(axis=0))
    return arr, missing, p, q, columns


def _finish(
    arr: np.ndarray, missing: np.ndarray, fills: Mapping[int, np.ndarray | float], project: bool
) -> np.ndarray:
    data = arr.copy()
    for j, value in fills.items():
        rows = missing[:, j]
        data[rows, j] = value[rows] if isinstance(value, np.ndarray) else value
    return project_to_unit_ball(data) if project else data


def _observed(arr: np.ndarray, missing: np.ndarray, j: int, minimum: int) -> np.ndarray:
    values = np.sort(arr[~missing[:, j], j])
    if values.size < minimum:
        raise ValueError(
            f"column {j} has {values.size} observed value(s); this imputation needs >= {minimum}"
        )
    return values


def impute_mean(x, *, project: bool = True) -> ImputeResult:
    """Fills each missing entry with its column's mean of observed values (Cor. 4)."""
    arr, missing, p, q, columns = _prepare(x)
    n = arr.shape[0]
    sens = mean_imputation_sensitivity(n, p, max_missing_per_row=q)
    fills = {int(j): float(_observed(arr, missing, j, 1).mean()) for j in columns}
    per_feature = {j: 2.0 / (n - p) for j in fills}
    data = _finish(arr, missing, fills, project)
    return ImputeResult(
        "mean", data, missing, n, p, q, fills, per_feature, sens, table3_l2=2.0 / (n - p)
    )


def _trimmed_mean(values: np.ndarray, m: int) -> float:
    return float(values[m : values.size - m].mean())


def _median(values: np.ndarray) -> float:
    return float(np.median(values))


def _neighbour_range(
    values: np.ndarray, statistic: Callable[[np.ndarray], float]
) -> tuple[float, float]:
    """Smallest and largest value of a monotone ``statistic`` over the replace-one neighbours of
    the sorted observed ``values`` (one value may be dropped and/or one value in [−1, 1] added)."""
    high_variants = (values, values[1:], np.append(values, 1.0), np.append(values[1:], 1.0))
    low_variants = (
        values,
        values[:-1],
        np.insert(values, 0, -1.0),
        np.insert(values[:-1], 0, -1.0),
    )
    highs = [statistic(v) for v in high_variants if v.size]
    lows = [statistic(v) for v in low_variants if v.size]
    return min(lows), max(highs)


def _order_statistic_imputation(
    method: str,
    x,
    statistic: Callable[[np.ndarray], float],
    minimum: int,
    project: bool,
    table3: Callable[[int, int, np.ndarray], float],
) -> ImputeResult:
    arr, missing, p, q, columns = _prepare(x)
    n = arr.shape[0]
    fills, per_feature, printed = {}, {}, []
    for j in columns:
        values = _observed(arr, missing, j, minimum)
        fill = statistic(values)
        low, high = _neighbour_range(values, statistic)
        fills[int(j)] = fill
        per_feature[int(j)] = max(high - fill, fill - low)
        printed.append(table3(n, p, values))
    spread = max(per_feature.values())
    # Δ2 of a row with q missing entries: sqrt(q) times the largest per-feature change (Table 3
    # note).
    sens = median_imputation_sensitivity(p, spread, max_missing_per_row=q)
    data = _finish(arr, missing, fills, project)
    return ImputeResult(
        method,
        data,
        missing,
        n,
        p,
        q,
        fills,
        per_feature,
        sens,
        table3_l2=math.sqrt(q) * max(printed),
    )


def impute_median(x, *, project: bool = True) -> ImputeResult:
    """Fills each missing entry with its column's median of observed values (Table 3)."""

    def table3(n: int, p: int, values: np.ndarray) -> float:
        # x^max_((n+1)/2) − x^min_(n/2): the neighbours' median range, one rank either side.
        k = values.size
        upper = values[min(k - 1, k // 2 + 1)]
        lower = values[max(0, (k - 1) // 2 - 1)]
        return float(upper - lower)

    return _order_statistic_imputation("median", x, _median, 2, project, table3)


def impute_trimmed_mean(x, m: int, *, project: bool = True) -> ImputeResult:
    """Fills each missing entry with its column's m-trimmed mean (drop the m smallest and m largest
    observed values, average the rest; Table 3). Needs ``2m + 2`` observed values per column."""
    m = check_positive_int(m, "m")

    def table3(n: int, p: int, values: np.ndarray) -> float:
        # (x^max_(m) − x^min_(n−m)) / (n − 2m − p): the window any neighbour's retained values can
        # occupy (ranks m .. k−m+1, 1-indexed, increasing order) over the fewest retained values.
        k = values.size
        if n - 2 * m - p < 1:  # the printed denominator is not positive: no finite printed bound
            return math.inf
        return trimmed_mean_imputation_sensitivity(n, p, m, float(values[k - m] - values[m - 1])).l2

    # Every neighbour (one observed value fewer) must keep >= 1 value after trimming.
    return _order_statistic_imputation(
        "trimmed_mean", x, lambda v: _trimmed_mean(v, m), 2 * m + 2, project, table3
    )


def impute_regression(
    x, *, regressors: Sequence[int] | None = None, project: bool = True
) -> ImputeResult:
    """Fills each incomplete column by least squares (no intercept) on the ``regressors`` columns.

    ``regressors`` default to every fully observed column; they must have no missing entries. The
    model of column ``j`` is fitted on the rows where ``j`` is observed. ``Δ2`` is the replace-one
    form of Table 3 with ``λmax`` of the Gram of regressors and target and ``λmin`` of the
    regressors' Gram, over those rows (needs ``λmin > 1``, i.e. enough well-spread rows).
    """
    arr, missing, p, q, columns = _prepare(x)
    n, d = arr.shape
    complete = np.flatnonzero(~missing.any(axis=0))
    if regressors is None:
        reg = complete
    else:
        reg = np.asarray(sorted({int(r) for r in regressors}), dtype=np.int64)
        if reg.size and (reg.min() < 0 or reg.max() >= d):
            raise ValueError(
                f"regressors must be column indices in [0, {d}), got {list(regressors)}"
            )
        if np.isin(reg, columns).any():
            raise ValueError("regressors must be fully observed columns (no NaN)")
    if reg.size == 0:
        raise ValueError("regression imputation needs at least one fully observed regressor column")
    fills, per_feature, coefs, details = {}, {}, {}, {}
    for j in columns:
        # A column with fewer observed rows than regressors has no fit (an all-NaN one has none
        # at all): say so, rather than fail later on its Gram's zero eigenvalue.
        _observed(arr, missing, j, reg.size)
        rows = ~missing[:, j]
        xr, y = arr[rows][:, reg], arr[rows, j]
        gram = xr.T @ xr
        full = np.column_stack([xr, y])
        lam_min = float(np.linalg.eigvalsh(gram)[0])
        lam_max = float(np.linalg.eigvalsh(full.T @ full)[-1])
        sens_j = regression_imputation_sensitivity(p, lam_max, lam_min)
        beta = np.linalg.solve(gram, xr.T @ y)
        fills[int(j)] = arr[:, reg] @ beta
        coefs[int(j)] = beta
        per_feature[int(j)] = sens_j.l2
        details[f"lambda_max[{j}]"], details[f"lambda_min[{j}]"] = lam_max, lam_min
    sens = Sensitivity(linf=float(p), l2=math.sqrt(q) * max(per_feature.values()))
    data = _finish(arr, missing, fills, project)
    printed = math.sqrt(q) * max(
        regression_imputation_sensitivity(
            p, details[f"lambda_max[{j}]"], details[f"lambda_min[{j}]"], replace_one=False
        ).l2
        for j in columns
    )
    return ImputeResult(
        "regression",
        data,
        missing,
        n,
        p,
        q,
        coefs,
        per_feature,
        sens,
        table3_l2=printed,
        details=details,
    )
