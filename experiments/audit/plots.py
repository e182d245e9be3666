"""The audit's figure: empirical ε lower bounds against the theoretical ε, one panel per learner.

Drawn from the finished units' frame (:mod:`experiments.plotting`), never inside a unit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.plotting import panels, save

from .config import TITLES


def plot(frame: pd.DataFrame, path: Path | str) -> None:
    """``audit.png``: per learner, the honest audits' GDP and Clopper–Pearson lower bounds against
    the theoretical ε, one colour per threat model (seed 0; the other seeds only count false
    alarms)."""
    if "path" not in frame:  # an audit.csv written before the drivers' paths: its learners
        frame = frame.assign(path=frame["learner"])
    honest = frame[(frame["role"] == "honest") & (frame["seed"] == 0)]
    learners = list(dict.fromkeys(honest["path"]))
    cols = 4
    rows = math.ceil((len(learners) + 1) / cols)  # + a panel for the one legend
    fig, axes = panels(rows, cols, width=4.2, height=3.6)
    # One colour per threat model and one line style per bound, the same in every panel.
    threats = {"white_box": ("white-box", "C0", "o"), "final_model": ("final model", "C2", "s")}
    bounds = {"epsilon_lb_gdp": ("GDP bound", "-"), "epsilon_lb_cp": ("Clopper–Pearson", ":")}
    for ax, learner in zip(axes.flat, learners):
        part = honest[honest["path"] == learner]
        top = float(max(part["theoretical_epsilon"].max(), part["epsilon_lb_gdp"].max())) * 1.1
        ax.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="lower bound = theory")
        for threat, (name, colour, marker) in threats.items():
            sub = part[part["threat_model"] == threat]
            if sub.empty:
                continue
            for column, (bound, ls) in bounds.items():
                ax.plot(
                    sub["theoretical_epsilon"],
                    sub[column],
                    marker=marker,
                    ls=ls,
                    color=colour,
                    mfc=colour if ls == "-" else "white",
                    label=f"{name}: {bound}",
                )
        claimed = part[np.abs(part["claimed_epsilon"] - part["theoretical_epsilon"]) > 1e-9]
        if not claimed.empty:
            ax.scatter(
                claimed["theoretical_epsilon"],
                claimed["claimed_epsilon"],
                marker="x",
                color="black",
                label="claimed ε (as reported)",
                zorder=3,
            )
        ax.set_title(TITLES[learner], fontsize=11)
        ax.set_xlabel("theoretical ε")
        ax.set_ylabel("empirical ε lower bound")
    # The legend gets a panel of its own (legible, and over no data): every entry any panel drew.
    entries: dict[str, Any] = {}
    for ax in list(axes.flat)[: len(learners)]:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(text, handle)
    for ax in list(axes.flat)[len(learners) :]:
        ax.axis("off")
    legend_ax = list(axes.flat)[len(learners)]
    legend_ax.legend(
        list(entries.values()), list(entries.keys()), loc="center", fontsize=10, frameon=False
    )
    fig.suptitle(
        "Privacy audit: empirical ε lower bounds (95 % confidence, δ = 1e-5) vs theoretical ε"
    )
    fig.tight_layout()
    save(fig, path, dpi=110)
