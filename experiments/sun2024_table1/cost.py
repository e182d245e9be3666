"""The cost model of ``sun2024_table1`` for ``run_all --plan`` and ``--validate``: a pure function
of the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations


import numpy as np

from experiments.planning.flops import GIB, Cost


def cost(profile: str) -> Cost:
    """The module's own count (:func:`experiments.sun2024_table1.grid_flops`: Σ units seeds × models
    × the plan's steps × batch × its per-example FLOPs, ≈ 4·d·k + clipping), its units
    (``build_units`` on each dataset's shape, no data loaded) and, for the full search, what its
    staged option would cost (stage 1 + an upper bound on stage 2)."""
    from experiments.sun2024_table1 import DATASET_SHAPES as SHAPES, GRIDS, build_units, grid_flops

    g = GRIDS[profile]
    units = 0
    for name in g.datasets:
        n = min(SHAPES[name][0], g.subset or SHAPES[name][0])
        units += len(build_units({"name": name, "unit": np.zeros((n, 0), np.float32)}, g))
    flops = grid_flops(profile)["total"]
    data_bytes = max(
        4 * 3 * min(n, g.subset or n) * d for n, d, _ in (SHAPES[name] for name in g.datasets)
    )
    staged = ""
    if g.search == "full":
        alt = grid_flops(profile, "staged")
        staged = (
            f"; staged search (top {g.top_k}): {alt['total']:.3g} FLOP (stage 2 an upper bound)"
        )
    return Cost(
        units,
        flops,
        g.memory_budget + data_bytes,
        f"sun2024_table1.grid_flops ({g.search} search): Σ units seeds × models × steps·B × (4dk +"
        f" clipping){staged}; peak = memory_budget {g.memory_budget / GIB:.0f} GiB + data (est.)",
    )
