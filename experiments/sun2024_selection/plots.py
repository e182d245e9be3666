"""Sun, Suresh & Menon (2024) Table 1 with the tuning paid, the figure: MNIST test accuracy
against the ε charged, tuned privately and paid vs best on test at the training-only ε
(``accuracy_vs_epsilon.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.plotting import errorbar, mean_sd, panels, save


def figure(frame: pd.DataFrame, table: pd.DataFrame | None) -> Any:
    """Test accuracy against the ε charged: each private method tuned privately and paid (mean ±
    s.d. over draws), beside ``table``'s best-on-test cells at their training-only ε when given,
    and the non-private reference."""
    fig, axes = panels(1, 1, width=6.4, height=5.6)
    ax = axes[0, 0]
    colours = {"dpsgdf": "C0", "dpsgd": "C1"}
    for method, label in (("dpsgdf", "DPSGD-F"), ("dpsgd", "DPSGD")):
        f = mean_sd(frame[frame.method == method], "epsilon_end_to_end", "test_accuracy")
        errorbar(
            ax,
            f.epsilon_end_to_end,
            f["mean"],
            f["sd"],
            color=colours[method],
            label=f"{label}: tuned privately, paid (end-to-end ε; mean ± s.d. over draws)",
        )
        if table is not None:
            t = table[table.method == method].sort_values("epsilon")
            ax.plot(
                t.epsilon,
                t["mean"],
                "s--",
                color=colours[method],
                alpha=0.6,
                label=f"{label}: best on test, training-only ε (sun2024_table1)",
            )
    nonprivate = frame[frame.method == "nonprivate"]
    if not nonprivate.empty:
        ax.axhline(
            float(nonprivate.test_accuracy.iloc[0]),
            color="grey",
            ls=":",
            label="non-private SGD (validation-tuned)",
        )
    shown = list(frame.epsilon_end_to_end) + (list(table.epsilon) if table is not None else [])
    right = max([float(v) for v in shown if np.isfinite(v)] + [1.0])
    ax.set_xlim(0, right + 0.5)
    ax.ticklabel_format(axis="x", useOffset=False)
    xlabel = (
        "ε charged (δ = 1e-5): end-to-end (tuned, paid) or training only (best on test)"
        if table is not None
        else "ε charged end to end (δ = 1e-5; tuned privately, tuning paid)"
    )
    ax.set(
        xlabel=xlabel,
        ylabel="MNIST test accuracy (%)",
        title="Sun et al. 2024: accuracy vs the ε charged",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    fig.tight_layout()
    return fig


def plot(frame: pd.DataFrame, table: pd.DataFrame | None, path: Path | str) -> None:
    """:func:`figure`, saved to ``path``."""
    save(figure(frame, table), path, dpi=120)
