"""Sun, Suresh, Menon (2024) Table 2: diam(D), max‖x − μ‖ and mean‖x − μ‖ of unit-normalised
features (train split, exact mean; spec §6.7, A12).

The diameter is exact over all pairs: for unit rows ``‖x_i − x_j‖² = 2 − 2 x_i·x_j`` (rows of
norm 0 are handled by the general ``‖x_i‖² + ‖x_j‖² − 2 x_i·x_j``), so it is the minimum of the
Gram matrix, computed block by block (upper-triangular blocks only, float32 matrix products);
the maximising pair is re-evaluated in float64. Distances to the mean are in float64
(:mod:`.compute`).

C5 (MNIST, FMNIST): 1.4142 / 1.0320 / 0.7713 and 1.4138 / 1.1005 / 0.6239 (±0.005). C6
(CIFAR-100 features, ±0.02) runs only when the user supplies ``cifar100_features``; otherwise the
rows say "features not supplied" (the numbers: ``targets.csv``). Smoke: the diameter over the
first 4000 rows only.
"""

from __future__ import annotations

import pandas as pd

from dpprep import data
from dpprep.data import DataNotFoundError
from experiments import RunContext
from experiments.results import Comparison, data_identity, write_csv
from experiments.targets import paper_targets

from . import report
from .compute import diameter, stats
from .config import BLOCK, DATASETS, DIAM_ROWS


__all__ = ["BLOCK", "DATASETS", "diameter", "run", "stats"]


def run(ctx: RunContext) -> list[Comparison]:
    targets = paper_targets(__name__).set_index("dataset")
    comparisons: list[Comparison] = []
    rows = []
    diam_rows = DIAM_ROWS.get(ctx.profile)
    for name in DATASETS:
        try:
            ds = data.load(name, ctx.data_dir)
        except DataNotFoundError:
            comparisons.append(report.not_supplied(name, targets.loc[name]))
            continue
        ctx.progress(f"{name}: diameter over {diam_rows or ds.x_train.shape[0]} rows")
        # keyed on a user-supplied file's content too: a replaced .npz recomputes its row
        rec = ctx.store.run(
            f"table2/{name}{data_identity(ds)}/{diam_rows}",
            lambda ds=ds: stats(ds.x_train, diam_rows=diam_rows),
        )
        rows.append({"dataset": name, **rec})
        comparisons += report.measured(name, rec, targets.loc[name], diam_rows)
    write_csv(pd.DataFrame(rows), ctx.out_dir / "table2.csv")
    return comparisons
