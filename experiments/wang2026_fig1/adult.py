"""Figure 1(b)'s comparison rows (Adult, LR): spec §6 items 18–21, item 18 at every C run on
Adult since the paper's noise constant C is never given, items 19–21 at the preset C."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from experiments.results import Comparison

from .config import ADULT_C, ADULT_C_LOW, NOMINAL, PANELS, PRIVATE
from .tables import _c_text, _fmt, curve, primary_of, targets


def adult_items(summary: pd.DataFrame, epsilons: Sequence[float]) -> list[Comparison]:
    """Spec §6 items 18–21 on Adult (Fig. 1b). Item 18, "less than a 4% accuracy drop compared with
    the non-private baseline, even in a relatively high privacy regime (0.2 < ε < 0.5)" (paper,
    Section 5.2), is read at every C run on Adult: the paper's noise ``σ_i² = C·(log(1/δ)+1)/ε²``
    has "some constant C > 0" (Section 5) that it never gives, the gaps grow with C, and the verdict
    turns on it. Items 19–21 are read at the primary C (:func:`primary_of`: the preset 3e-3). The
    paper's numbers (the 4 pp bound and the ε it is read at, Partial's ≈ 6 pp) are in
    ``targets.csv``."""
    out: list[Comparison] = []
    m = "accuracy_gap_pp"
    adult = summary[summary["panel"] == "b"]
    cs = [float(c) for c in sorted(adult["C"].unique())]
    c_b = primary_of(summary, PANELS["b"])
    t18, t20, t21 = targets("18"), targets("20"), targets("21")
    limit = float(t18["paper"].iloc[0])
    sel = [float(e) for e in t18["epsilon"] if e in epsilons]
    if sel:
        drops = {
            c: (
                curve(summary, "b", "corrdp", m, c)["mean"].loc[sel],
                curve(summary, "b", "standard", m, c)["mean"].loc[sel],
            )
            for c in cs
        }
        every = "; ".join(f"{_fmt(cor)} pp at C = {_c_text(c)}" for c, (cor, _) in drops.items())
        for c, (cor, std) in drops.items():
            why = (
                "the preset (docs/papers/decisions.md): between the 1e-3 and 1e-2 a pilot ran (not"
                " tuned here)"
                if np.isclose(c, ADULT_C)
                else (
                    "the lower of the two C a pilot ran (1e-3, 1e-2), run beside the preset"
                    f" {_c_text(ADULT_C)} (not tuned here)"
                    if np.isclose(c, ADULT_C_LOW)
                    else f"run beside the preset {_c_text(ADULT_C)} (not tuned here)"
                )
            )
            out.append(
                Comparison.claim(
                    f"#18 Adult: CorrDP accuracy drop < {limit:g} pp for 0.2 < ε < 0.5 (C ="
                    f" {_c_text(c)})",
                    f"< {limit:g} pp",
                    f"{_fmt(cor)} pp at ε = {_fmt(sel)} (Standard {_fmt(std)} pp)",
                    bool((cor < limit).all()),
                    note=(
                        "the verdict depends on the free constant C (the paper's σ² ="
                        " C·(log(1/δ)+1)/ε², 'for some constant C > 0', never given; σ² ∝ C):"
                        f" CorrDP drop at ε = {_fmt(sel)} is {every}; C = {_c_text(c)} is {why};"
                        f" {NOMINAL}"
                    ),
                )
            )
    cor, semi, std = (curve(summary, "b", k, m, c_b) for k in ("corrdp", "semi", "standard"))
    sd = np.maximum(cor["sd"], semi["sd"])
    within = (cor["mean"] - semi["mean"]).abs() <= 2 * sd
    better = cor["mean"] < semi["mean"]
    at = f"C = {_c_text(c_b)}"
    out.append(
        Comparison.claim(
            "#19 Adult: 'CorrDP even outperforms Semi' (accepted if |CorrDP − Semi| ≤ 2 s.d. at"
            " every ε)",
            "CorrDP ≤ Semi",
            f"CorrDP − Semi {_fmt(cor['mean'] - semi['mean'])} pp; within 2 s.d. at"
            f" {int(within.sum())}/{len(within)} ε; CorrDP below Semi at"
            f" {int(better.sum())}/{len(better)} ε",
            bool(within.all()),
            note=(
                "not expected to reproduce systematically: Semi injects strictly less noise (0 on"
                f" U); {at}"
            ),
        )
    )
    ok20 = cor["mean"] <= std["mean"] + std["sd"]
    out.append(
        Comparison.claim(
            "#20 Adult: CorrDP ≤ Standard + 1 s.d. (every ε)",
            "implied",
            f"holds at {int(ok20.sum())}/{len(ok20)} ε; CorrDP − Standard"
            f" {_fmt(cor['mean'] - std['mean'])} pp",
            bool(ok20.all()),
            note=(
                f"noise trace ratio ≈ {float(t20['paper'].iloc[0]):g}: the curves nearly coincide;"
                f" {at}"
            ),
        )
    )
    partial = adult[
        (adult["method"] == "partial") & (adult["metric"] == m) & np.isclose(adult["C"], c_b)
    ]
    pb = float(partial["mean"].iloc[0])
    low = float(t21["epsilon"].iloc[0])
    hi = [e for e in epsilons if e >= low]
    top = max(float(curve(summary, "b", k, m, c_b)["mean"].loc[hi].max()) for k in PRIVATE)
    out.append(
        Comparison.claim(
            f"#21 Adult: Partial worst for ε ≥ {low:g} ({at})",
            f"Partial gap ≈ {float(t21['paper'].iloc[0]):g} pp above every private curve",
            f"Partial {pb:.2f} pp; largest private mean gap at ε ≥ {low:g}: {top:.2f} pp",
            top < pb,
        )
    )
    return out
