"""Hu et al. (2024) Figure 3 drawn from the tuned table: one panel per (trainer, n, d, k), each
method's mean excess risk ± 1 s.d. over seeds at its tuned step size, on log axes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.plotting import errorbar, pyplot, save

from .config import label


def plot(tuned: pd.DataFrame, path) -> None:
    """One panel per (trainer, n, d, k): each method's mean excess risk ± 1 s.d. over seeds at its
    tuned step size, on log axes. A lower bar is drawn to mean − s.d. wherever that is positive (the
    panel's range includes it); where mean − s.d. ≤ 0, which a log axis cannot show, the bar runs to
    the panel's bottom edge and ends in an arrow there (the title says so)."""
    plt = pyplot()
    if "k" not in tuned:  # results written before the rank cases: every run was k = 1
        tuned = tuned.assign(k=1)
    cases = tuned[["n", "d", "k"]].drop_duplicates().to_numpy()
    ranks = sorted(set(int(k) for k in tuned.k))
    trainers = list(dict.fromkeys(tuned.trainer))
    # At most three (four where that fills the rows) panels a row, so that at the figure's size the
    # text stays readable; the paper profile's six (n, d) cases wrap onto two rows per trainer.
    columns = len(cases) if len(cases) <= 3 else next((c for c in (3, 4) if len(cases) % c == 0), 3)
    rows_each = -(-len(cases) // columns)
    panel_rows = len(trainers) * rows_each
    with plt.rc_context(
        {
            "font.size": 12,
            "axes.titlesize": 13,
            "axes.labelsize": 12,
            "xtick.labelsize": 11,
            "ytick.labelsize": 11,
        }
    ):
        # Constrained layout places the two-line title and the legend below the panels without
        # overlap.
        fig, grid = plt.subplots(
            panel_rows,
            columns,
            figsize=(5.6 * columns, 4.4 * panel_rows + 1.2),
            squeeze=False,
            layout="constrained",
        )
        cut = False
        for row, trainer in enumerate(trainers):
            axes = grid[row * rows_each : (row + 1) * rows_each].ravel()
            for ax in axes[len(cases) :]:
                ax.set_visible(False)
            cut |= _plot_row(
                axes[: len(cases)],
                cases,
                tuned[tuned.trainer == trainer],
                "DP-GD" if trainer == "dp_gd" else "DP-SGD (Poisson)",
                show_k=ranks != [1],
            )
        # One legend for every panel, below them, so that it covers no curve.
        handles, labels = grid[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=12, frameon=False)
        rank_text = ", ".join(f"{k}" for k in ranks)
        bars = (
            "mean ± 1 s.d. over seeds; ↓ at a panel's bottom edge: mean − s.d. ≤ 0 (a log axis"
            " cannot show it), the bar runs to the edge"
            if cut
            else "mean ± 1 s.d. over seeds (every lower end mean − s.d. drawn)"
        )
        fig.suptitle(
            f"Private logistic regression on approximately low-rank data (k = {rank_text}), step"
            f" size tuned per point\nbars: {bars}",
            fontsize=14,
        )
    save(fig, path)


CUT_MARKER = r"$\downarrow$"  # a lower bar that runs past the bottom edge (no series uses it)


def _plot_row(axes, cases, tuned: pd.DataFrame, trainer: str, *, show_k: bool) -> bool:
    """Draws one trainer's panels; returns whether some lower bar (mean − s.d. ≤ 0) runs to an
    edge."""
    # Every series its own colour and marker (the rank/dim variants of one method included: a reader
    # must tell them apart in grey print too); dashed = rank variant, solid = dim, dotted = PTR.
    styles = {
        ("none", "-"): ("C3", "o", "-"),
        ("pca", "rank"): ("C0", "s", "--"),
        ("pca", "dim"): ("C1", "D", "-"),
        ("dp_pca", "rank"): ("C2", "^", "--"),
        ("dp_pca", "dim"): ("C5", "v", "-"),
        ("ptr", "rank"): ("C4", "P", ":"),
    }
    any_cut = False
    for ax, (n, d, k) in zip(axes, cases):
        sub = tuned[(tuned.n == n) & (tuned.d == d) & (tuned.k == k)]
        series = []
        for (m, v), style in styles.items():
            t = sub[(sub.method == m) & (sub.variant == v)].sort_values("epsilon")
            if not t.empty:
                series.append(
                    (
                        m,
                        v,
                        style,
                        t.epsilon.to_numpy(),
                        t["mean"].to_numpy(),
                        t["sd"].fillna(0.0).to_numpy(),
                    )
                )
        # The panel's range: every mean and every positive lower end, and a little room below.
        ends = np.concatenate(
            [np.concatenate([mean, (mean - sd)[mean - sd > 0]]) for *_, mean, sd in series]
        )
        ends = ends[ends > 0]
        bottom = ends.min() / 2.0 if ends.size else None
        for m, v, (color, marker, ls), eps, mean, sd in series:
            cut = mean - sd <= 0
            lower = np.where(cut, mean - (bottom if bottom is not None else 0.0), sd)
            # fmt="": the style below draws the line and marker (no format string beside it)
            errorbar(
                ax,
                eps,
                mean,
                [lower, sd],
                fmt="",
                color=color,
                marker=marker,
                ls=ls,
                ms=5,
                label=label(m, v),
            )
            # said, not hidden: the bar continues below the edge
            if cut.any() and bottom is not None:
                ax.plot(
                    eps[cut],
                    np.full(cut.sum(), bottom),
                    ls="none",
                    marker=CUT_MARKER,
                    color=color,
                    ms=14,
                    clip_on=False,
                )
                any_cut = True
        ax.set_xscale("log")
        ax.set_yscale("log")
        if bottom is not None:
            ax.set_ylim(bottom=bottom)
        eps = sorted(sub.epsilon.unique())
        ax.set_xticks(eps, [f"{e:g}" for e in eps])
        ax.minorticks_off()
        ax.set_xlabel("overall ε (δ = 1e-5)")
        ax.set_ylabel("excess empirical risk")
        ax.set_title(f"{trainer}: n = {n}, d = {d}" + (f", k = {k}" if show_k else ""))
        ax.grid(alpha=0.3, which="both")
    return any_cut
