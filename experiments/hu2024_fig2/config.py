"""Figure 2's settings: the mechanism and panels' parameters (spec §7 / §11.4 defaults), each
profile's grid size, and the x values where the paper's reference numbers are read off.

The reference x values live here, not only in ``targets.csv``: they shape the units' grids, and
the units' key covers the Python sources (this module) but not the targets.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Fig2Config:
    """Spec §7 / §11.4 defaults; the grid sizes depend on the profile (reference x values are
    always included so every profile produces the same comparisons)."""

    epsilon: float = 1.0
    delta: float = 1e-3
    quant_p: int = 10
    eta_range: tuple[float, float] = (1e-3, 1.0)
    imputation_n: int = 100
    pca_gap: float = 1.0
    pca_n_range: tuple[int, int] = (101, 10_000)
    grid_points: int = 25


PROFILE_GRID_POINTS = {"smoke": 0, "quick": 25, "paper": 61}

# Where spec §11.4's values are read off (targets.csv): panel (a)'s η, panel (b)'s missing
# fractions, panel (c)'s n; the crossover η joins panel (a)'s grid wherever there is a curve.
REFERENCE_ETAS = (1e-3, 0.01, 0.1, 0.5, 1.0)
REFERENCE_CROSSOVER_ETA = 0.255
REFERENCE_FRACTIONS = (0.01, 0.1, 0.5, 0.8, 0.9, 0.95)
REFERENCE_NS = (101, 1000, 10_000)
