"""The cost model of ``wang2026_table2`` for ``run_all --plan`` and ``--validate``: a pure function
of the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations

import math
from typing import Any


from experiments.planning.flops import (
    DATA_SHAPES,
    CORRDP_SHAPES,
    SEPSIS_REBALANCED_ROWS,
    Cost,
    same_grid,
)


def _hist_tv_flops(n: int, k: int) -> float:
    """One histogram TV (:func:`dpprep.corrdp.tv.histogram_tv`) of an ``(n, k)`` continuous block
    given a discrete feature: the conditioning cells and the occupied bins (two sorts, 2·n·log2 n),
    the bin codes (k·(n·log2 n + 8n)), then counts and a pairwise maximum over the few cells."""
    return (2.0 + k) * n * math.log2(n) + 8.0 * k * n


def cost(profile: str) -> Cost:
    """Its 9 units: 5 synthetic m_s (population and plug-in Eq. 22), Adult's §5.3 mixed procedure,
    Credit's and Sepsis' conditional histograms, Medical (1,000 rows: ~0)."""
    from dpprep.corrdp.data import CREDIT_FACTORS
    from experiments.wang2026_table2 import GRIDS, M_S

    grid: Any = GRIDS[profile]  # a dict of mixed values
    n_syn, m, _ = CORRDP_SHAPES["synthetic"]
    seeds = len(grid["data_seeds"])
    synthetic = sum(
        (1 + seeds) * (m - m_s) * (2 * m_s**3 / 3 + 4 * m_s**2) + seeds * 4.0 * n_syn * m * m
        for m_s in M_S
    )
    n_adult = min(grid["adult_rows"] or CORRDP_SHAPES["adult"][0], CORRDP_SHAPES["adult"][0])
    # 3 discrete U; fnlwgt's cov
    adult = 3 * (1 + len(grid["adult_bins"])) * _hist_tv_flops(n_adult, 3) + 2.0 * n_adult * 16
    n_credit, raw, _ = DATA_SHAPES["credit_default"]
    credit = (
        len(CREDIT_FACTORS)
        * len(grid["credit_bins"])
        * (raw - len(CREDIT_FACTORS))
        * _hist_tv_flops(n_credit, 1)
    )
    sepsis = len(grid["sepsis_bins"]) * sum(
        _hist_tv_flops(rows, 1)
        for rows in (DATA_SHAPES["sepsis"][0], SEPSIS_REBALANCED_ROWS, CORRDP_SHAPES["sepsis"][0])
    )
    return Cost(
        len(M_S) + 4,
        synthetic + adult + credit + sepsis,
        None,
        cheap=True,
        floor=True,
        basis=(
            "analytic: synthetic (1 + seeds) × |U| solves (2m_s³/3 + 4m_s²) + seeds × 4·n·m² (data,"
            " covariance); histogram TVs ((2 + k)·n·log2 n + 8kn) for Adult's 3 discrete U × (1 +"
            " bins), Credit's 4 U × bins × 19 S, Sepsis' 3 data sets × bins; sklearn Newton-CG fits"
            " (iterations data-dependent), np.unique and the Sepsis rebalancing (cached) not"
            " counted: seconds"
        )
        + same_grid(GRIDS, profile),
    )
