"""Sun, Suresh & Menon (2024) Table 1 with the tuning paid: the grid each private search draws
its candidates from, the search's parameters (mean K, score noise, validation rows) and the
number of independent selections per cell, per profile; the seed and δ."""

from __future__ import annotations

import dataclasses

DELTA = 1e-5
SEED = 20240522
# the stream of DPSGD-F's private-mean noise, apart from the search's
MEAN_STREAM = "selection_private_mean"


@dataclasses.dataclass(frozen=True)
class Grid:
    epsilons: tuple[float, ...]
    batch_size: int
    epochs: float
    feature_norms: tuple[float, ...]
    learning_rates: tuple[float, ...]
    eps_fs: tuple[float, ...]
    np_batch_size: int
    np_epochs: int
    np_feature_norm: float
    np_learning_rates: tuple[float, ...]
    mean_candidates: float
    score_noise: float
    validation_size: int
    subset: int | None = None
    draws: int = 1  # independent selections per (method, ε): fresh split, K, points and noise each


_QUICK = Grid(
    (1.0, 2.0),
    4096,
    40,
    (10.0, 100.0),
    (0.5, 2.0),
    (0.02, 0.05),
    1024,
    80,
    10.0,
    (0.0625, 0.25, 1.0),
    4,
    50.0,
    10_000,
)
GRIDS = {
    "smoke": Grid(
        (1.0,), 512, 1, (10.0,), (1.0,), (0.05,), 512, 1, 1.0, (2.0,), 2, 20.0, 500, subset=3000
    ),
    "quick": _QUICK,
    # The paper's own grid is GPU-scale (sun2024_table1); at paper scale this experiment repeats the
    # quick grid's selection 5 times per cell, so its rows are a mean ± s.d. of the procedure.
    "paper": dataclasses.replace(_QUICK, draws=5),
}
