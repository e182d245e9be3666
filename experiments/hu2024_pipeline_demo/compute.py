"""The worked example's units (Hu, Sanyal, Schölkopf 2024, on Adult): the three pre-processing
steps with their own and their composed sensitivities (:func:`preprocess_steps`), the mechanism ε
that alone is (ε, δ)-DP (:func:`baseline_epsilon`), and per step the overall ε of the pre-processed
pipeline and the mechanism ε that restores the target (:func:`analyse`)."""

from __future__ import annotations

import math

import numpy as np

from dpprep.preprocess import Pipeline, Sensitivity, impute_mean, pca_reduce, quantize
from dpprep.preprocess import pipeline as pl
from dpprep.preprocess.privacy.meta import calibrate_mechanism, default_group_size, overall_privacy
from experiments.hu2024_table3 import inject_mcar

from .config import MECHANISMS, DemoConfig


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


def preprocess_unit(x: np.ndarray, groups: dict, cfg: DemoConfig) -> dict:
    """:func:`preprocess_steps` as a JSON-able unit: each sensitivity as ``[Δ∞, Δ2]``."""
    return {
        "steps": [
            step | {"sensitivity": [step["sensitivity"].linf, step["sensitivity"].l2]}
            for step in preprocess_steps(x, groups, cfg)
        ]
    }


def baseline_epsilon(mechanism: str, cfg: DemoConfig) -> dict:
    """The mechanism ε at which ``mechanism`` alone (no pre-processing) is (target ε, δ)-DP."""
    factory = MECHANISMS[mechanism][1](cfg)
    return {
        "eps": (
            calibrate_mechanism(
                factory,
                Sensitivity(0.0, 0.0),
                target_epsilon=cfg.target_epsilon,
                delta=cfg.delta,
                rtol=cfg.calibration_rtol,
            ).mechanism_epsilon
        )
    }


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
        cal = calibrate_mechanism(
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
