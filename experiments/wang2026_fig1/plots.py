"""Figure 1's figure (and Figure 2's, which reuses it): per panel the mean ± 1 s.d. utility gap of
Standard, Semi and CorrDP against nominal ε at the panel's primary C, with Partial as a line."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from experiments import plotting

from .config import Panel
from .tables import curve, metric_of


def plot(
    summary: pd.DataFrame, panels: Sequence[Panel], path, *, title: str, primary: dict[str, float]
) -> None:
    """One panel per entry of ``panels`` (3 columns from 5 panels up, else 2): the private methods'
    mean ± 1 s.d. gap against nominal ε at the panel's ``primary`` C, Partial as a dashed line."""
    cols = 3 if len(panels) > 4 else min(2, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plotting.panels(rows, cols, width=5, height=3.8)
    colors = {
        "standard": "C3",
        "semi": "C2",
        "corrdp": "C0",
        "partial": "C7",
        "corrdp_population": "C9",
    }
    for ax, panel in zip(axes.flat, panels):
        metric = metric_of(panel)
        c = primary[panel.key]
        # Regression gaps span decades, so their axis is log. A network's gap (against its same-seed
        # non-private run) can average ≤ 0 at large ε; a symlog axis would need a linear threshold,
        # and none reads at both profiles: at the smallest |mean| it stretches the ±1e-3 scatter
        # about zero over as many decades as the signal (quick (f′): ticks from −1 to 10), near the
        # signal it flattens the curves, and the paper profile's (f′) spans 1e-2 to 1e6. So the axis
        # is log of the positive means; a mean ≤ 0 breaks its line and is drawn as an open triangle
        # on the axis floor (a third of the smallest positive mean; named in the legend), and a band
        # whose lower edge is ≤ 0 runs to the floor (the seeds' spread reaches zero there). Panels
        # whose means are all positive are drawn as before, with no floor.
        regression = panel.task == "regression"
        curves = {
            method: curve(summary, panel.key, method, metric, c)
            for method in ("standard", "semi", "corrdp")
        }
        means = np.concatenate([d["mean"].to_numpy(float) for d in curves.values()])
        floor = (
            float(means[means > 0].min()) / 3
            if regression and (means <= 0).any() and (means > 0).any()
            else None
        )
        for i, (method, d) in enumerate(curves.items()):
            label = method.capitalize() if method != "corrdp" else "CorrDP"
            shown = d["mean"].where(d["mean"] > 0) if regression else d["mean"]
            plotting.band(
                ax,
                d.index,
                shown,
                d["mean"] - d["sd"].fillna(0),
                d["mean"] + d["sd"].fillna(0),
                marker="o",
                linestyle="-",
                ms=3,
                color=colors[method],
                label=label,
            )
            low = d.index[(d["mean"] <= 0).to_numpy()].to_numpy(float)
            # side by side where several methods are ≤ 0 at one ε
            if floor is not None and len(low):
                ax.plot(
                    low * 1.04 ** (i - 1),
                    np.full(len(low), floor),
                    "v",
                    ms=6,
                    mfc="none",
                    color=colors[method],
                    clip_on=False,
                    zorder=3,
                )
        p = summary[
            (summary["panel"] == panel.key)
            & (summary["method"] == "partial")
            & (summary["metric"] == metric)
        ]
        if len(p):
            ax.axhline(float(p["mean"].iloc[0]), color=colors["partial"], ls="--", label="Partial")
        ax.set_xscale("log")
        if regression:
            ax.set_yscale("log")
            if floor is not None:
                ax.set_ylim(bottom=floor)
                ax.plot([], [], "v", mfc="none", color="0.3", label="mean gap ≤ 0 (at the floor)")
        ax.set_xlabel("nominal ε")
        ax.set_ylabel("utility gap" if panel.task == "regression" else "accuracy gap (pp)")
        ax.set_title(f"{panel.title}, C = {c:.3g}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    plotting.save(fig, path)
