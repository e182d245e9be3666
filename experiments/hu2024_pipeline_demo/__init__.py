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

import pandas as pd

from dpprep.preprocess import Sensitivity
from experiments import RunContext
from experiments.hu2024_table3 import load_adult_unit_ball
from experiments.results import (
    Comparison,
    atomic_write_text,
    config_json,
    provenance_json,
    write_csv,
)

from .compute import analyse, baseline_epsilon, preprocess_steps, preprocess_unit
from .config import EXPERIMENT, MECHANISMS, PROFILES, DemoConfig
from .report import comparisons, markdown

__all__ = [
    "EXPERIMENT",
    "MECHANISMS",
    "PROFILES",
    "DemoConfig",
    "analyse",
    "markdown",
    "preprocess_steps",
    "run",
]


def run(ctx: RunContext) -> list[Comparison]:
    cfg = PROFILES[ctx.profile]
    x, _, groups = load_adult_unit_ball(ctx.data_dir, cfg.n_rows, cfg.seed)
    n = x.shape[0]
    ctx.progress(f"pre-processing {n} Adult rows")
    # The three steps take ~25 s on all of Adult: cache their (JSON-able) outcome as a unit too.
    cached = ctx.store.run(
        f"preprocess|n={n}|{config_json(cfg)}", lambda: preprocess_unit(x, groups, cfg)
    )
    steps = [step | {"sensitivity": Sensitivity(*step["sensitivity"])} for step in cached["steps"]]

    rows, versions = [], []
    for mechanism in cfg.mechanisms:
        key = (
            f"base|{mechanism}|{cfg.target_epsilon}|{cfg.delta}|{cfg.smoothness}"
            f"|{cfg.calibration_rtol}"
        )
        base = ctx.store.run(key, lambda: baseline_epsilon(mechanism, cfg))["eps"]
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
    return comparisons(frame, cfg)
