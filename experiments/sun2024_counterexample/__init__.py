"""Sun, Suresh, Menon (2024) §4 / Appendix A: the counter-example (spec §3.5, E1 and E2).

Data D' = n/2 × ((μ, +1), +1) ∪ n/2 × ((μ, −1), −1), hinge loss, no bias, w_0 = 0 (with w_0 = 0
D'' is D's mirror image, so D' suffices). Both experiments run the exact type-collapsed simulation
(:func:`dpprep.dpsgdf.theory.simulate_types`: a batch is a count per type), whose agreement with
the per-example path given the same draws is a unit test; here it is also cross-checked in
distribution at small n (``crosscheck.csv``).

* **E1** (Algorithm 1 as printed, C9): n ∈ {10³, 10⁴}, ε ∈ {0.5, 1, 2}, δ = 1e-5,
  μ ∈ {10², …, 10⁵}, C ∈ {0.1, 1, 10, sqrt(μ²+1)}, η ∈ {0.01, 0.1, 1, 10}, T ∈ {10, 100, 1000},
  B = ⌈max{n·sqrt(ε/(4T)), 1}⌉ with replacement, average iterate. Check, in every cell, the
  empirical Pr(w̄_T(2) ≤ 0) ≥ Φ(−nε/(μ·sqrt(8 ln(1/δ)))) − 3·(MC s.e.), and mean excess loss ≥
  that probability (Lemma 2).
* **E2** (C10): DPSGD (Poisson, PLD or exact q = 1 calibration; C × η × T × q), DPSGD-F
  (Algorithm 2 with the surrogates, (ε/3, δ/3) per stage, clip √2τ, step η/τ²; η × T × q) and an
  Algorithm-3-like arm (Gaussian mean with sensitivity R at ε_F = 0.1 and δ/2, translation, a
  constant-1 feature, DP-SGD at (ε − 0.1, δ/2)); best configuration per arm (mean over seeds),
  excess loss and accuracy against nε/μ (``e2.png``). Acceptance: at n = 10⁴, ε = 1, μ ≥ 10⁴,
  DPSGD-F's best accuracy ≥ 0.95 and loss ≤ 0.1, DPSGD's best accuracy ≤ 0.6 and loss ≥ 0.9.

Profiles: smoke (one cell of each, few repetitions), quick (E1: the full grid of spec §3.5 with
2000 repetitions per cell; E2: ε = 1, n ∈ {10³, 10⁴}, μ ∈ {10, …, 10⁶}, 20 seeds, T ∈ {100, 1000},
q ∈ {0.1, 1}), paper (E2 also at ε ∈ {0.5, 2}, n = 10⁵ and T = 10⁴): :mod:`.config`.
E1's units are :mod:`.e1`, E2's :mod:`.e2`; the acceptance thresholds are in ``targets.csv``.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pandas as pd

from experiments import RunContext
from experiments.results import Comparison, config_json, provenance_json, write_csv
from experiments.targets import paper_targets

from . import report
from .config import CFGS, DELTA, Cfg
from .e1 import crosscheck, e1_cell
from .e2 import e2_cell
from .plots import plot

__all__ = ["CFGS", "DELTA", "Cfg", "crosscheck", "e1_cell", "e2_cell", "plot", "run"]


def _e1(ctx: RunContext, cfg: Cfg) -> pd.DataFrame:
    """E1's cells, each cell that falls below the bound confirmed by a larger re-run."""
    rows = []
    cells = [
        (n, e, m, t) for n in cfg.e1_n for e in cfg.e1_eps for m in cfg.e1_mu for t in cfg.e1_T
    ]
    start = time.perf_counter()
    for i, (n, e, m, t) in enumerate(cells):
        rows += ctx.store.run(
            f"e1/{n}/{e}/{m}/{t}/{cfg.e1_reps}/{cfg.e1_lr}",
            lambda n=n, e=e, m=m, t=t, i=i: {"rows": e1_cell(n, e, m, t, cfg, 1000 + i)},
        )["rows"]
    e1 = pd.DataFrame(rows)
    # Over ~1,100 cells, a few where the bound is tight (nε/μ ≈ 0: p ≈ bound ≈ ½) fall below
    # bound − 3 s.e. by chance (each with probability ~0.1 %). Every such cell is re-run once with
    # 10× the repetitions and a fresh seed, and judged on that run; both stages are recorded.
    e1["first_stage_holds"] = e1["holds"]
    for idx in e1.index[~e1["holds"].astype(bool)]:
        r = e1.loc[idx]
        big = dataclasses.replace(cfg, e1_lr=(float(r["lr"]),), e1_reps=10 * cfg.e1_reps)
        rec = ctx.store.run(
            f"e1-confirm/{r.n}/{r.epsilon}/{r.mu}/{r['T']}/{r.lr}/{big.e1_reps}",
            lambda r=r, big=big: {
                "rows": e1_cell(
                    int(r.n), float(r.epsilon), float(r.mu), int(r["T"]), big, 99_000 + int(idx)
                )
            },
        )["rows"]
        again = next(x for x in rec if math.isclose(x["C"], r.C))
        e1.loc[idx, ["confirm_p", "confirm_se", "confirm_reps"]] = (
            again["p_w2_le_0"],
            again["se"],
            again["reps"],
        )
        e1.loc[idx, "holds"] = again["holds"]
    e1["config"] = config_json(dataclasses.asdict(cfg))
    e1["versions"] = provenance_json()
    write_csv(e1, ctx.out_dir / "e1.csv")
    ctx.progress(f"E1: {len(e1)} cells in {time.perf_counter() - start:.1f}s")
    return e1


def run(ctx: RunContext) -> list[Comparison]:
    cfg = CFGS[ctx.profile]
    e1 = _e1(ctx, cfg)
    cc = ctx.store.run("crosscheck", crosscheck)
    comps = report.e1_rows(e1, cc, cfg)
    write_csv(pd.DataFrame([cc]), ctx.out_dir / "crosscheck.csv")
    # E2
    best = []
    cells = [(n, m, e) for n in cfg.e2_n for m in cfg.e2_mu for e in cfg.e2_eps]
    for i, (n, m, e) in enumerate(ctx.progress.track(cells, "E2 cell")):
        rec = ctx.store.run(
            f"e2/{n}/{m}/{e}/{cfg.e2_seeds}/{cfg.e2_T}/{cfg.e2_q}/{cfg.e2_lr}/{cfg.grid_points}",
            lambda n=n, m=m, e=e, i=i: e2_cell(n, m, e, cfg, 5000 + i),
        )
        best += rec["best"]
    e2 = pd.DataFrame(best)
    write_csv(e2, ctx.out_dir / "e2.csv")
    plot(e2, ctx.out_dir / "e2.png", cfg)
    return comps + report.e2_rows(e2, paper_targets(__name__), cfg)
