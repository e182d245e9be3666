"""Hu, Sanyal, Schölkopf (2024) Figure 2: SRDP-based (Theorem 2) vs group-privacy analysis.

Pre-processed Gaussian mechanism ``f(S) + N(0, Δ_f²/ε²)``, ``f`` 1-Lipschitz, ``Δ_f = 1``,
``ε = 1``; y = final ε_DP at δ = 1e−3 via Lemma M (spec §7 reconstruction — the paper states
neither axes nor parameters). Three panels:

(a) quantization vs η ∈ [1e−3, 1], Δ∞ = p = 10, τ = ηp;
(b) mean imputation vs missing fraction p/n, n = 100, τ = 2p/(n−p);
(c) PCA rank reduction vs n ∈ [101, 1e4], δ_min^k = 1, τ = 4(3n+2)/((n−1)δ).

Curves: Theorem 2 in "Table-2 mode" (Eq. 43, constant 1.05, α ≥ 11; spec default) and in exact mode
(Eq. 3, Hölder exponents optimised, max of the branches, Lemma M over all α > 1); group privacy with
the exact Gaussian group RDP ``αk²ε²/2`` (closed form ``renyi.gaussian_group_epsilon``) for
``k = Δ∞`` (the paper's count, which spec §11.4 reproduces; not a valid guarantee) and
``k = min(Δ∞+1, n)`` (the rigorous count and ``meta.overall_privacy``'s default, dashed). One unit
per panel (:mod:`.compute`); writes ``fig2.png`` (:mod:`.plots`) and ``fig2.csv``; compares with
spec §11.4 (``targets.csv``, :mod:`.report`).
"""

from __future__ import annotations

import pandas as pd

from experiments import RunContext
from experiments.results import Comparison, config_json, provenance_json, write_csv
from experiments.targets import paper_targets

from .compute import (
    evaluate_point,
    grids,
    panel_imputation,
    panel_pca,
    panel_quantization,
    quantization_crossover,
)
from .config import PROFILE_GRID_POINTS, Fig2Config
from .plots import plot
from .report import comparisons

__all__ = [
    "PROFILE_GRID_POINTS",
    "Fig2Config",
    "comparisons",
    "evaluate_point",
    "grids",
    "panel_imputation",
    "panel_pca",
    "panel_quantization",
    "plot",
    "quantization_crossover",
    "run",
]


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
    return comparisons(frame, cfg, paper_targets(__name__))
