"""The figure ``selection_vs_epsilon.png``: per panel of Wang, Zhang & Cummings (2026) Figure 1
(b), (d), the accuracy gap against the ε charged, the privately selected and paid C beside the C
tuned on the data at its training-only ε, the nominal ε written at each point."""

from __future__ import annotations

import pandas as pd

from experiments.plotting import errorbar, panels, save
from experiments.wang2026_fig1 import PANELS

from .config import METHODS


def plot(summary: pd.DataFrame, path) -> None:
    """One panel per panel of ``summary`` (:func:`report.summarise`), saved to ``path``."""
    from matplotlib.ticker import NullFormatter

    panel_keys = list(dict.fromkeys(summary.panel))
    fig, axes = panels(1, len(panel_keys), width=6.2, height=4.8)
    colours = {"standard": "C3", "corrdp": "C0"}
    for ax, panel in zip(axes[0], panel_keys):
        sub = summary[summary.panel == panel]
        for method in METHODS:
            t = sub[sub.method == method].sort_values("nominal_epsilon")
            if t.empty:
                continue
            name = "CorrDP" if method == "corrdp" else "Standard"
            for prefix, label, style in (
                ("paid", "C selected privately, paid (selection + training ε)", ("s", "-")),
                ("tuned", "C tuned non-privately, training-only ε", ("o", "--")),
            ):
                x, mean, err = (
                    t[f"{prefix}_epsilon"],
                    t[f"{prefix}_gap_mean"],
                    t[f"{prefix}_gap_sd"].fillna(0.0),
                )
                errorbar(
                    ax,
                    x,
                    mean,
                    err,
                    fmt="",  # the marker and line style below, not the helper's "o-"
                    color=colours[method],
                    marker=style[0],
                    ls=style[1],
                    alpha=1.0 if prefix == "paid" else 0.7,
                    label=f"{name}: {label}",
                )
                if prefix == "paid":  # where the paper plots the same run: at its nominal ε
                    ax.plot(
                        t.nominal_epsilon,
                        mean,
                        ls="none",
                        marker="x",
                        color=colours[method],
                        alpha=0.5,
                        label=f"{name}: the paid run at its nominal ε (no guarantee)",
                    )
                    for xn, xe, yi in zip(t.nominal_epsilon, x, mean):
                        ax.plot(
                            [xn, xe], [yi, yi], color=colours[method], lw=0.6, ls=":", alpha=0.5
                        )
                for xi, yi, nominal in zip(x, mean, t.nominal_epsilon):
                    ax.annotate(
                        f"{nominal:g}",
                        (xi, yi),
                        textcoords="offset points",
                        xytext=(4, 4),
                        fontsize=6,
                        color=colours[method],
                    )
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(
            xlabel="ε (δ = 1e-5): standard DP charged; ×: nominal; small numbers: nominal ε",
            ylabel="accuracy gap to non-private GD (pp, mean ± 1 s.d.)",
            title=f"{PANELS[panel].title}"
            + (" — clipped at L = √m (no guarantee unclipped)" if panel == "d" else ""),
        )
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6)
    fig.suptitle(
        "Wang et al. 2026 Fig. 1 (b), (d): C selected privately and paid vs tuned on the data"
    )
    fig.tight_layout()
    save(fig, path)
