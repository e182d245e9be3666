"""The audit's REPORT rows and its bug-catalogue table, from the frame of finished units.

Honest white-box audits are held to the ratio targets of ``targets.csv`` (GDP lower bound /
theoretical ε); every honest audit to "no bound above its theory" and "no test flags it"; the
broken learners and every catalogue row to "a rigorous test refutes the claim", with the measured
reason (:data:`~experiments.audit.notes.NOT_CATCHABLE`) for each row none can catch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from experiments.results import Comparison
from experiments.targets import paper_targets

from .alarms import alarm_rates, interval
from .bugs import BUGS
from .config import TITLES
from .notes import NOT_CATCHABLE


def _ratio_targets() -> list[tuple[str, str, float]]:
    """(learner, threat model, least GDP bound / theoretical ε) of ``targets.csv``, in its order."""
    targets = paper_targets(__package__)
    return [(r["learner"], r["threat_model"], float(r["target"])) for _, r in targets.iterrows()]


def comparisons(frame: pd.DataFrame) -> list[Comparison]:
    """The REPORT rows of the audit's frame (one row per unit, as ``run`` builds it)."""
    out: list[Comparison] = []
    every_honest = frame[frame["role"] == "honest"]
    # The per-learner rows use seed 0; the other seeds only enter the false-alarm count below.
    honest = every_honest[every_honest["seed"] == 0]
    for learner, threat, target in _ratio_targets():
        part = honest[(honest["learner"] == learner) & (honest["threat_model"] == threat)]
        for _, r in part.iterrows():
            out.append(
                Comparison.claim(
                    f"audit {TITLES[learner]} white-box, ε = {r['epsilon_target']:g}: GDP lower"
                    " bound / theoretical ε",
                    f"≥ {target}",
                    f"{r['ratio_gdp']:.3f} ({r['epsilon_lb_gdp']:.3f} /"
                    f" {r['theoretical_epsilon']:.3f}; {r['runs_per_world']} runs per world)",
                    bool(r["ratio_gdp"] >= target),
                    note=f"Clopper–Pearson {r['epsilon_lb_cp']:.3f}",
                )
            )
    worst = (
        honest.assign(
            excess=np.maximum(honest["epsilon_lb_gdp"], honest["epsilon_lb_cp"])
            / honest["theoretical_epsilon"]
        )
        .sort_values("excess")
        .iloc[-1]
    )
    above = honest[
        (honest["epsilon_lb_gdp"] > honest["theoretical_epsilon"])
        | (honest["epsilon_lb_cp"] > honest["theoretical_epsilon"])
        | (honest["tradeoff_delta_excess"] > 0)
    ]  # NaN (no curve) compares False
    out.append(
        Comparison.claim(
            "audit: no lower bound exceeds its learner's theoretical ε",
            "none",
            f"{len(above)} of {len(honest)} audits above (or refuted by the trade-off test);"
            f" largest bound/theory {worst['excess']:.3f} ({worst['learner']},"
            f" {worst['threat_model']}, ε = {worst['epsilon_target']:g})",
            above.empty,
        )
    )
    rates = alarm_rates(every_honest)
    confirmed, suspected = rates["confirmed"], rates["suspected"]
    flagged = every_honest[every_honest["violation"].astype(bool)]
    out.append(
        Comparison.claim(
            "audit: ≥ 200 honest audits across learners, paths, ε and seeds, none reported as a"
            " violation (family-wise error rate per audit 1e-3: suspected at 5 %, confirmed on"
            " fresh, independent runs)",
            "≥ 200 audits, 0 violations",
            f"{confirmed.count} of {confirmed.trials} honest audits reported as violations (95 %"
            f" interval {interval(confirmed)}); {suspected.count} suspected"
            f" ({suspected.count / max(suspected.trials, 1):.1%}, 95 % interval"
            f" {interval(suspected)}; at most 5 % by design)",
            confirmed.trials >= 200 and flagged.empty,
            note="; ".join(
                f"{r['path']} ε {r['epsilon_target']:g} seed {int(r['seed'])}"
                for _, r in flagged.iterrows()
            )
            or (
                f"{every_honest['path'].nunique()} learners and paths, seeds"
                f" {sorted(set(int(s) for s in every_honest['seed']))}; alarms.md has each learner"
            ),
        )
    )
    for _, r in frame[frame["role"] == "broken"].iterrows():
        # DP-GD's trade-off is exactly Gaussian, so its GDP bound is rigorous; elsewhere only
        # C-P is.
        exact = r["learner"] == "dp_gd"
        bound = r["epsilon_lb_gdp"] if exact else r["epsilon_lb_cp"]
        out.append(
            Comparison.claim(
                f"audit catches a broken {TITLES[r['path']]} (half the noise its accountant"
                " assumes)",
                "lower bound > claimed ε",
                f"{'GDP' if exact else 'Clopper–Pearson'} bound {bound:.3f} vs claimed"
                f" {r['claimed_epsilon']:.3f} (GDP {r['epsilon_lb_gdp']:.3f}, C-P"
                f" {r['epsilon_lb_cp']:.3f})",
                bool(bound > r["claimed_epsilon"]),
            )
        )
    corr = honest[honest["learner"] == "corrdp_sgd"]
    if not corr.empty:
        beyond = corr[corr["epsilon_lb_gdp"] > corr["claimed_epsilon"]]
        out.append(
            Comparison.info(
                "audit CorrDP-SGD: a canary changing only an insensitive feature, vs nominal ε",
                "; ".join(
                    f"nominal {r['claimed_epsilon']:g}: bound {r['epsilon_lb_gdp']:.3f},"
                    f" standard-DP ε {r['theoretical_epsilon']:.3f}"
                    for _, r in corr.iterrows()
                ),
                note=(
                    f"bound above the nominal ε in {len(beyond)} of {len(corr)}: the nominal ε is a"
                    " CorrDP guarantee (the insensitive feature is charged through its correlation"
                    " weight), not a standard-DP promise for this neighbour pair; the standard-DP"
                    " ε of the run holds"
                ),
            )
        )
    pipe = honest[honest["learner"] == "impute_dp_gd"]
    if not pipe.empty:
        exceeded = bool((pipe["epsilon_lb_gdp"] > pipe["claimed_epsilon"]).any())
        out.append(
            Comparison.claim(
                "audit mean imputation → DP-GD: the bound exceeds DP-GD's own ε (pre-processing"
                " costs privacy) and stays below Hu et al.'s overall ε",
                "naive ε < bound ≤ overall ε",
                "; ".join(
                    f"ε_mech {r['epsilon_target']:g}: naive {r['claimed_epsilon']:.3f} < bound "
                    f"{r['epsilon_lb_gdp']:.3f} ≤ overall {r['theoretical_epsilon']:.3f}"
                    for _, r in pipe.iterrows()
                ),
                exceeded and bool((pipe["epsilon_lb_gdp"] <= pipe["theoretical_epsilon"]).all()),
            )
        )
    shuffle = honest[
        (honest["learner"] == "dp_sgd_shuffle") & (honest["threat_model"] == "white_box")
    ]
    if not shuffle.empty:
        out.append(
            Comparison.info(
                "audit shuffled DP-SGD, white-box: bound vs the customary as-if-Poisson ε",
                "; ".join(
                    f"claimed {r['claimed_epsilon']:g}: bound {r['epsilon_lb_gdp']:.3f} (rigorous ε"
                    f" {r['theoretical_epsilon']:.3f})"
                    for _, r in shuffle.iterrows()
                ),
                note=(
                    "not exceeded at these settings (n = 100, B = 20, 5 epochs): no evidence"
                    " against the as-if-Poisson number here, and no proof of it either (Chua et al."
                    " 2024 exhibit settings where it fails); the audit holds the rigorous"
                    " no-amplification bound"
                ),
            )
        )
    for _, r in frame[frame["role"].str.startswith("bug:")].iterrows():
        # Caught: a bound rigorous for this learner above the ε its accounting states (the audit's
        # own reference, which no catalogue bug touches). Timings vary: catalogue.md has them.
        caught_by = r.get("caught_by", "")
        caught_by = caught_by if isinstance(caught_by, str) and caught_by else "nothing"
        out.append(
            Comparison.claim(
                f"audit catalogue: {r['bug']} in {TITLES[r['path']]} ({r['threat_model']}) caught",
                "a rigorous test refutes the claim",
                f"{_rigorous_name(r)}: ε bound {r['epsilon_lb_rigorous']:.3f} vs"
                f" {r['theoretical_epsilon']:.3f}, trade-off δ excess"
                f" {r['tradeoff_delta_excess']:.4f}; caught by {caught_by}"
                f" ({int(r['runs_per_world'])} runs per world)",
                bool(r["violation"]),
                note=(
                    f"{BUGS[r['bug']].description}; GDP {r['epsilon_lb_gdp']:.3f}, C-P"
                    f" {r['epsilon_lb_cp']:.3f}"
                )
                + (
                    ""
                    if r["violation"]
                    else f"; why not: {NOT_CATCHABLE.get((r['path'], r['bug']), 'not analysed')}"
                ),
            )
        )
    # Timings vary run to run, so they stay in audit.csv (runs_per_second, seconds), not in
    # REPORT rows.
    out.append(
        Comparison.info(
            "audit runs",
            f"{len(frame)} audits, {int(2 * frame['runs_per_world'].sum())} evaluation runs in all "
            "(+ pilot runs that fix the thresholds)",
            note=(
                "each audit's runs are vmapped chunks of one compiled call; runs/s per audit in"
                " audit.csv"
            ),
        )
    )
    for (learner, threat), part in honest.groupby(["path", "threat_model"], sort=False):
        cp_ratios = part["epsilon_lb_cp"] / part["theoretical_epsilon"]
        out.append(
            Comparison.info(
                f"audit {TITLES[learner]}, {threat}: GDP bound / theoretical ε",
                ", ".join(
                    f"ε {r['epsilon_target']:g}: {r['ratio_gdp']:.2f}" for _, r in part.iterrows()
                ),
                note=(f"Clopper–Pearson/theory {', '.join(f'{v:.2f}' for v in cp_ratios)}"),
            )
        )
    return out


def catalogue_by_path(catalogue: pd.DataFrame) -> str:
    """The catalogue per path (learner or code path audited): bugs planted, bugs caught, and for
    each test how many of the path's bugs it caught."""
    lines = [
        "## Per path",
        "",
        "| path | bugs planted | caught | caught by (bugs per test) | missed |",
        "|---|---|---|---|---|",
    ]
    for (learner, threat), part in catalogue.groupby(["path", "threat_model"], sort=False):
        tests: dict[str, int] = {}
        for value in part["caught_by"]:
            for test in str(value).split("+") if isinstance(value, str) and value else ():
                tests[test] = tests.get(test, 0) + 1
        caught = part["violation"].astype(bool)
        lines.append(
            f"| {TITLES[learner]} ({threat}) | {len(part)} | {int(caught.sum())} |"
            f" {', '.join(f'{t} {k}' for t, k in sorted(tests.items(), key=lambda i: -i[1]))} |"
            f" {', '.join(part.loc[~caught, 'bug']) or '—'} |"
        )
    return "\n".join(lines) + "\n"


def _rigorous_name(r: Any) -> str:
    """The bounds rigorous for a row's learner, by name (e.g. "Clopper–Pearson + GDP")."""
    names = {"gdp": "GDP", "clopper_pearson": "Clopper–Pearson", "tradeoff": "trade-off"}
    return " + ".join(names[b] for b in str(r["rigorous_bounds"]).split("+"))


def catalogue_table(catalogue: pd.DataFrame) -> str:
    """The bug catalogue as a markdown table (one row per (bug, learner) unit): which tests caught
    it (rigorous bounds, the noise test's parts, the deterministic checks) or why none could."""
    lines = [
        (
            "| bug | learner | rigorous bound(s) | rigorous ε lower bound | trade-off δ excess |"
            " held to ε | caught? | caught by | runs per world | seconds | why not caught |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in catalogue.iterrows():
        caught_by = r.get("caught_by", "")
        caught_by = "" if not isinstance(caught_by, str) else caught_by.replace("+", ", ")
        why_not = "" if r["violation"] else NOT_CATCHABLE.get((r["path"], r["bug"]), "not analysed")
        lines.append(
            f"| {r['bug']} | {TITLES[r['path']]} ({r['threat_model']}) | {_rigorous_name(r)} | "
            f"{r['epsilon_lb_rigorous']:.3f} | {r['tradeoff_delta_excess']:.4f} |"
            f" {r['theoretical_epsilon']:.3f} | "
            f"{'yes' if r['violation'] else 'no'} | {caught_by} | {int(r['runs_per_world'])} |"
            f" {r['seconds']:.1f} | "
            f"{why_not} |"
        )
    return "\n".join(lines) + "\n"
