"""Worked example: what non-private pre-processing of Adult costs a DP pipeline (Hu et al. 2024).

A user's pipeline on Adult (rows scaled into the unit ball by the public bound 3):

1. 1 % of ``age`` goes missing (MCAR, fixed seed) and is filled by **mean imputation**;
2. the completed rows are **η-quantized** (good clusters, η = 0.01);
3. **PCA rank reduction** to k = 1 (Adult's largest eigen-gap) of the quantized rows.

For every step ``dpprep.preprocess`` returns the data *and* its data-dependent sensitivity
(Δ∞, Δ2); we then ask ``dpprep.preprocess.privacy.meta`` what the pre-processing costs a mechanism
run on
that step's output — DP-GD for logistic regression (L = 1, μ = 1 + R/4 = 1.25 with R = 1) and a
Gaussian mechanism for a statistic with L = Δ_f = 1 (Table 2's setting):

- at the noise level that makes the mechanism alone (1, 1e-5)-DP: the overall ε by Theorem 2
  (exact: Hölder exponents optimised, all α > 1) and by Table 2's Eq. 43 (α ≥ 11), next to the naive
  group-privacy ε for a group of Δ∞ + 1 records (capped at n);
- the mechanism ε (hence noise) needed for an overall (1, 1e-5)-DP pipeline, in both modes, and the
  DP-GD noise std σ = L·sqrt(T)/(ε n) for T = 100.

Each step is first analysed as the only pre-processing in front of the mechanism (the paper's
results cover one data-dependent step). The steps are then chained with
:class:`dpprep.preprocess.Pipeline`, which composes their sensitivities with a proof
(:mod:`dpprep.preprocess.pipeline`): imputation changes p rows by a little, so quantization sees
inputs that differ in p + 1 rows, and its Δ∞ grows to p + (p+1)·2·max|B| (chain argument) — the
composed rows ("imputation → quantization", "… → PCA") are the valid guarantee for the chained
pipeline, next to group privacy over Δ∞ + 1 records. Writes ``pipeline_demo.csv`` and
``pipeline_demo.md``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from dpprep.preprocess.privacy.meta import calibrate, default_group_size, overall_privacy
from dpprep.preprocess.privacy.table1 import dp_gd, gaussian
from dpprep.preprocess import Pipeline, Sensitivity, impute_mean, pca_reduce, quantize
from dpprep.preprocess import pipeline as pl
from experiments.results import (
    Comparison,
    atomic_write_text,
    config_json,
    provenance_json,
    write_csv,
)
from experiments import RunContext
from experiments.hu2024_table3 import inject_mcar, load_adult_unit_ball

EXPERIMENT = "hu2024_pipeline_demo"


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    n_rows: int | None  # None: all rows
    missing_column: str = "age"
    missing_rate: float = 0.01
    eta: float = 0.01
    pca_k: int = 1
    target_epsilon: float = 1.0
    delta: float = 1e-5
    smoothness: float = 1.25  # logistic loss, ||θ|| ≤ R = 1 (spec §1.5)
    steps: int = 100  # T, only to express DP-GD's ε as a noise std
    mechanisms: tuple[str, ...] = ("dp_gd", "gaussian")
    calibration_rtol: float = 1e-5
    seed: int = 0


PROFILES = {
    "smoke": DemoConfig(n_rows=2000, mechanisms=("dp_gd",), calibration_rtol=1e-2),
    "quick": DemoConfig(n_rows=None),
    "paper": DemoConfig(n_rows=None),
}

MECHANISMS = {
    "dp_gd": (
        "DP-GD (logistic, L=1, μ=1.25)",
        lambda cfg: lambda e: dp_gd(epsilon=e, lipschitz=1.0, smoothness=cfg.smoothness),
    ),
    "gaussian": (
        "Gaussian mechanism (L=Δ_f=1)",
        lambda cfg: lambda e: gaussian(epsilon=e, lipschitz=1.0, sensitivity=1.0),
    ),
}


def preprocess_steps(x: np.ndarray, groups: dict, cfg: DemoConfig) -> list[dict]:
    """Runs the three steps in turn; returns per step its name, parameters and own sensitivity, then
    the composed sensitivities of the chains (:func:`dpprep.preprocess.pipeline.compose` on the
    steps' own sensitivities — what ``Pipeline(steps).run`` computes)."""
    column = groups[cfg.missing_column][0]
    xm = inject_mcar(x, [column], cfg.missing_rate, cfg.seed)
    imputed = impute_mean(xm)
    quantized = quantize(imputed.data, cfg.eta)
    pca = pca_reduce(quantized.data, cfg.pca_k, mode="rank")
    n = x.shape[0]
    chain = (pl.impute_mean_step(), pl.quantize_step(cfg.eta), pl.pca_rank_step(cfg.pca_k))
    Pipeline(chain).check()
    trace = pl.compose(chain, [imputed.sensitivity, quantized.sensitivity, pca.sensitivity], n)
    composed, three = trace[1].composed, trace[2].composed
    return [
        {"step": "none", "detail": "no pre-processing", "sensitivity": Sensitivity(0.0, 0.0)},
        {
            "step": "mean imputation",
            "detail": f"{imputed.p} of {n} rows miss `{cfg.missing_column}` (p = Δ∞); Δ2 = 2/(n−p)",
            "sensitivity": imputed.sensitivity,
        },
        {
            "step": f"quantization (η={cfg.eta:g})",
            "detail": (
                f"{len(quantized.clusters.sizes)} good clusters, largest"
                f" {quantized.max_cluster_size} rows; {int(quantized.changed_mask.sum())} rows"
                f" moved; p = 2·max|B| = {quantized.p}; Δ2 = 2η (conservative)"
            ),
            "sensitivity": quantized.sensitivity,
        },
        {
            "step": f"PCA rank-{cfg.pca_k}",
            "detail": (
                f"eigenvalues {', '.join(f'{v:.4g}' for v in pca.eigenvalues[:5])}…; "
                f"gap δ_{cfg.pca_k} = {pca.gap_k:.4g}; τ* = 4(3n+2)/((n−1)δ)"
            ),
            "sensitivity": pca.sensitivity,
        },
        {
            "step": "imputation → quantization (composed)",
            "detail": (
                f"Pipeline: quantization's inputs differ in up to p + 1 = {imputed.p + 1} rows; Δ∞"
                f" = p + (p+1)·{quantized.p} = {composed.linf:.0f}, Δ2 = 2/(n−p) + 2η"
            ),
            "sensitivity": composed,
        },
        {
            "step": f"imputation → quantization → PCA rank-{cfg.pca_k} (composed)",
            "detail": (
                f"PCA after {composed.linf:.0f} changed rows: Δ2 = r + k·Δ2_PCA, capped at 2 (unit"
                " ball)"
            ),
            "sensitivity": three,
        },
    ]


def analyse(step: dict, mechanism: str, base_epsilon: float, cfg: DemoConfig, n: int) -> dict:
    factory = MECHANISMS[mechanism][1](cfg)
    sens = step["sensitivity"]
    row = {
        "step": step["step"],
        "mechanism": mechanism,
        "linf": sens.linf,
        "l2": sens.l2,
        "tau": sens.tau,
        "mechanism_epsilon": base_epsilon,
    }
    for mode in ("exact", "table2"):
        res = overall_privacy(
            factory(base_epsilon),
            sens,
            delta=cfg.delta,
            mode=mode,
            group_size=default_group_size(sens.linf, n),
        )
        row[f"overall_epsilon_{mode}"] = res.epsilon
        row["group_size"] = res.group_size
        row["group_epsilon"] = res.group_epsilon
        cal = calibrate(
            factory,
            sens,
            target_epsilon=cfg.target_epsilon,
            delta=cfg.delta,
            mode=mode,
            initial=base_epsilon,
            rtol=cfg.calibration_rtol,
        )
        row[f"calibrated_epsilon_{mode}"] = cal.mechanism_epsilon
        if mechanism == "dp_gd":
            row[f"sigma_{mode}"] = math.sqrt(cfg.steps) / (cal.mechanism_epsilon * n)  # L = 1
    return row


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def run(ctx: RunContext) -> list[Comparison]:
    cfg = PROFILES[ctx.profile]
    x, _, groups = load_adult_unit_ball(ctx.data_dir, cfg.n_rows, cfg.seed)
    n = x.shape[0]
    ctx.progress(f"pre-processing {n} Adult rows")
    # The three steps take ~25 s on all of Adult: cache their (JSON-able) outcome as a unit too.
    cached = ctx.store.run(
        f"preprocess|n={n}|{config_json(cfg)}",
        lambda: {
            "steps": [
                step | {"sensitivity": [step["sensitivity"].linf, step["sensitivity"].l2]}
                for step in preprocess_steps(x, groups, cfg)
            ]
        },
    )
    steps = [step | {"sensitivity": Sensitivity(*step["sensitivity"])} for step in cached["steps"]]

    rows, versions = [], []
    for mechanism in cfg.mechanisms:
        factory = MECHANISMS[mechanism][1](cfg)
        key = (
            f"base|{mechanism}|{cfg.target_epsilon}|{cfg.delta}|{cfg.smoothness}"
            f"|{cfg.calibration_rtol}"
        )
        base = ctx.store.run(
            key,
            lambda: {
                "eps": (
                    calibrate(
                        factory,
                        Sensitivity(0.0, 0.0),
                        target_epsilon=cfg.target_epsilon,
                        delta=cfg.delta,
                        rtol=cfg.calibration_rtol,
                    ).mechanism_epsilon
                )
            },
        )["eps"]
        for step in steps:
            s = step["sensitivity"]
            key = (
                f"{mechanism}|{step['step']}|n={n}|linf={s.linf!r}|l2={s.l2!r}|base={base!r}"
                f"|{config_json(cfg)}"
            )
            ctx.progress(f"{mechanism}: {step['step']}")
            rows.append(
                ctx.store.run(key, lambda: analyse(step, mechanism, base, cfg, n))
                | {"detail": step["detail"]}
            )
            versions.append(provenance_json(ctx.store.provenance(key)))  # of the unit's computation
    frame = pd.DataFrame(rows)
    frame["n"] = n
    frame["seed"] = cfg.seed
    frame["config"] = config_json(cfg)
    frame["versions"] = versions
    write_csv(frame, ctx.out_dir / "pipeline_demo.csv")
    atomic_write_text(ctx.out_dir / "pipeline_demo.md", markdown(frame, steps, cfg, n, ctx.profile))

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
