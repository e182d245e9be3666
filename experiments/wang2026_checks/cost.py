"""The cost model of ``wang2026_checks`` for ``run_all --plan`` and ``--validate``: a pure function
of the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations

import math


from experiments.planning.flops import Cost, corrdp_runs_flops, CORRDP_BASIS


def cost(profile: str) -> Cost:
    """Its three training units (items 7, 8 and 14, run by wang2026_fig1's code), item 24's
    inequality chain and item 25's Laplace draws; items 1–6 (data loads, the Sepsis rebalancing)
    are not counted."""
    import inspect

    from experiments import wang2026_fig1 as fig1
    from experiments.wang2026_checks import GRIDS, LAPLACE_SETUP, TRAINING_SEEDS

    g = GRIDS[profile]
    a, b, c = fig1.PANELS["a"], fig1.PANELS["b"], fig1.PANELS["c"]
    item14_eps = inspect.signature(fig1.item14_check).parameters["epsilons"].default
    mean_entries = 50.5  # random_tv_vectors: 1–100 entries, uniform
    flops = (
        corrdp_runs_flops(b, 1, b.steps)  # item 7: Adult non-private GD, one run (deterministic)
        + corrdp_runs_flops(c, TRAINING_SEEDS, c.steps)  # item 8: Sepsis NN, non-private, per seed
        # item 14
        + corrdp_runs_flops(a, TRAINING_SEEDS * len(fig1.PRIVATE) * len(item14_eps), a.steps)
        + corrdp_runs_flops(a, 1 + a.partial, a.steps)  # item 14's references
        + g["chain_vectors"] * mean_entries * (math.log2(mean_entries) + 6.0)
        + g["laplace_draws"] * LAPLACE_SETUP["m"] * 10.0
    )
    return Cost(
        3,
        flops,
        None,
        floor=True,
        basis=(
            f"analytic: items 7, 8, 14 (Adult GD 1 run, Sepsis NN {TRAINING_SEEDS} seeds, panel a"
            f" {TRAINING_SEEDS} seeds × 3 × {len(item14_eps)} ε; {CORRDP_BASIS}) + item 24 vectors"
            " × 50.5·(log2 50.5 + 6) + item 25 draws × m × 10; a Python loop over item 24's"
            " vectors, the small NN's per-step overhead, data loads and the Sepsis rebalancing"
            " (not counted) dominate"
        ),
    )
