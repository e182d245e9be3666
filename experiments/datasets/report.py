"""The datasets experiment's outputs beside the specs: ``datasets.md`` (the summary table) and the
comparison rows of every stated size or statistic (``targets.csv``: the CorrDP spec for the data of
Wang, Zhang & Cummings 2026, the Sun et al. 2024 spec for MNIST and Fashion-MNIST)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.results import Comparison
from experiments.targets import paper_targets


def markdown(frame: pd.DataFrame) -> str:
    def fmt(value) -> str:
        if isinstance(value, float):
            if np.isnan(value):
                return ""
            return f"{value:.0f}" if value.is_integer() and abs(value) < 1e7 else f"{value:.4g}"
        return "" if value is None or value is pd.NA else str(value)

    columns = [c for c in frame.columns if c not in ("config", "versions")]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(row[c]) for c in columns) + " |" for _, row in frame.iterrows()]
    versions = frame["versions"].iloc[0] if len(frame) else ""
    return (
        "# Datasets\n\n"
        + "\n".join(lines)
        + f"\n\nNorms are L2 norms of all rows (train and test).\nVersions: `{versions}`\n"
    )


def comparisons(stats: dict[str, dict]) -> list[Comparison]:
    """Every ``targets.csv`` row against the summary row of its dataset (``stats``: dataset name →
    row), then the user-provided CIFAR-100 features, reported as found or absent."""
    out = []
    for target in paper_targets(__package__).itertuples():
        tolerance = {f"{target.tolerance_kind}_tol": float(target.tolerance)}
        out.append(
            Comparison.numeric(
                f"{target.dataset} {target.label} ({target.source})",
                float(target.paper),
                stats[target.dataset][target.statistic],
                digits=int(target.digits),
                **tolerance,
            )
        )
    cifar = stats["cifar100_features"]
    if cifar["status"] == "absent":
        out.append(
            Comparison.info("cifar100_features", "absent (user-provided file)", note=cifar["note"])
        )
    else:
        out.append(
            Comparison.info(
                "cifar100_features rows/columns",
                f"{cifar['n_train']}/{cifar['n_test']} x {cifar['n_columns']}",
            )
        )
    return out
