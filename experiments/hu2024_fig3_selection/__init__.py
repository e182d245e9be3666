"""Hu et al. 2024 Figure 3 with the step size selected privately: method (c), no pre-processing,
with the tuning paid at END-TO-END ε, beside the customary non-private tuning.

``hu2024_fig3`` tunes DP-GD's step size per (method, ε) by the mean excess risk over seeds, on
the private data, and charges only the training run. Here method (c) picks its step size by
private random search (:func:`dpprep.selection.select`): a validation split of
``validation_size`` rows is carved from S, ``K ~`` geometric with mean ``mean_candidates``, each
candidate a uniformly drawn step size of the grid, trained by full-batch projected, averaged
DP-GD on the rest and scored by a noisy count of correct validation predictions; the training
noise is calibrated so that the WHOLE procedure is (ε, 1e-5)-DP (RDP; dp-accounting's
``RepeatAndSelectDpEvent``; replace-one, as Fig 3).

What ``select`` supports, used as it is: the learner is Fig 3's logistic model (labels in
{0, 1}, a classifier to dpprep), so the private score is validation **accuracy**, not the excess
risk Fig 3 plots; the selected model is then measured as Fig 3 measures it: excess empirical risk
on the original S (``ℓ̂_S(θ̂) − ℓ̂_S(θ*)``, θ* over the unit ball). ``select`` takes DP-GD's noise
as a multiplier of a clip norm, so every run here (both protocols) is DP-GD with per-example
clipping at C = 1 = L, which never bites (‖∇ℓ‖ ≤ ‖x‖ ≤ 0.9 on this data), and noise ``z·C/n`` on
the mean gradient, accounted by dp-accounting (``fig3``'s (c) uses Lemma M over all α: its noise
differs slightly, so the non-privately tuned baseline is recomputed here with this accountant).

Rows (info): per (n, d, ε) the mean ± s.d. over seeds of the excess risk with the tuning paid
(end-to-end ε) beside the non-privately tuned one (training-only ε; tuned by the mean excess
risk over the same seeds, as ``fig3``), the training noise each needs, and the step sizes chosen.
Figure ``fig3_selection.png``. Method (a), non-private PCA, is NOT run with selection: see the row
"(a) with tuning paid" (its pipeline is accounted by Hu et al.'s Theorem 2, which needs the
mechanism's SRDP; a private selection's SRDP is not available, and group privacy at the data's
Δ∞ ≈ 15 (group size 16) leaves nothing at these ε).

Profiles: ``smoke`` n = 300, d = 20, one ε; ``quick`` n = 2000, d ∈ {500, 2000} (fig3's cases),
ε ∈ {1, 2, 4, 8}, 5 seeds, fig3's quick grid (0.1, 0.3, 1, 3), T = 200, 400 validation rows,
score noise 10 (2.5 pp of accuracy), K mean 4: 2 units, 40 selections of K candidates each plus
one 80-run sweep per case.

Quick result (mean ± s.d. over 5 seeds, excess risk): paying for the tuning costs 2–10× in excess
risk at every ε and both d (e.g. n = 2000, d = 500: ε = 1, 0.266 ± 0.041 paid vs 0.044 ± 0.001
tuned non-privately; ε = 8, 0.028 ± 0.015 vs 0.0074). Three things contribute: more training
noise (z 309 vs 106 at ε = 1, 26 vs 17 at ε = 8), 400 fewer training rows, and a score
(validation accuracy) that ranks step sizes poorly for the excess risk: 11 of the 20 selections
pick 1 or 3, where 0.1 or 0.3 is best by the mean excess risk at every ε. The seeds' keys do not
depend on d, so the two cases share K and the chosen step sizes per (ε, seed).
"""

from __future__ import annotations

import dataclasses
import hashlib

import pandas as pd

from experiments import RunContext
from experiments.results import Comparison, config_json, provenance_json, write_csv

from .compute import plan_options, run_case, selection_of, train_config
from .config import DELTA, PROFILES, SEED, SelectionConfig
from .plots import plot
from .report import comparisons, summarise

EXPERIMENT = "hu2024_fig3_selection"
__all__ = [
    "DELTA",
    "EXPERIMENT",
    "PROFILES",
    "SEED",
    "SelectionConfig",
    "comparisons",
    "plan_options",
    "plot",
    "run",
    "run_case",
    "selection_of",
    "summarise",
    "train_config",
]


def run(ctx: RunContext) -> list[Comparison]:
    """One unit per (n, d) case, the table of runs (K left out) and the summary, the figure, then
    the comparison rows."""
    scfg = PROFILES[ctx.profile]
    cfg = scfg.fig3
    tag = config_json(dataclasses.asdict(scfg))
    digest = hashlib.sha1(tag.encode()).hexdigest()[:10]
    items = [
        (f"fig3-selection-{n}-{d}-{digest}", lambda n=n, d=d: run_case(scfg, n, d))
        for n, d in cfg.cases
    ]
    cases = ctx.store.run_many(items)
    frame = pd.concat(
        [
            pd.DataFrame(c["rows"]).assign(versions=provenance_json(ctx.store.provenance(key)))
            for (key, _), c in zip(items, cases)
        ],
        ignore_index=True,
    )
    frame.insert(len(frame.columns) - 1, "config", tag)
    # K, the number of candidates a selection drew, is part of its secret randomness: its ε holds
    # for
    # the selected candidate's output only, so K stays in the unit files and out of what is
    # published.
    write_csv(frame.drop(columns=["num_candidates"]), ctx.out_dir / "runs.csv")
    summary = summarise(frame)
    write_csv(summary, ctx.out_dir / "summary.csv")
    plot(summary, ctx.out_dir / "fig3_selection.png")
    return comparisons(scfg, summary)
