"""Imputation: empirical (Δ∞, Δ2) over random replace-one neighbours never exceed the returned
bounds, exhaustive check of the median/trimmed-mean neighbour ranges, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.preprocess import impute_mean, impute_median, impute_regression, impute_trimmed_mean
from dpprep.preprocess.impute import _median, _neighbour_range, _trimmed_mean

METHODS = {
    "mean": impute_mean,
    "median": impute_median,
    "trimmed": lambda x: impute_trimmed_mean(x, 3),
    "regression": lambda x: impute_regression(x, regressors=[1, 2, 3]),
}


def _ball_rows(rng: np.random.Generator, n: int, d: int, lo: float = 0.3) -> np.ndarray:
    x = rng.normal(size=(n, d)) + np.array([0.8, 0.3, -0.2, 0.1][:d])
    return x * (rng.uniform(lo, 1.0, size=n) / np.linalg.norm(x, axis=1))[:, None]


def _neighbour_row(rng: np.random.Generator, d: int, missing_cols: list[int]) -> np.ndarray:
    kind = rng.integers(4)
    if kind == 0:  # an extreme point of the ball on an imputed coordinate
        z = np.zeros(d)
        z[missing_cols[0]] = rng.choice([-1.0, 1.0])
    else:
        z = _ball_rows(rng, 1, d, lo=0.0)[0]
    if kind == 3:  # the neighbour's record itself has missing entries
        z[missing_cols[: rng.integers(1, len(missing_cols) + 1)]] = np.nan
    return z


def _changes(a: np.ndarray, b: np.ndarray, replaced: int) -> tuple[int, float]:
    keep = np.ones(a.shape[0], bool)
    keep[replaced] = False
    dist = np.linalg.norm(a[keep] - b[keep], axis=1)
    return int(np.count_nonzero(dist > 1e-13)), float(dist.max(initial=0.0))


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("seed", [0, 1])
def test_bounds_hold_on_random_neighbours(method, seed):
    rng = np.random.default_rng(seed)
    n, d = 80, 4
    x = _ball_rows(rng, n, d)
    x[rng.random(n) < 0.15, 0] = np.nan
    impute = METHODS[method]
    worst = 0.0
    for _ in range(150):
        i = int(rng.integers(n))
        x2 = x.copy()
        x2[i] = _neighbour_row(rng, d, [0])
        r1, r2 = impute(x), impute(x2)
        h, l2 = _changes(r1.data, r2.data, i)
        # Each dataset's own bound covers the pair (local sensitivity), so the smaller must hold.
        assert h <= min(r1.p, r2.p) == min(r1.sensitivity.linf, r2.sensitivity.linf)
        bound = min(r1.sensitivity.l2, r2.sensitivity.l2)
        assert l2 <= bound * (1 + 1e-9), (method, l2, bound)
        worst = max(worst, l2 / bound)
    print(f"{method} seed={seed}: worst measured/bound = {worst:.3f}")
    # the check bites (regression: worst-case bound)
    assert worst > (0.01 if method == "regression" else 0.3)


@pytest.mark.parametrize("method", ["mean", "median", "trimmed"])
def test_bounds_hold_with_several_missing_columns(method):
    rng = np.random.default_rng(7)
    n, d = 80, 4
    x = _ball_rows(rng, n, d)
    x[rng.random(n) < 0.15, 0] = np.nan
    x[rng.random(n) < 0.15, 2] = np.nan
    impute = METHODS[method]
    for _ in range(150):
        i = int(rng.integers(n))
        x2 = x.copy()
        x2[i] = _neighbour_row(rng, d, [0, 2])
        r1, r2 = impute(x), impute(x2)
        h, l2 = _changes(r1.data, r2.data, i)
        assert h <= min(r1.p, r2.p)
        assert l2 <= min(r1.sensitivity.l2, r2.sensitivity.l2) * (1 + 1e-9)


def test_mean_imputation_values_and_table3_mean():
    x = np.array([[0.2, 0.1], [np.nan, 0.3], [0.4, np.nan], [0.6, 0.2]])
    r = impute_mean(x, project=False)
    np.testing.assert_allclose(r.data, [[0.2, 0.1], [0.4, 0.3], [0.4, 0.2], [0.6, 0.2]])
    assert r.p == 2 and r.max_missing_per_row == 1
    assert r.sensitivity.l2 == pytest.approx(2 / (4 - 2)) and r.sensitivity.linf == 2


@pytest.mark.parametrize("statistic", [_median, lambda v: _trimmed_mean(v, 2)])
@pytest.mark.parametrize("size", [7, 8, 9])
def test_neighbour_range_is_exact_and_covers_every_neighbour(statistic, size):
    rng = np.random.default_rng(size)
    values = np.sort(rng.uniform(-1, 1, size))
    low, high = _neighbour_range(values, statistic)
    seen = []
    for drop in [None, *range(size)]:
        base = values if drop is None else np.delete(values, drop)
        for add in [None, *np.linspace(-1, 1, 41)]:
            v = base if add is None else np.sort(np.append(base, add))
            seen.append(statistic(v))
    assert min(seen) == pytest.approx(low) and max(seen) == pytest.approx(high)


def test_regression_imputation_recovers_a_linear_column():
    rng = np.random.default_rng(3)
    x = _ball_rows(rng, 200, 3) * 0.5
    x[:, 0] = 0.5 * x[:, 1] - 0.3 * x[:, 2]
    truth = x[:, 0].copy()
    x[:20, 0] = np.nan
    r = impute_regression(x)
    np.testing.assert_allclose(r.data[:20, 0], truth[:20], atol=1e-12)
    assert r.sensitivity.l2 > r.table3_l2  # replace-one form is the larger (≈2×) bound


def test_bad_input():
    x = np.array([[0.2, 0.1], [np.nan, 0.3], [0.4, 0.2]])
    with pytest.raises(ValueError, match="no missing"):
        impute_mean(np.nan_to_num(x))
    with pytest.raises(ValueError, match="infinite"):
        impute_mean(np.where(np.isnan(x), np.inf, x))
    with pytest.raises(ValueError, match="unit L2 ball"):
        impute_mean(x * 4)
    with pytest.raises(ValueError, match="n > p"):
        impute_mean(np.array([[np.nan, 0.1], [0.2, np.nan]]))
    with pytest.raises(ValueError, match="observed"):
        impute_trimmed_mean(x, 1)
    with pytest.raises(ValueError, match="m"):
        impute_trimmed_mean(x, 0)
    with pytest.raises(ValueError, match="lambda_min > 1"):
        impute_regression(x)  # three rows cannot give a well-conditioned Gram matrix
    with pytest.raises(ValueError, match="fully observed"):
        impute_regression(x, regressors=[0])
    with pytest.raises(
        ValueError, match="column 2 has 0 observed value\\(s\\); this imputation needs >= 2"
    ):
        # all-NaN column
        impute_regression(np.column_stack([np.full((50, 2), 0.1), np.full(50, np.nan)]))


@pytest.mark.parametrize("method", ["mean", "median", "trimmed_mean"])
def test_imputed_rows_are_projected_back_into_the_unit_ball(method):
    """Rows of norm 1 whose imputed value is large leave the ball unless projected back (regression
    imputation shares the same final step but needs λ_min(XᵀX) > 1, which this small case lacks)."""
    from dpprep.preprocess import impute_mean, impute_median, impute_trimmed_mean

    rng = np.random.default_rng(7)
    n = 200
    # Column 0 is large on the observed rows (mean ≈ 0.9); the rows missing it use all their norm on
    # column 1, so the filled row has norm ≈ sqrt(1 + 0.81) > 1.
    x = np.zeros((n, 3))
    x[:, 0] = rng.uniform(0.85, 0.95, n)
    x[:, 1] = np.sqrt(1 - x[:, 0] ** 2) * 0.99
    x[:, 2] = 0.01 * rng.standard_normal(n)
    missing = np.arange(n) < 20
    x[missing, 0] = np.nan
    x[missing, 1], x[missing, 2] = 1.0, 0.0
    impute = {
        "mean": impute_mean,
        "median": impute_median,
        "trimmed_mean": lambda a, **kw: impute_trimmed_mean(a, 2, **kw),
    }[method]

    raw = impute(x, project=False)
    assert np.linalg.norm(raw.data[missing], axis=1).min() > 1.2  # the case really leaves the ball
    projected = impute(x)
    norms = np.linalg.norm(projected.data, axis=1)
    assert norms.max() <= 1 + 1e-12
    np.testing.assert_array_equal(projected.data[~missing], x[~missing])  # complete rows untouched
    np.testing.assert_allclose(norms[missing], 1.0, rtol=1e-12)  # projected onto the sphere
    assert projected.sensitivity == raw.sensitivity  # projection is non-expansive: same bound
