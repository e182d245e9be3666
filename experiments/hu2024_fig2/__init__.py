"""Hu, Sanyal, Schölkopf (2024) Figure 2: SRDP-based (Theorem 2) vs group-privacy analysis.

Pre-processed Gaussian mechanism ``f(S) + N(0, Δ_f²/ε²)``, ``f`` 1-Lipschitz, ``Δ_f = 1``, ``ε =
1``;
y = final ε_DP at δ = 1e−3 via Lemma M (spec §7 reconstruction — the paper states neither axes nor
parameters). Three panels:

(a) quantization vs η ∈ [1e−3, 1], Δ∞ = p = 10, τ = ηp;
(b) mean imputation vs missing fraction p/n, n = 100, τ = 2p/(n−p);
(c) PCA rank reduction vs n ∈ [101, 1e4], δ_min^k = 1, τ = 4(3n+2)/((n−1)δ).

Curves: Theorem 2 in "Table-2 mode" (Eq. 43, constant 1.05, α ≥ 11; spec default) and in exact mode
(Eq. 3, Hölder exponents optimised, max of the branches, Lemma M over all α > 1); group privacy with
the exact Gaussian group RDP ``αk²ε²/2`` (closed form ``renyi.gaussian_group_epsilon``) for
``k = Δ∞`` (the paper's count, which spec §11.4 reproduces; not a valid guarantee) and
``k = min(Δ∞+1, n)`` (the rigorous count and ``meta.overall_privacy``'s default, dashed). Writes
``fig2.png`` and ``fig2.csv``; compares with spec §11.4.
"""

from __future__ import annotations

import dataclasses
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
from experiments.results import Comparison, config_json, provenance_json, save_figure, write_csv
from experiments import RunContext


@dataclasses.dataclass(frozen=True)
class Fig2Config:
    """Spec §7 / §11.4 defaults; the grid sizes depend on the profile (reference x values are
    always included so every profile produces the same comparisons)."""

    epsilon: float = 1.0
    delta: float = 1e-3
    quant_p: int = 10
    eta_range: tuple[float, float] = (1e-3, 1.0)
    imputation_n: int = 100
    pca_gap: float = 1.0
    pca_n_range: tuple[int, int] = (101, 10_000)
    grid_points: int = 25


PROFILE_GRID_POINTS = {"smoke": 0, "quick": 25, "paper": 61}

# Spec §11.4 reference values (ε = 1, δ = 1e−3), kept as printed (strings) so that the closed-form
# tolerance is exactly "the printed digits".
REF_QUANT_TABLE2 = {1e-3: "12.242", 0.01: "12.356", 0.1: "23.791", 0.5: "300.99", 1.0: "1167.24"}
REF_QUANT_EXACT = {1e-3: "4.26", 0.1: "9.43", 0.5: "40.3", 1.0: "101.4"}
REF_QUANT_GROUP = {10: "87.169", 11: "101.386"}
REF_QUANT_CROSSOVER = "0.255"
# fraction -> (SRDP Table-2 mode, group k = p, ratio group/SRDP)
REF_IMPUTATION = {
    0.01: ("12.25", "4.22", "0.34"),
    0.1: ("12.81", "87.17", "6.80"),
    0.5: ("58.44", "1435.85", "24.6"),
    0.8: ("751.44", "3497.35", "4.65"),
    0.9: ("3754.4", "4384.5", "1.17"),
    0.95: ("16690", "4866", "0.29"),
}
REF_IMPUTATION_EXACT = {0.5: "15.65", 0.9: "251.1"}
REF_PCA = {
    101: ("1731.34", "5475.9"),
    1000: ("1680.99", "503716.9"),
    10_000: ("1676.00", "5.0037e7"),
}
REF_PCA_EXACT_RANGE = (133.0, 136.0)


def _half_unit(printed: str) -> float:
    """Half a unit of the last printed digit of a reference value (its rounding tolerance)."""
    mantissa, _, exponent = printed.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


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
    etas = sorted(
        set(REF_QUANT_TABLE2)
        | set(REF_QUANT_EXACT)
        | ({float(REF_QUANT_CROSSOVER)} if m else set())
    )
    fracs = sorted(set(REF_IMPUTATION) | set(REF_IMPUTATION_EXACT))
    ns = sorted(set(REF_PCA))
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


def plot(frame: pd.DataFrame, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    titles = {
        "a_quantization": ("(a) Quantization (p = 10)", "η", True),
        "b_mean_imputation": (
            "(b) Mean imputation (n = 100)",
            "fraction of rows with missing values",
            False,
        ),
        "c_pca_rank": ("(c) PCA rank reduction (δ_min^k = 1)", "n", True),
    }
    for ax, (panel, (title, xlabel, logx)) in zip(axes, titles.items()):
        d = frame[frame["panel"] == panel].sort_values("x")
        ax.plot(
            d["x"],
            d["srdp_table2_eps"],
            "-",
            color="C0",
            label="SRDP, Theorem 2 (Table-2 mode, α ≥ 11)",
        )
        ax.plot(
            d["x"],
            d["srdp_exact_eps"],
            "-.",
            color="C2",
            label="SRDP, Theorem 2 (exact, optimised p, q)",
        )
        # The paper's count as a wide pale band, the rigorous one dashed and dark on top: where they
        # coincide (PCA: Δ∞ = n, so k = n either way) both stay visible.
        ax.plot(
            d["x"],
            d["group_eps"],
            "-",
            color="C3",
            lw=4,
            alpha=0.35,
            label="group privacy, k = Δ∞ (paper's count)",
        )
        ax.plot(
            d["x"],
            d["group_k_plus_1_eps"],
            "--",
            color="darkred",
            lw=1.5,
            label="group privacy, k = min(Δ∞+1, n) (rigorous)",
        )
        if np.allclose(d["group_eps"], d["group_k_plus_1_eps"]):
            ax.annotate(
                "the two group-privacy counts coincide (Δ∞ = n)",
                (0.03, 0.97),
                xycoords="axes fraction",
                ha="left",
                va="top",
                fontsize=8.5,
                color="darkred",
            )
        ax.set_yscale("log")
        if logx:
            ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ε (δ = 1e-3)")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8.5, loc="upper left")
    fig.suptitle("Gaussian mechanism (ε = 1, Δ_f = 1, L = 1) after non-private pre-processing")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _lookup(frame: pd.DataFrame, panel: str, x: float) -> pd.Series:
    d = frame[(frame["panel"] == panel) & np.isclose(frame["x"], x, rtol=1e-9)]
    if len(d) != 1:
        raise ValueError(f"reference x={x} missing from panel {panel}")
    return d.iloc[0]


def comparisons(frame: pd.DataFrame, cfg: Fig2Config) -> list[Comparison]:
    out: list[Comparison] = []

    def closed(q: str, ref: str, ours: float) -> None:  # closed forms: the printed digits
        out.append(
            Comparison.numeric(
                q,
                float(ref),
                ours,
                abs_tol=_half_unit(ref),
                note="closed form; tol = half a unit of the printed last digit",
            )
        )

    def approx(q: str, ref: str, ours: float) -> None:  # numerically optimised: ±1 %
        out.append(
            Comparison.numeric(
                q, float(ref), ours, rel_tol=0.01, note="numerically optimised (spec: ±1%)"
            )
        )

    for k, ref in REF_QUANT_GROUP.items():
        d = frame[frame["panel"] == "a_quantization"].iloc[0]
        ours = d["group_eps"] if k == d["group_k"] else d["group_k_plus_1_eps"]
        closed(f"Fig 2a group privacy k={k}", ref, ours)
    for eta, ref in REF_QUANT_TABLE2.items():
        closed(
            f"Fig 2a SRDP Table-2 mode, eta={eta:g}",
            ref,
            _lookup(frame, "a_quantization", eta)["srdp_table2_eps"],
        )
    for eta, ref in REF_QUANT_EXACT.items():
        approx(
            f"Fig 2a SRDP exact mode, eta={eta:g}",
            ref,
            _lookup(frame, "a_quantization", eta)["srdp_exact_eps"],
        )
    out.append(
        Comparison.numeric(
            "Fig 2a crossover eta (Table-2 mode vs group k=10)",
            float(REF_QUANT_CROSSOVER),
            quantization_crossover(cfg),
            abs_tol=_half_unit(REF_QUANT_CROSSOVER),
            note="spec: SRDP better for eta ≲ 0.255",
        )
    )
    for frac, (srdp, group, ratio) in REF_IMPUTATION.items():
        r = _lookup(frame, "b_mean_imputation", frac)
        closed(f"Fig 2b SRDP Table-2 mode, missing={frac:g}", srdp, r["srdp_table2_eps"])
        closed(f"Fig 2b group k=p, missing={frac:g}", group, r["group_eps"])
        closed(
            f"Fig 2b ratio group/SRDP, missing={frac:g}",
            ratio,
            r["group_eps"] / r["srdp_table2_eps"],
        )
    for frac, ref in REF_IMPUTATION_EXACT.items():
        approx(
            f"Fig 2b SRDP exact mode, missing={frac:g}",
            ref,
            _lookup(frame, "b_mean_imputation", frac)["srdp_exact_eps"],
        )
    for n, (srdp, group) in REF_PCA.items():
        r = _lookup(frame, "c_pca_rank", n)
        closed(f"Fig 2c SRDP Table-2 mode, n={n}", srdp, r["srdp_table2_eps"])
        closed(f"Fig 2c group k=n, n={n}", group, r["group_eps"])
    pca = frame[frame["panel"] == "c_pca_rank"]
    lo, hi = REF_PCA_EXACT_RANGE
    ex_lo, ex_hi = float(pca["srdp_exact_eps"].min()), float(pca["srdp_exact_eps"].max())
    out.append(
        Comparison.claim(
            "Fig 2c SRDP exact mode lies in ≈133–136 (±1%)",
            "≈133–136",
            f"{ex_lo:.2f}–{ex_hi:.2f}",
            lo * 0.99 <= ex_lo and ex_hi <= hi * 1.01,
        )
    )
    # §11.6 qualitative claims.
    a = frame[frame["panel"] == "a_quantization"]
    small = a[a["x"] <= 0.1]
    out.append(
        Comparison.claim(
            "Fig 2a: SRDP beats group privacy for small eta (<= 0.1), both modes",
            "holds",
            f"{int((small['srdp_table2_eps'] < small['group_eps']).sum())}/{len(small)} Table-2"
            f" mode, {int((small['srdp_exact_eps'] < small['group_eps']).sum())}/{len(small)}"
            " exact",
            bool(
                (small["srdp_table2_eps"] < small["group_eps"]).all()
                and (small["srdp_exact_eps"] < small["group_eps"]).all()
            ),
        )
    )
    b = frame[(frame["panel"] == "b_mean_imputation") & (frame["x"] >= 0.1) & (frame["x"] <= 0.8)]
    out.append(
        Comparison.claim(
            "Fig 2b: SRDP beats group privacy for moderate missing fractions (0.1–0.8)",
            "holds",
            f"{int((b['srdp_table2_eps'] < b['group_eps']).sum())}/{len(b)} (Table-2 mode)",
            bool((b["srdp_table2_eps"] < b["group_eps"]).all()),
        )
    )
    srdp, group = pca["srdp_table2_eps"], pca["group_eps"]
    out.append(
        Comparison.claim(
            "Fig 2c: SRDP beats group privacy for all n >= 101 and stays flat",
            "holds",
            f"SRDP {srdp.min():.1f}–{srdp.max():.1f}, group ≥ {group.min():.0f}",
            bool((srdp < group).all() and srdp.max() / srdp.min() < 1.05),
        )
    )
    return out


def run(ctx: RunContext) -> list[Comparison]:
    cfg = Fig2Config(grid_points=PROFILE_GRID_POINTS[ctx.profile])
    g = grids(cfg)
    builders = {"a": panel_quantization, "b": panel_imputation, "c": panel_pca}
    frames = []
    for key, builder in builders.items():
        unit = f"fig2-{key}-{config_json(cfg)}"
        ctx.progress(f"panel {key}: {len(g[key])} points")
        record = ctx.store.run(unit, lambda b=builder, x=g[key]: b(x, cfg).to_dict(orient="list"))
        # Each panel's rows carry the provenance of the unit that computed them.
        frames.append(
            pd.DataFrame(record).assign(versions=provenance_json(ctx.store.provenance(unit)))
        )
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(len(frame.columns) - 1, "config", config_json(cfg))
    write_csv(frame, ctx.out_dir / "fig2.csv")
    plot(frame, ctx.out_dir / "fig2.png")
    return comparisons(frame, cfg)
