"""What Figure 2's units compute: the final ε_DP of the pre-processed Gaussian mechanism at each
x of a panel, by Theorem 2 (Table-2 and exact modes) and by group privacy (k = Δ∞ and
k = min(Δ∞+1, n)); the panels' grids; and panel (a)'s crossover η."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from dpprep.preprocess.privacy import table1
from dpprep.preprocess.privacy.meta import default_group_size, overall_privacy
from dpprep.preprocess.privacy.renyi import gaussian_group_epsilon
from dpprep.preprocess.sensitivity import (
    Sensitivity,
    mean_imputation_sensitivity,
    pca_rank_sensitivity,
    quantization_sensitivity,
)

from .config import (
    REFERENCE_CROSSOVER_ETA,
    REFERENCE_ETAS,
    REFERENCE_FRACTIONS,
    REFERENCE_NS,
    Fig2Config,
)


def evaluate_point(
    sens: Sensitivity, n_records: int, cfg: Fig2Config, *, exact: bool = True
) -> dict:
    """ε_DP of the pre-processed Gaussian in both Theorem-2 modes and the two group baselines."""
    mech = table1.gaussian(epsilon=cfg.epsilon, lipschitz=1.0, sensitivity=1.0)
    k = max(1, math.ceil(sens.linf))  # the paper's count k = Δ∞
    k1 = default_group_size(sens.linf, n_records)  # min(Δ∞ + 1, n)
    t2 = overall_privacy(mech, sens, delta=cfg.delta, mode="table2")
    row = {
        "linf": sens.linf,
        "l2": sens.l2,
        "tau": sens.tau,
        "srdp_table2_eps": t2.epsilon,
        "srdp_table2_alpha": t2.optimal_alpha,
        "srdp_exact_eps": math.nan,
        "srdp_exact_alpha": math.nan,
        "group_k": k,
        "group_eps": gaussian_group_epsilon(k, cfg.epsilon, cfg.delta),
        "group_k_plus_1": k1,
        "group_k_plus_1_eps": gaussian_group_epsilon(k1, cfg.epsilon, cfg.delta),
    }
    if exact:
        ex = overall_privacy(mech, sens, delta=cfg.delta, mode="exact")
        row["srdp_exact_eps"], row["srdp_exact_alpha"] = ex.epsilon, ex.optimal_alpha
    return row


def panel_quantization(etas: np.ndarray, cfg: Fig2Config) -> pd.DataFrame:
    rows = []
    for eta in etas:
        row = evaluate_point(
            quantization_sensitivity(cfg.quant_p, float(eta), conservative=False), 10**9, cfg
        )
        rows.append(
            {"panel": "a_quantization", "x_name": "eta", "x": float(eta), "n": math.nan, **row}
        )
    return pd.DataFrame(rows)


def panel_imputation(fractions: np.ndarray, cfg: Fig2Config) -> pd.DataFrame:
    rows, n = [], cfg.imputation_n
    for frac in fractions:
        p = int(round(float(frac) * n))
        row = evaluate_point(mean_imputation_sensitivity(n, p), n, cfg)
        rows.append(
            {"panel": "b_mean_imputation", "x_name": "missing_fraction", "x": p / n, "n": n, **row}
        )
    return pd.DataFrame(rows)


def panel_pca(ns: np.ndarray, cfg: Fig2Config) -> pd.DataFrame:
    rows = []
    for n in ns:
        n = int(n)
        row = evaluate_point(pca_rank_sensitivity(n, cfg.pca_gap), n, cfg)
        rows.append({"panel": "c_pca_rank", "x_name": "n", "x": float(n), "n": n, **row})
    return pd.DataFrame(rows)


def grids(cfg: Fig2Config) -> dict[str, np.ndarray]:
    m = cfg.grid_points
    etas = sorted(set(REFERENCE_ETAS) | ({REFERENCE_CROSSOVER_ETA} if m else set()))
    fracs = sorted(set(REFERENCE_FRACTIONS))
    ns = sorted(set(REFERENCE_NS))
    if m:
        etas = sorted(
            set(etas) | set(np.round(np.logspace(math.log10(cfg.eta_range[0]), 0.0, m), 12))
        )
        step = 0.01 if m > 30 else 0.02
        fracs = sorted(set(fracs) | set(np.round(np.arange(0.01, 0.995, step), 4)))
        ns = sorted(
            set(ns)
            | set(
                np.unique(
                    np.round(
                        np.logspace(
                            math.log10(cfg.pca_n_range[0]), math.log10(cfg.pca_n_range[1]), m
                        )
                    ).astype(int)
                )
            )
        )
    return {"a": np.array(etas), "b": np.array(fracs), "c": np.array(ns)}


def quantization_crossover(cfg: Fig2Config) -> float:
    """η where the Table-2-mode SRDP curve meets the group baseline (k = p) in panel (a)."""
    mech = table1.gaussian(epsilon=cfg.epsilon)
    group = gaussian_group_epsilon(cfg.quant_p, cfg.epsilon, cfg.delta)  # the paper's k = Δ∞ = p

    def gap(eta: float) -> float:
        return (
            overall_privacy(
                mech,
                quantization_sensitivity(cfg.quant_p, eta, conservative=False),
                delta=cfg.delta,
                mode="table2",
            ).epsilon
            - group
        )

    return float(brentq(gap, cfg.eta_range[0], cfg.eta_range[1], xtol=1e-10))
