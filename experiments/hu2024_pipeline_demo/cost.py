"""The cost model of ``hu2024_pipeline_demo`` for ``run_all --plan`` and ``--validate``: a pure
function of the profile that reads the experiment's own grid. It never feeds a unit (outside the
units' digest).
"""

from __future__ import annotations

import math


from experiments.planning.flops import DATA_SHAPES, Cost, same_grid
from experiments.hu2024_table3.cost import impute_flops


# Rows the pipeline demo analyses per mechanism (experiments.hu2024_pipeline_demo.preprocess_steps:
# none, the three steps, the two composed chains); tests/experiments/test_planning_costs.py checks
# it.
PIPELINE_DEMO_STEPS = 6


def cost(profile: str) -> Cost:
    """One pre-processing unit (MCAR, mean imputation, η-quantization, PCA rank-k on Adult) and per
    mechanism a base calibration and one analysis (overall ε and calibrations) per step."""
    from experiments.hu2024_pipeline_demo import PROFILES

    cfg = PROFILES[profile]
    rows, d, _ = DATA_SHAPES["adult"]
    n = min(cfg.n_rows or rows, rows)
    k = cfg.pca_k
    flops = (
        n * d
        + impute_flops(n, d, 1)  # MCAR copy, mean imputation
        + 5.0 * n * d
        + 3.0
        * n
        * math.log2(n)
        * d  # quantization: check, snap; kd-tree build, 2 range queries/row
        + 3.0 * n * d
        + 2.0 * n * d * d
        + 9.0 * d**3
        + 4.0 * n * d * k
    )  # PCA: check, covariance, eigh, projection
    units = 1 + len(cfg.mechanisms) * (1 + PIPELINE_DEMO_STEPS)
    return Cost(
        units,
        flops,
        6 * 8.0 * n * d,
        cheap=True,
        floor=True,
        basis=(
            "analytic: MCAR + mean imputation (12·n·d + n·(log2 n + 16)), η-quantization (5·n·d +"
            " kd-tree 3·n·log2(n)·d; its data-dependent neighbour counts not counted), PCA"
            f" rank-{k} (2·n·d² + 9d³ + 4·n·d·k), Adult n={n}, d={d}; {len(cfg.mechanisms)} × (1 +"
            f" {PIPELINE_DEMO_STEPS}) calibrations (accounting, not counted): seconds; peak = 6"
            " copies of the data (est.)"
        )
        + same_grid(PROFILES, profile),
    )
