"""The worked example written out (Hu, Sanyal, Schölkopf 2024, on Adult): ``pipeline_demo.md`` (each
step's sensitivity, then per mechanism the overall ε and the recalibrated noise) and the comparison
rows — the paper's qualitative claims that pre-processing can only cost privacy and that the
SRDP-based analysis beats group privacy (§4.2)."""

from __future__ import annotations

import math

import pandas as pd

from experiments.results import Comparison

from .config import MECHANISMS, DemoConfig


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def comparisons(frame: pd.DataFrame, cfg: DemoConfig) -> list[Comparison]:
    """Per analysed row: the calibration's check (no pre-processing), the overall ε, the claim
    "pre-processing can only cost privacy", and for the composed chains Theorem 2 against group
    privacy."""
    comparisons = []
    for r in frame.itertuples():
        if r.step == "none":
            comparisons.append(
                Comparison.numeric(
                    f"{r.mechanism}: no pre-processing, overall ε at the calibrated noise (exact"
                    " mode)",
                    cfg.target_epsilon,
                    r.overall_epsilon_exact,
                    rel_tol=max(cfg.calibration_rtol, 1e-6) * 10,
                )
            )
            continue
        comparisons.append(
            Comparison.info(
                f"{r.mechanism} after {r.step}: overall ε (exact / Table-2 mode / group privacy)",
                f"{r.overall_epsilon_exact:.4g} / {r.overall_epsilon_table2:.4g} /"
                f" {_fmt(r.group_epsilon)} (Δ∞={r.linf:.0f}, Δ2={r.l2:.3g}, τ*={r.tau:.3g})",
            )
        )
        comparisons.append(
            Comparison.claim(
                f"{r.mechanism} after {r.step}: Theorem 2 (exact) ≥ no-pre-processing ε and"
                " calibrated ε ≤ baseline",
                "pre-processing can only cost privacy",
                f"{r.overall_epsilon_exact:.4g} ≥ {cfg.target_epsilon:g}; mechanism ε"
                f" {r.calibrated_epsilon_exact:.4g} ≤ {r.mechanism_epsilon:.4g}",
                bool(
                    r.overall_epsilon_exact >= cfg.target_epsilon * (1 - 1e-6)
                    and r.calibrated_epsilon_exact <= r.mechanism_epsilon * (1 + 1e-9)
                ),
            )
        )
        if "composed" in r.step and "PCA" in r.step:
            comparisons.append(
                Comparison.info(
                    f"{r.mechanism} after {r.step}: valid overall ε = min(Theorem 2, group"
                    " privacy)",
                    f"{min(r.overall_epsilon_exact, r.group_epsilon):.4g} (Theorem 2"
                    f" {r.overall_epsilon_exact:.4g}, group {r.group_epsilon:.4g})",
                    note=(
                        "PCA after thousands of changed rows: Δ2 hits the unit ball's diameter,"
                        " group privacy over all n rows wins"
                    ),
                )
            )
        elif (
            "composed" in r.step and r.group_epsilon is not None and not math.isnan(r.group_epsilon)
        ):
            comparisons.append(
                Comparison.claim(
                    f"{r.mechanism} after {r.step}: Theorem 2 on the composed (Δ∞, Δ2) beats group"
                    " privacy over Δ∞+1 records",
                    "SRDP-based analysis < group privacy (paper §4.2, for one step)",
                    f"{r.overall_epsilon_exact:.4g} vs group {r.group_epsilon:.4g}"
                    f" (k={r.group_size})",
                    bool(r.overall_epsilon_exact < r.group_epsilon),
                    note=(
                        "composed sensitivity from dpprep.preprocess.pipeline (chain argument for"
                        " quantization after imputation)"
                    ),
                )
            )
    return comparisons


def markdown(frame: pd.DataFrame, steps: list[dict], cfg: DemoConfig, n: int, profile: str) -> str:
    lines = [
        "# Worked example: the privacy cost of pre-processing Adult",
        "",
        (
            f"Profile `{profile}`: {n} rows of Adult (31 encoded columns, scaled into the unit ball"
            f" by the public bound 3). Target: an overall ({cfg.target_epsilon:g},"
            f" {cfg.delta:g})-DP pipeline."
        ),
        "",
        "## 1. What each pre-processing step returns",
        "",
        "| step | Δ∞ | Δ2 | τ* = Δ2·Δ∞ | data-dependent quantities |",
        "|---|---|---|---|---|",
    ]
    for s in steps[1:]:
        sens = s["sensitivity"]
        lines.append(
            f"| {s['step']} | {sens.linf:.0f} | {sens.l2:.4g} | {sens.tau:.4g} | {s['detail']} |"
        )
    lines += [
        "",
        (
            "τ* is the L12 distance budget Theorem 2 charges the mechanism's Smooth-RDP: the"
            " pre-processed versions of two neighbouring datasets differ in up to Δ∞ common"
            " records, each moved by ≤ Δ2."
        ),
        "",
    ]
    for number, mechanism in enumerate(cfg.mechanisms, start=2):
        title = MECHANISMS[mechanism][0]
        sub = frame[frame["mechanism"] == mechanism]
        base = float(sub["mechanism_epsilon"].iloc[0])
        lines += [
            f"## {number}. {title}",
            "",
            (
                f"Noise level fixed so that the mechanism alone is ({cfg.target_epsilon:g},"
                f" {cfg.delta:g})-DP (its Table-1 ε = {base:.4g}). Overall ε of the pre-processed"
                " pipeline at that noise level, and the mechanism ε that restores an overall ε of"
                f" {cfg.target_epsilon:g}:"
            ),
            "",
            "| step | τ* | overall ε, Theorem 2 exact | overall ε, Table 2 (α ≥ 11) | group privacy"
            " (k = Δ∞+1, ≤ n) | mechanism ε for target, exact | … Table 2 mode |"
            + (" DP-GD σ (T=100), exact |" if mechanism == "dp_gd" else ""),
            "|---|---|---|---|---|---|---|" + ("---|" if mechanism == "dp_gd" else ""),
        ]
        for r in sub.itertuples():
            cells = [
                r.step,
                _fmt(r.tau),
                _fmt(r.overall_epsilon_exact),
                _fmt(r.overall_epsilon_table2),
                f"{_fmt(r.group_epsilon)} (k={r.group_size})",
                _fmt(r.calibrated_epsilon_exact),
                _fmt(r.calibrated_epsilon_table2),
            ]
            if mechanism == "dp_gd":
                cells.append(_fmt(r.sigma_exact))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        f"## {len(cfg.mechanisms) + 2}. Reading the numbers",
        "",
        (
            "- Mean imputation of a few missing values is nearly free: τ* = 2p/(n−p) is tiny, so"
            " the noise barely changes. Group privacy, which must protect p records at once, is far"
            " worse."
        ),
        "- Quantization costs depend on the largest good cluster (p = 2·max|B|) times 2η.",
        (
            "- PCA moves every record (Δ∞ = n); its cost is governed by the eigen-gap: τ* ≈ 12/δ_k."
            " Adult's covariance has small gaps, so non-private PCA is expensive here."
        ),
        (
            "- Chained steps (rows marked *composed*, `dpprep.preprocess.Pipeline`): imputation"
            " moves p rows slightly, so quantization's two inputs differ in p + 1 rows and its Δ∞"
            " becomes p + (p+1)·2·max|B| (each replaced row can re-cluster up to 2·max|B| others)."
            " The single-step rows understate the cost of the chained pipeline; the composed rows"
            " are its guarantee. PCA after that many changed rows is in the group-privacy regime"
            " (Δ2 capped at the unit ball's diameter 2)."
        ),
        (
            "- Caveats: each step's sensitivity is computed on that step's input and holds over the"
            " collection ℒ of datasets sharing these properties (the paper's conditional guarantee;"
            " the composition extends it to the datasets between two neighbours' intermediates)."
            " Prop. 3's Δ∞ for quantization can be exceeded by crafted neighbours (see"
            " tests/preprocess/test_dedup_quantize.py)."
        ),
        "",
    ]
    return "\n".join(lines)
