"""Table 1 as a figure: ours (mean ± s.d.) beside the paper's, per dataset and ε.

Drawn from ``selection.csv`` after the units ran; never feeds a unit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from experiments.plotting import errorbar

from .config import DATASETS, LABEL, NAMES
from .report import PAPER


def accuracy_figure(selection: pd.DataFrame):
    """Table 1 as a figure (``selection.csv``, main variant): per dataset and ε, DPSGD and DPSGD-F,
    ours (mean ± s.d. over seeds, filled) beside the paper's (open), and non-private SGD as lines.
    Points, not bars: a bar's length would have to start at 0 %, where every difference here
    vanishes; a point's position needs no zero, so the axis spans the values and says so."""
    import matplotlib.figure

    main = selection[selection["variant"] == "main"]
    private = main[main["method"] != "nonprivate"]
    order = {name: i for i, name in enumerate(DATASETS)}
    cells = sorted(
        {(row.dataset, row.epsilon) for row in private.itertuples()},
        key=lambda c: (order.get(c[0], 99), c),
    )
    fig = matplotlib.figure.Figure(figsize=(max(5.0, 2.4 * len(cells)) + 2.6, 3.8))
    ax = fig.subplots()
    style = {"dpsgd": ("C3", "o", -0.2), "dpsgdf": ("C0", "s", 0.2)}
    values: list[float] = []
    for method, (colour, marker, offset) in style.items():
        ours = private[private["method"] == method].set_index(["dataset", "epsilon"]).reindex(cells)
        xs = np.arange(len(cells)) + offset
        # fmt="": markers only, as ls="none" says (the helper's default draws a line)
        errorbar(
            ax,
            xs - 0.06,
            ours["mean"],
            ours["std"],
            fmt="",
            color=colour,
            marker=marker,
            ls="none",
            label=f"{NAMES[method]} (ours, mean ± s.d.)",
        )
        paper = [PAPER.get(ds, {}).get((method, eps), (np.nan, np.nan)) for ds, eps in cells]
        errorbar(
            ax,
            xs + 0.06,
            [m for m, _ in paper],
            [s for _, s in paper],
            fmt="",
            color=colour,
            marker=marker,
            mfc="white",
            ls="none",
            label=f"{NAMES[method]} (paper)",
        )
        values += list(ours["mean"] - ours["std"].fillna(0)) + [m - s for m, s in paper]
    for dataset in dict.fromkeys(ds for ds, _ in cells):
        xs = [i for i, cell in enumerate(cells) if cell[0] == dataset]
        span = (min(xs) - 0.4, max(xs) + 0.4)
        ours = main[(main["dataset"] == dataset) & (main["method"] == "nonprivate")]["mean"]
        if not ours.empty:
            ax.hlines(float(ours.iloc[0]), *span, colors="k", linestyles="--")
            values.append(float(ours.iloc[0]))
        paper = PAPER.get(dataset, {}).get(("nonprivate", None))
        if paper is not None:
            ax.hlines(paper[0], *span, colors="grey", linestyles=":")
            values.append(paper[0])
    ax.plot([], [], "k--", label="non-private SGD (ours)")
    ax.plot([], [], ls=":", color="grey", label="non-private SGD (paper)")
    finite = [v for v in values if np.isfinite(v)]
    low = math.floor(min(finite) - 1) if finite else 0
    ax.set(
        xticks=range(len(cells)),
        xticklabels=[f"{LABEL.get(ds, ds)}\nε = {eps:g}" for ds, eps in cells],
        ylabel=f"test accuracy (%; axis from {low} %)",
        xlim=(-0.6, len(cells) - 0.4),
    )
    ax.set_ylim(bottom=low)
    ax.grid(axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    # the private methods first
    last = [i for i, text in enumerate(labels) if text.startswith("non-private")]
    keep = [i for i in range(len(labels)) if i not in last] + last
    ax.legend(
        [handles[i] for i in keep],
        [labels[i] for i in keep],
        fontsize=9,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        frameon=False,
    )
    fig.tight_layout()
    return fig
