"""Closed-form sensitivities: spec §11.1 constants, Table 2 cells they induce, and bad input."""

from __future__ import annotations

import math

import pytest

from dpprep.preprocess.sensitivity import Sensitivity
from dpprep.preprocess import sensitivity as S


def test_pca_constants_match_spec_11_1():
    assert S.pca_rank_tau_constant(101) == pytest.approx(12.2, abs=1e-12)
    assert S.pca_rank_tau_constant(1000) == pytest.approx(12.0200, abs=5e-5)
    assert n_times_cov(101) == pytest.approx(6.1, abs=1e-12)
    # τ* of rank reduction is n·Δ2 = 4(3n+2)/((n−1)δ): 12.2/δ at n = 101.
    for gap in (0.5, 1.0, 2.0):
        sens = S.pca_rank_sensitivity(101, gap)
        assert sens.linf == 101
        assert sens.tau == pytest.approx(12.2 / gap, rel=1e-12)
        assert S.pca_dim_sensitivity(101, gap, 10.0).tau == pytest.approx(24.4 / gap, rel=1e-12)
    assert S.pca_dim_sensitivity(101, 3.0, 0.5).l2 == pytest.approx(
        2 * S.pca_rank_sensitivity(101, 0.5).l2
    )


def n_times_cov(n: int) -> float:
    return n * S.pca_covariance_perturbation(n)


def test_table2_budgets_at_spec_11_2_point():
    # p = 10, η = 0.1, n = 1000: τ* enters Table 2 as ε(1 + τ*) for Laplace (spec §11.2 row 3).
    assert 1 + S.dedup_sensitivity(10).tau == pytest.approx(11.0)
    assert 1 + S.quantization_sensitivity(10, 0.1, conservative=False).tau == pytest.approx(2.0)
    assert 1 + S.mean_imputation_sensitivity(1000, 10).tau == pytest.approx(1.0202, abs=5e-5)
    # DP-GD × mean imputation: 1.05·(4 + τ*²) = 4.2·(1 + p²/(n−p)²)  (spec §6, §11.1).
    tau = S.mean_imputation_sensitivity(1000, 10).tau
    assert 1.05 * (4 + tau**2) == pytest.approx(4.2 * (1 + 10**2 / 990**2), rel=1e-12)
    assert 11 * 1.05 * (4 + tau**2) == pytest.approx(46.2047, abs=5e-4)


def test_closed_forms():
    assert S.dedup_sensitivity(6) == Sensitivity(6.0, 1.0)
    assert S.quantization_sensitivity(6, 0.05, conservative=False) == Sensitivity(6.0, 0.05)
    # safe default, as quantize()
    assert S.quantization_sensitivity(6, 0.05) == Sensitivity(6.0, 0.1)
    assert S.mean_imputation_sensitivity(100, 20).l2 == pytest.approx(2 / 80)
    assert S.mean_imputation_sensitivity(100, 20, max_missing_per_row=4).l2 == pytest.approx(4 / 80)
    assert S.median_imputation_sensitivity(5, 0.1, max_missing_per_row=4).l2 == pytest.approx(0.2)
    assert S.trimmed_mean_imputation_sensitivity(100, 10, 5, 0.8).l2 == pytest.approx(0.8 / 80)
    lmax, lmin = 50.0, 5.0
    printed = lmax**2 / ((lmax + 1) * lmin**2) + 1 / lmin
    assert S.regression_imputation_sensitivity(
        3, lmax, lmin, replace_one=False
    ).l2 == pytest.approx(printed)
    replace = 2 * (lmax**2 / ((lmax + 1) * (lmin - 1) ** 2) + 1 / (lmin - 1))
    assert S.regression_imputation_sensitivity(3, lmax, lmin).l2 == pytest.approx(replace)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: S.mean_imputation_sensitivity(10, 10), "n > p"),
        (lambda: S.mean_imputation_sensitivity(10, 12), "n > p"),
        (lambda: S.mean_imputation_sensitivity(10, -1), "p"),
        (lambda: S.dedup_sensitivity(2.5), "p"),
        (lambda: S.quantization_sensitivity(4, 0.0), "eta"),
        (lambda: S.quantization_sensitivity(4, -0.1), "eta"),
        (lambda: S.quantization_sensitivity(4, math.nan), "eta"),
        (lambda: S.pca_rank_sensitivity(100, 0.0), "gap"),
        (lambda: S.pca_rank_sensitivity(100, -1.0), "gap"),
        (lambda: S.pca_rank_sensitivity(1, 1.0), "n"),
        (lambda: S.pca_dim_sensitivity(100, 1.0, 0.0), "gap_1"),
        (lambda: S.trimmed_mean_imputation_sensitivity(20, 10, 5, 0.1), "n - 2m - p"),
        (lambda: S.median_imputation_sensitivity(3, -0.1), "spread"),
        (lambda: S.regression_imputation_sensitivity(3, 10.0, 1.0), "lambda_min > 1"),
        (lambda: S.regression_imputation_sensitivity(3, 1.0, 10.0), "must not exceed"),
    ],
)
def test_bad_input_raises(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_preprocess_does_not_import_the_accountant():
    # Sensitivity lives with the pre-processings, so they load without dpprep.accounting.
    import subprocess
    import sys

    code = (
        "import sys, dpprep.preprocess, dpprep.preprocess.sensitivity; "
        "print(sorted(m for m in sys.modules if m.startswith('dpprep.accounting')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    from dpprep.preprocess.privacy import meta

    assert "Sensitivity" not in meta.__all__  # one home: dpprep.preprocess.sensitivity
