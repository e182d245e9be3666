"""Sun, Suresh & Menon (2024) Table 1 with the tuning paid: DPSGD-F vs DPSGD at END-TO-END ε.

The paper-style numbers (``sun2024_table1``) take the best grid point *on test* and report the
training run's ε alone. Here each private method picks its point by private random search
(:func:`dpprep.selection.select`) on a validation split carved from the MNIST training set:
``K ~`` geometric with a small mean, each candidate a uniformly drawn point of the quick grid
(C_F × η, and ε_F for DPSGD-F), trained on the training part and scored by a noisy count of
correct validation predictions; the training noise is calibrated so that the WHOLE procedure is
(ε, 1e-5)-DP, ε ∈ {1, 2} (RDP; dp-accounting's ``RepeatAndSelectDpEvent``). DPSGD-F's private
mean is released once, before the search, at every ε_F of the grid (the unit-norm mean of the
training part, each a Gaussian of sensitivity 1; μ̂ at C_F is C_F times it, post-processing), and
those releases compose once, outside the repetition (``fixed_events``). The chosen model is
bias-corrected and scored on the test set. Non-private SGD picks its η by exact validation
accuracy (nothing to charge) and is the reference.

Rows (info): per method and ε the honest-tuning test accuracy next to the paper-style one read
from ``sun2024_table1``'s ``selection.csv`` in the same output directory (absent: the row says
so), with the end-to-end ε and the charged parts (``EndToEnd.as_row()``, in ``runs.csv``); the
figure ``accuracy_vs_epsilon.png`` plots both against ε. ``draws`` selections per (method, ε), each
with fresh randomness (split, K, points, noise; draw 0 is the single-draw protocol's key), all
deterministic from the seed of :mod:`.config`; with more than one the rows give mean ± s.d. over
draws.

Profiles: ``smoke`` a 3000-row subset, ε = 1, K mean 2, one epoch; ``quick`` full MNIST, the
quick grid's (B, E) = (4096, 40), C_F ∈ {10, 100}, η ∈ {0.5, 2}, ε_F ∈ {0.02, 0.05}, K mean 4,
10 000 validation rows, score noise 50 (0.5 pp of validation accuracy): 5 units, one selection's
K candidates each ~500 Poisson steps of B = 4096. One selection per cell is a single draw (of the
split, K and the points): the quick rows are one sample of the procedure, not its mean. ``paper``
is the quick grid with 5 draws per cell (the paper's own grid is GPU-scale, see ``sun2024_table1``).
The grids are in :mod:`.config`, the units in :mod:`.compute`. No numbers of the paper are held
here: the paper-style ones are ``sun2024_table1``'s measurements.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pandas as pd

from experiments import RunContext
from experiments.results import Comparison, config_json, provenance_json, write_csv

from . import report
from .compute import load, run_nonprivate, run_private
from .config import DELTA, GRIDS, MEAN_STREAM, SEED, Grid
from .plots import plot

__all__ = [
    "DELTA",
    "GRIDS",
    "MEAN_STREAM",
    "SEED",
    "Grid",
    "load",
    "run",
    "run_nonprivate",
    "run_private",
]


def run(ctx: RunContext) -> list[Comparison]:
    grid = GRIDS[ctx.profile]
    ds = load(grid, ctx.data_dir)
    if ds is None:
        return [
            Comparison.info(
                "end-to-end Table 1 (MNIST)", "MNIST not available", note="set DPPREP_DATA_DIR"
            )
        ]
    tag = config_json(dataclasses.asdict(grid))
    digest = hashlib.sha1(tag.encode()).hexdigest()[:10]
    items = [
        (
            f"{method}/eps={eps:g}/draw={i}/{digest}",
            lambda m=method, e=eps, i=i: run_private(m, e, grid, ds, i),
        )
        for eps in grid.epsilons
        for method in ("dpsgdf", "dpsgd")
        for i in range(grid.draws)
    ]
    items.append((f"nonprivate/{digest}", lambda: run_nonprivate(grid, ds)))
    records = ctx.store.run_many(items)
    frame = pd.DataFrame(records)
    frame["config"] = tag
    frame["versions"] = [provenance_json(ctx.store.provenance(key)) for key, _ in items]
    write_csv(frame, ctx.out_dir / "runs.csv")
    table = report.paper_style(ctx.out_dir)
    plot(frame, table, ctx.out_dir / "accuracy_vs_epsilon.png")
    return report.comparisons(records, grid, table)
