"""Sun, Suresh & Menon (2024) Table 2's comparison rows: per dataset the three measured
distances next to the paper's (``targets.csv``), or an info row where the data is missing."""

from __future__ import annotations

import pandas as pd

from experiments.results import Comparison

# the measured column of each of Table 2's quantities, and its name in the comparison rows
QUANTITIES = {"diam": "diam(D)", "max_dist": "max ||x - mu||", "mean_dist": "mean ||x - mu||"}


def not_supplied(name: str, target: pd.Series) -> Comparison:
    """The row of a dataset whose files are absent (the user-supplied CIFAR-100 features)."""
    return Comparison.info(
        f"{target.check} Table 2 {name}",
        "features not supplied",
        paper=target.printed,
        note=(
            "user-provided .npz (Sun et al. §7: pretrained WRN features;"
            " docs/papers/decisions.md); not checkable offline"
        ),
    )


def measured(name: str, rec: dict, target: pd.Series, diam_rows: int | None) -> list[Comparison]:
    """The three distances of one dataset against the paper's, within the target's tolerance."""
    note = "" if diam_rows is None else f"smoke: diameter over the first {diam_rows} rows only"
    return [
        Comparison.numeric(
            f"{target.check} Table 2 {name} {label}",
            target[column],
            rec[column],
            abs_tol=target.tolerance,
            digits=5,
            note=note if column == "diam" else "",
        )
        for column, label in QUANTITIES.items()
    ]
