"""The cost model of ``sun2024_table2`` for ``run_all --plan`` and ``--validate``: a pure function
of the profile that reads the experiment's own grid. It never feeds a unit (outside the units'
digest).
"""

from __future__ import annotations


from experiments.planning.flops import DATA_SHAPES, Cost


def cost(profile: str) -> Cost:
    from experiments.sun2024_table2 import DATASETS

    # the module's diam_rows (smoke subsamples the diameter)
    rows = 4000 if profile == "smoke" else None
    flops = 0.0
    for name in DATASETS:
        n, d, _ = DATA_SHAPES[name]
        m = rows or n
        # blocked pairwise distances: a Gram product (2 m² d) and the norms
        flops += 3.0 * m * m * d
    return Cost(
        None,
        flops,
        None,
        "analytic: exact diameter, 3·n²·d per dataset (pairwise distances); no grid units",
    )
