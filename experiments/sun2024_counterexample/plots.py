"""Sun, Suresh & Menon (2024) §4's figure: E2's best accuracy and best loss of each arm against
nε/μ (``e2.png``), drawn from ``e2.csv``."""

from __future__ import annotations

import math

import pandas as pd

from experiments.plotting import panels, save

from .config import Cfg


def plot(best: pd.DataFrame, path, cfg: Cfg | None = None) -> None:
    """E2: each arm's best accuracy and best loss against nε/μ, one line per (arm, n), at one ε."""
    # the paper's ε = 1 (e2.csv has every ε)
    eps = min(best["epsilon"].unique(), key=lambda e: abs(e - 1.0))
    best = best[best["epsilon"] == eps]
    colours, markers = (
        {"DPSGD": "C3", "DPSGD-F": "C0", "Alg-3-like": "C2"},
        {
            "DPSGD": "o",
            "DPSGD-F": "s",
            "Alg-3-like": "^",
        },
    )
    names = {"DPSGD": "DPSGD", "DPSGD-F": "DPSGD-F (Alg. 2)", "Alg-3-like": "Alg.-3-like"}
    ns = sorted(best["n"].unique())
    fig, axes = panels(1, 2, width=5.5, height=4.8)
    axes = axes[0]
    # Every n its own line style (the largest solid with filled markers, the others dashed, dotted,
    # dash-dotted with open markers), the arm by colour and marker.
    line_styles = dict(zip(reversed(ns), ["-", "--", ":", "-."] * len(ns)))
    for (arm, n), f in best.groupby(["arm", "n"]):
        f = f.sort_values("nε/μ")
        style = dict(
            color=colours[arm],
            marker=markers[arm],
            ls=line_styles[n],
            ms=6,
            mfc=colours[arm] if n == ns[-1] else "white",
            label=f"{names[arm]}, n = {n:,}",
            clip_on=False,
        )
        axes[0].plot(f["nε/μ"], f.best_accuracy, **style)
        axes[1].plot(f["nε/μ"], f.best_loss, **style)
    axes[0].axhline(0.5, color="grey", lw=1, ls=":")
    axes[0].annotate(
        "chance",
        (best["nε/μ"].max(), 0.5),
        xytext=(0, 3),
        textcoords="offset points",
        ha="right",
        fontsize=8,
        color="grey",
    )
    axes[0].set_ylim(0.45, 1.02)
    axes[0].set_ylabel("best mean accuracy")
    # The hinge loss is ≥ 0 and exactly 0 where an arm separates the data: a log axis cannot show 0,
    # so the axis is linear from 0 to 0.1 and logarithmic above (no negative range).
    axes[1].set_yscale("symlog", linthresh=0.1, linscale=0.6)
    top = 1.5 * max(float(best["best_loss"].max()), 0.2)
    ticks = [0.0] + [10.0**k for k in range(-1, math.floor(math.log10(top)) + 1)]
    axes[1].set_yticks(ticks, ["0"] + [f"{v:g}" for v in ticks[1:]])
    axes[1].set_ylim(0, top)
    axes[1].set_ylabel("best mean hinge loss (optimum 0)\nlinear below 0.1, log above")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("nε/μ")
        ax.grid(alpha=0.3)
    # Below the panels: a legend inside would cover a curve (e.g. DPSGD's jump at n = 10⁴).
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 0.06),
        ncol=3,
        fontsize=9,
        frameon=False,
    )
    over = "its configurations"
    if cfg is not None:
        fmt = lambda values: "{" + ", ".join(f"{v:g}" for v in values) + "}"  # noqa: E731
        over = (
            f"T ∈ {fmt(cfg.e2_T)}, q ∈ {fmt(cfg.e2_q)}, η ∈ {fmt(cfg.e2_lr)} and, for DPSGD and"
            f" Alg.-3-like, C ∈ {{0.1, 1, 10, √(μ²+1)}}; mean over {cfg.e2_seeds} seeds"
        )
    fig.suptitle(
        f"Counter-example (Sun et al. 2024, §4), ε = {eps:g}: DPSGD vs DPSGD-F (Alg. 2) vs"
        " Alg.-3-like"
    )
    fig.text(
        0.5,
        0.01,
        "Each point: the arm's best configuration (for accuracy and for loss separately) over\n"
        f"{over}; average iterate.",
        ha="center",
        va="bottom",
        fontsize=8.5,
    )
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    save(fig, path)
