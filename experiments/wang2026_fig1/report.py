"""Figure 1's comparison rows (paper vs ours): the DP disclosure, the pilot's magnitude table and
checks 14–22 of docs/papers/decisions.md (reference numbers from ``targets.csv``), the collapse
and mechanism rows of the network panels, the profile's context and the Standard run's accounted
(ε, δ)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from dpprep.corrdp import noise
from experiments.results import Comparison

from .adult import adult_items
from .config import ALL_PANELS, NOMINAL, PANELS, PRIVATE, Profile
from .dp import diagnostic_rows, disclosure_row
from .networks import collapse_row, mechanism_rows
from .tables import _fmt, curve, metric_of, primary_c, targets


def report(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    profile: Profile,
    records: list[dict],
    mechanism: list[dict],
    diagnostic: pd.DataFrame,
    primary: dict[str, float],
) -> list[Comparison]:
    """Every comparison row of the run, in REPORT order: the DP disclosure first (most panels carry
    no DP guarantee at all, whatever their ε axis says), then :func:`comparisons`, the Sepsis
    collapse rows, the mechanism rows and the Standard run's accounted (ε, δ)."""
    out = [disclosure_row(records, primary)]
    out += comparisons(summary, profile, records)
    for key in ("c", "c_sgd"):
        panel = ALL_PANELS[key]
        c = primary[key]
        rec = next(r for r in records if r["panel"] == key and np.isclose(r["C"], c))
        out.append(collapse_row(frame, panel, c, rec["majority_pp"], rec["n"]))
    out += mechanism_rows(mechanism)
    out += diagnostic_rows(diagnostic)
    return out


def comparisons(summary: pd.DataFrame, profile: Profile, records: list[dict]) -> list[Comparison]:
    """The pilot's magnitude table, checks 14–22 and the profile's context rows."""
    out = synthetic_rows(summary, profile)
    out += adult_items(summary, profile.epsilons)
    out += item22_rows(summary, profile)
    return out + context_rows(profile, records)


def synthetic_rows(summary: pd.DataFrame, profile: Profile) -> list[Comparison]:
    """Panel (a): the pilot's magnitude table (reference values and tolerances from ``targets.csv``)
    and checks 14–17."""
    out: list[Comparison] = []
    eps = np.array(profile.epsilons)
    # The pilot's magnitude table at ε = 1 (gap vs non-private GD; CorrDP with the population TV).
    magnitude = targets("magnitude").set_index("method")
    at = float(magnitude.loc["standard", "epsilon"])
    if at in profile.epsilons:
        a = PANELS["a"]
        # (α/4)·m_s·K_δ at ε = 1, C = 1
        semi_analytic = a.learning_rate / 4 * 10 * noise.k_delta(a.delta)
        notes = {
            "standard": NOMINAL,
            "corrdp_population": "population TV 0.364 (as the pilot's table)",
        }
        for method in ("standard", "corrdp_population"):
            v = curve(summary, "a", method, "gap_vs_nonprivate")["mean"].loc[at]
            out.append(
                Comparison.numeric(
                    f"pilot magnitude, synthetic ε={at:g}: {method}",
                    float(magnitude.loc[method, "paper"]),
                    float(v),
                    rel_tol=float(magnitude.loc[method, "tolerance"]),
                    digits=3,
                    note="gap vs non-private GD, C = 1, mean over seeds; " + notes[method],
                )
            )
        # The pilot's semi-sensitive target is not the quantity of its own table: the closed form
        # of the stationary noise gap is (α/4)·m_s·K_δ, and the pilot's number sits near the gap to
        # the exact minimiser instead. Measured and stated, not scored against the pilot's error.
        semi_np = curve(summary, "a", "semi", "gap_vs_nonprivate")["mean"].loc[at]
        semi_star = curve(summary, "a", "semi", "gap")["mean"].loc[at]
        pilot = f"{float(magnitude.loc['semi', 'paper']):.3f}"
        out.append(
            Comparison.info(
                f"pilot magnitude, synthetic ε={at:g}: semi",
                f"{semi_np:.3g}",
                paper=f"{pilot} (pilot)",
                note=(
                    "gap vs non-private GD, C = 1, mean over seeds; the closed form (α/4)·m_s·K_δ"
                    f" is {semi_analytic:.4f} (measured {semi_np:.4f}); the pilot's {pilot} is"
                    " wrong: it is near the gap to the exact minimiser"
                    f" ({semi_star:.4f} measured), not the gap vs non-private GD its table reports"
                ),
            )
        )
    partial = summary[
        (summary["panel"] == "a")
        & (summary["method"] == "partial")
        & (summary["metric"] == "gap_vs_nonprivate")
    ]
    out.append(
        Comparison.numeric(
            "pilot magnitude, synthetic: Partial gap",
            float(magnitude.loc["partial", "paper"]),
            float(partial["mean"].iloc[0]),
            rel_tol=float(magnitude.loc["partial", "tolerance"]),
            digits=3,
            note="ε-independent (non-private on U only)",
        )
    )
    out.append(item14(summary, profile.epsilons))
    # Items 15–17 (synthetic).
    cor, semi = curve(summary, "a", "corrdp", "gap"), curve(summary, "a", "semi", "gap")
    std = curve(summary, "a", "standard", "gap")
    low = eps[eps <= 2.0]
    high = eps[eps > 2.0]
    strict = cor["mean"].loc[low] < std["mean"].loc[low]
    overlap = (cor["mean"] - cor["sd"]).loc[high] <= (std["mean"] + std["sd"]).loc[high]
    out.append(
        Comparison.claim(
            "#15 synthetic: CorrDP < Standard (mean, every ε ≤ 2; bands may touch above)",
            "always outperforms",
            f"CorrDP/Standard gap ratio {_fmt(cor['mean'] / std['mean'])}",
            bool(strict.all() and overlap.all()),
            note=NOMINAL,
        )
    )
    ok16 = semi["mean"] <= cor["mean"] + cor["sd"]
    out.append(
        Comparison.claim(
            "#16 synthetic: Semi ≤ CorrDP + 1 s.d. (every ε)",
            "Semi is the upper bound on utility",
            f"holds at {int(ok16.sum())}/{len(ok16)} ε; Semi/CorrDP"
            f" {_fmt(semi['mean'] / cor['mean'])}",
            bool(ok16.all()),
        )
    )
    pgap = float(
        summary[
            (summary["panel"] == "a")
            & (summary["method"] == "partial")
            & (summary["metric"] == "gap")
        ]["mean"].iloc[0]
    )
    worst = max(float(curve(summary, "a", m, "gap")["mean"].max()) for m in PRIVATE)
    out.append(
        Comparison.claim(
            "#17 synthetic: Partial worst (every private method below it, every ε, C = 1)",
            "every method using S beats Partial",
            f"Partial {pgap:.3g}; largest private mean gap {worst:.3g}",
            worst < pgap,
        )
    )
    return out


def item22_rows(summary: pd.DataFrame, profile: Profile) -> list[Comparison]:
    """Spec §6 item 22 on panels c–f at each one's primary C (§5.1's rule) and on the
    plain-SGD variants of the networks."""
    out: list[Comparison] = []
    for key in ("c", "c_sgd", "d", "e", "f", "f_sgd"):
        if key not in profile.c_values:
            continue
        panel = ALL_PANELS[key]
        metric = metric_of(panel)
        c = primary_c(summary, key, metric)
        cor, semi, std = (curve(summary, key, k, metric, c) for k in ("corrdp", "semi", "standard"))
        ok1 = std["mean"] - cor["mean"] >= 0
        ok2 = (cor["mean"] - semi["mean"]).abs() <= (std["mean"] - semi["mean"]).abs()
        first, second = ok1.mean(), ok2.mean()
        fails = lambda ok: _fmt(ok.index[~ok.to_numpy()]) or "none"  # noqa: E731
        # Where "Standard − CorrDP ≥ 0" fails, say whether it fails by a tie: a difference within
        # the seeds' spread (the larger of the two methods' s.d. at that ε) is no ordering either
        # way.
        lost = ~ok1.to_numpy()
        gaps = (std["mean"] - cor["mean"]).abs().to_numpy()[lost]
        spread = np.maximum(std["sd"], cor["sd"]).to_numpy()[lost]
        ties = ""
        if lost.any():
            ties = (
                "; where Standard − CorrDP < 0 the curves tie (|Standard − CorrDP| ≤"
                f" {gaps.max():.3g}, within the seeds' s.d. at each of those ε)"
                if np.all(gaps <= spread)
                else (
                    f"; where Standard − CorrDP < 0: |Standard − CorrDP| up to {gaps.max():.3g},"
                    " beyond the seeds' s.d. at some of those ε"
                )
            )
        out.append(
            Comparison.claim(
                f"#22 {panel.title}: CorrDP ≈ Semi, both better than Standard (C = {c:.3g})",
                "Standard − CorrDP ≥ 0 and |CorrDP − Semi| ≤ |Standard − Semi| in ≥ 80 % of ε",
                f"{first:.0%} and {second:.0%} of {len(std)} ε (fail at ε = {fails(ok1)}; "
                f"{fails(ok2)}); Standard − CorrDP {_fmt(std['mean'] - cor['mean'])}",
                bool(first >= 0.8 and second >= 0.8),
                note=(
                    "primary C (the smallest with Standard's gap at ε = 0.2 above 3 s.d.) among "
                    f"{sorted(set(summary[summary['panel'] == key]['C'].round(8)))}{ties}; "
                    f"{NOMINAL}"
                ),
            )
        )
    return out


def context_rows(profile: Profile, records: list[dict]) -> list[Comparison]:
    """What this profile ran (cuts included) and what each unit ran."""
    out: list[Comparison] = []
    out.append(
        Comparison.info(
            "Fig. 1 profile: seeds / C per panel",
            "; ".join(
                f"{k}: {profile.seeds[k]} seeds, C ∈"
                f" {{{_fmt(r['C'] for r in records if r['panel'] == k)}}}"
                for k in ALL_PANELS
                if k in profile.c_values
            ),
            note=(
                f"ε grid {list(profile.epsilons)}; T × {profile.step_fraction:g} of the paper's;"
                f" every ε {NOMINAL}"
            ),
        )
    )
    for rec in records:
        # Wall times vary run to run, so they go to units.csv, not into the comparisons.
        out.append(
            Comparison.info(
                f"panel {rec['panel']} C={rec['C']:.3g} ({rec['C_mode']}): runs",
                f"{rec['runs']} runs, T = {rec['steps']} (one compiled call)",
                note=f"C_theory = L²T/n² = {rec['C_theory']:.3g} (L = {rec['lipschitz']:.3g})",
            )
        )
    return out


# Item 14's criterion (within 15 %) stays in code, not in targets.csv: wang2026_checks runs
# :func:`item14` inside a cached unit, and the targets must never feed one.
def item14(summary: pd.DataFrame, epsilons: Sequence[float]) -> Comparison:
    """Spec §6 item 14: panel a's Standard gap (vs non-private GD) ≈ (α/4)Σσ_i² = (α/4)·m·C·K_δ/ε²
    (stationary GD noise on a quadratic) for every ε ≤ 1 at C = 1, within 15 %."""
    a = PANELS["a"]
    std = curve(summary, "a", "standard", "gap_vs_nonprivate", 1.0)
    small = [e for e in epsilons if e <= 1.0]
    predicted = np.array([a.learning_rate / 4 * 100 * noise.k_delta(a.delta) / e**2 for e in small])
    ratios = std["mean"].loc[small].to_numpy() / predicted
    return Comparison.claim(
        "#14 synthetic Standard gap ≈ (α/4)Σσ_i² for ε ≤ 1 (C = 1), within 15 %",
        "ratio 1 ± 0.15",
        f"ratios {_fmt(ratios)} at ε = {_fmt(small)}",
        bool(np.all(np.abs(ratios - 1) <= 0.15)),
        note=(
            f"(α/4)Σσ² = 0.255/ε²; mean of {int(std['count'].iloc[0])} seeds; gap vs non-private"
            f" GD; {NOMINAL}"
        ),
    )
