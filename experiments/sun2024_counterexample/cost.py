"""The cost model of ``sun2024_counterexample`` for ``run_all --plan`` and ``--validate``: a pure
function of the profile that reads the experiment's own grid. It never feeds a unit (outside the
units' digest).
"""

from __future__ import annotations

import math


from experiments.planning.flops import Cost


# a run-step of dpsgdf_theory.simulate_counterexample: 2 active tests × counts (8), the 2 noisy
E1_STEP_FLOPS = 25
# gradient coordinates (10), the update (4), the running sums (2), the minus count
# (1)
COUNTEREXAMPLE_CLIPS = (
    4  # C ∈ {0.1, 1, 10, sqrt(μ² + 1)} of E1 and of E2's DPSGD and Alg-3-like arms
)


def _types_step_flops(m: int, d: int) -> int:
    """One run-step of :func:`dpprep.dpsgdf.theory.simulate_types` on ``m`` types in ``d``
    dimensions: the active test (2md), counts × clip scale (2m), the gradient sum (2md), the noisy
    update (5d) and the running average (d). The random draws (counts, normals) are not counted."""
    return 4 * m * d + 2 * m + 6 * d


def _priv_quantile_flops(grid: int, n: int) -> float:
    """One :func:`dpprep.dpsgdf.theory.priv_quantile_em` of ``n`` values on a ``grid``-point grid:
    snapping and sorting the values (6n + n·log2 n), two searchsorted passes of the grid
    (2·grid·log2 n), then the utility, exponential weights and draw (≈ 11 per grid point)."""
    return 11.0 * grid + 2.0 * grid * math.log2(n) + n * math.log2(n) + 6.0 * n


def cost(profile: str) -> Cost:
    """E1 cells (all (C, η) × repetitions of one (n, ε, μ, T) at once), the crosscheck (n = 100,
    not counted: < 1e-4 of the total) and E2 cells (three arms over (T, q), DPSGD-F's private
    mean and τ per seed). E1 cells re-run when a first stage falls below the bound are
    data-dependent (2 in the quick and paper runs): not counted, in FLOPs or units."""
    from experiments.sun2024_counterexample import CFGS

    cfg = CFGS[profile]
    e1_cells = len(cfg.e1_n) * len(cfg.e1_eps) * len(cfg.e1_mu) * len(cfg.e1_T)
    e1_runs = COUNTEREXAMPLE_CLIPS * len(cfg.e1_lr) * cfg.e1_reps
    e1 = e1_cells // len(cfg.e1_T) * sum(cfg.e1_T) * e1_runs * E1_STEP_FLOPS
    seeds, lrs = cfg.e2_seeds, len(cfg.e2_lr)
    dpsgd_runs, translated_runs = (
        COUNTEREXAMPLE_CLIPS * lrs * seeds,
        (1 + COUNTEREXAMPLE_CLIPS) * lrs * seeds,
    )
    per_step = dpsgd_runs * _types_step_flops(2, 2) + translated_runs * _types_step_flops(2, 3)
    e2_cells, e2 = 0, 0.0
    for n in cfg.e2_n:
        cells = len(cfg.e2_mu) * len(cfg.e2_eps)
        rows = 2 * (n // 2)
        e2_cells += cells
        e2 += cells * (
            sum(cfg.e2_T) * len(cfg.e2_q) * per_step
            + seeds * (4 * _priv_quantile_flops(cfg.grid_points, rows) + 20.0 * rows)
        )
    return Cost(
        e1_cells + 1 + e2_cells,
        e1 + e2,
        None,
        floor=True,
        basis=(
            f"analytic: E1 {e1_cells} cells × {e1_runs} runs × T × 25 FLOPs per run-step; E2"
            f" {e2_cells} cells × Σ_(T,q) T × ({dpsgd_runs} DPSGD runs × 32 + {translated_runs}"
            " DPSGD-F/Alg-3 runs × 46) + per seed 4 PrivQuantiles (≈ G·(11 + 2·log2 n), G ="
            f" {cfg.grid_points}); numpy steps over ≤ {e1_runs} runs: per-step call overhead, the"
            " random draws and the PLD calibrations (not counted) dominate; data-dependent E1"
            " re-runs not counted"
        ),
    )
