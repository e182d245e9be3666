"""Hu et al. (2024) Figure 3 (c) with the step size selected privately, drawn from the summary: per
(n, d), the excess risk over ε, tuned non-privately beside selected privately (paid)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.plotting import errorbar, panels, save


def plot(summary: pd.DataFrame, path) -> None:
    """One panel per (n, d): mean ± 1 s.d. over seeds of the excess risk per ε, for each protocol;
    a lower bar stops at a tenth of its mean (a log axis)."""
    cases = summary[["n", "d"]].drop_duplicates().to_numpy()
    fig, axes = panels(1, len(cases), width=5.2, height=4.4)
    for ax, (n, d) in zip(axes[0], cases):
        t = summary[(summary.n == n) & (summary.d == d)].sort_values("epsilon")
        for col, label, style in (
            ("nonprivate_tuning", "tuned non-privately (training-only ε)", ("C3", "o", "--")),
            ("paid", "selected privately (end-to-end ε)", ("C0", "s", "-")),
        ):
            mean, sd = t[f"{col}_mean"].to_numpy(), t[f"{col}_sd"].fillna(0.0).to_numpy()
            lower = np.minimum(sd, 0.9 * np.abs(mean))
            # fmt="": the style below draws the line and marker (no format string beside it)
            errorbar(
                ax,
                t.epsilon,
                mean,
                [lower, sd],
                fmt="",
                color=style[0],
                marker=style[1],
                ls=style[2],
                label=label,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(list(t.epsilon), [f"{e:g}" for e in t.epsilon])
        ax.minorticks_off()
        ax.set(
            xlabel="ε (δ = 1e-5)",
            ylabel="excess empirical risk on S (mean ± 1 s.d.)",
            title=f"(c) no pre-processing, DP-GD: n = {n}, d = {d}",
        )
        ax.grid(alpha=0.3, which="both")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.suptitle("Hu et al. 2024 Fig 3, step size tuned: non-privately vs privately (paid)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save(fig, path)
