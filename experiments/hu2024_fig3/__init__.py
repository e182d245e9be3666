"""Hu, Sanyal, Schölkopf (2024) Figure 3: private logistic regression on approximately low-rank data
with non-private PCA, DP-PCA, no pre-processing and PTR (spec §9.2 protocol; every choice the paper
leaves open is the spec's [ASSUMPTION]).

Data: ``dpprep.data.synthetic.low_rank_logistic`` (unit ball, centred, rank k, r = 0.9, Λ0 = 0.1,
c = 4, fixed data seed); k is also every PCA's k: ``Fig3Config.k`` = 1 for the ``cases`` and
k = 2, 3 for the ``rank_cases`` (the paper states no k). Loss: logistic on ``ℋ = {‖θ‖ ≤ 1}`` (L = 1,
μ = 1.25). Trainer: full-batch
DP-GD with projection onto ℋ and averaged iterates, ``w_0 = 0``, T = 200, noise ``σ = L√T/(ε_b n)``
on the mean gradient. Metric: excess empirical risk ``ℓ̂_S(θ̂) − ℓ̂_S(θ*)`` on the **original** S,
``θ*`` the minimiser over the same ball (``dpprep.solvers.logistic_ball_optimum``: FISTA, float64
polish; its optimality gap is reported).
Methods at each overall (ε, δ = 1e−5):

- ``none`` (c): DP-GD at ``ε_b`` with Lemma M over all α (τ = 0); every DP-GD and DP-SGD noise is
  calibrated by the run's plan, ``plan.calibrate(ε, δ,
  accountant=meta.PreprocessedAccountant(...))``;
- ``pca`` (a): non-private PCA, **rank** (``x ↦ A_kA_kᵀx``) and **dim** (``x ↦ A_kᵀx``, train
  ``z ∈ R^k``, evaluate ``A_k z``), ``ε_b`` from Table 2's accounting (the accountant in
  ``mode="table2"``: Eq. 43, α ≥ 11) with the data's own eigen-gap as ``δ_min^k`` (τ* of Prop. 5;
  dim uses τ_dim = 2τ);
- ``dp_pca`` (b): Analyze-Gauss DP-PCA (``dpprep.preprocess.dp_pca``) at (ε/2, δ/2) and DP-GD at
  (ε/2, δ/2) (basic composition), rank and dim;
- ``ptr`` (d): Algorithm 1 (``dpprep.preprocess.ptr``) with β = ``beta_fraction``·δ_k(S) (a user's
  public guess,
  here set from the data: disclosed), its ε chosen so that Theorem 7's rigorous numeric level
  (spec §10.19) equals ε; DP-GD with the doubled noise; on ⊥ the learner outputs θ = 0 (counted).

Step size tuned per (method, variant, ε) over ``learning_rates`` by the mean excess risk over
seeds (non-private tuning, as customary; disclosed); the quick and paper profiles tune over
:data:`LEARNING_RATES` (1e-4 to 10 by half-decades), and a row counts the tuned points at the
grid's edges. Every (method × ε × seed × step size) of one (n, d, k) runs in three compiled
functions: ``sweep_points`` on the d-dim data (``none`` on S, ``pca``-rank and ``ptr`` on the
PCA-projected S; chunks of ε × step-size points), ``sweep_datasets`` on the per-(ε, seed) DP-PCA
rank projections (chunks bounded by :data:`DATASET_BYTES`) and one ``sweep_datasets`` call for
every k-dim run (``pca``-dim and ``dp_pca``-dim). Writes ``fig3.csv`` (every run),
``fig3_tuned.csv``, ``fig3.png`` (k = ``Fig3Config.k``) and ``fig3_ranks.png`` (the other k);
Comparison rows: per (n, d, k) whether (a) is best at each ε and below (c) (with numbers), the
grid-edge check, the calibrations of spec §11.3 and Theorem 7 / Proposition 8 of §11.5.

DP-SGD (the trainer of the paper's Figure 3; ``Fig3Config.trainers``, on in the quick and paper
profiles, rows tagged "DP-SGD variant"): Poisson
subsampling (B = 5 % of n, 10 epochs), clip norm 1 (= L), noise multiplier per method from Theorem 2
with :mod:`dpprep.preprocess.privacy.sgd_samp`'s rigorous replace-one RDP/SRDP ((a) in Table-2 mode
as for
DP-GD, (b) at (ε/2, δ/2)); no PTR (Theorem 7 covers DP-GD only); three more compiled functions.
"""

from __future__ import annotations

import pandas as pd

from experiments import RunContext
from experiments.results import Comparison, SweepUnit, config_json, provenance_json, write_csv

from .calibration import calibrations, dp_gd_config, dp_sgd_config, sgd_calibrations
from .compute import run_case
from .config import (
    DATASET_BYTES,
    LEARNING_RATES,
    METHODS,
    PROFILES,
    TRAINERS,
    Fig3Config,
    label,
)
from .plots import CUT_MARKER, plot
from .report import edge_row, tune, verdicts
from .report_accounting import spec_rows
from .training import train_methods

EXPERIMENT = "hu2024_fig3"
__all__ = [
    "CUT_MARKER",
    "DATASET_BYTES",
    "EXPERIMENT",
    "LEARNING_RATES",
    "METHODS",
    "PROFILES",
    "TRAINERS",
    "Fig3Config",
    "calibrations",
    "dp_gd_config",
    "dp_sgd_config",
    "edge_row",
    "label",
    "plot",
    "run",
    "run_case",
    "sgd_calibrations",
    "spec_rows",
    "train_methods",
    "tune",
    "verdicts",
]


def run(ctx: RunContext) -> list[Comparison]:
    """The profile's (n, d, k) cases as units, the table of every run and the tuned table, the
    figures, then the Figure 3 and accounting rows."""
    cfg = PROFILES[ctx.profile]
    # SweepUnit: run_all --validate runs each case at its shapes with few steps (run_case's limits).
    items = [
        (
            f"fig3-{n}-{d}" + ("" if k == cfg.k else f"-k{k}") + f"-{config_json(cfg)}",
            SweepUnit(
                lambda n=n, d=d, k=k, **limits: run_case(cfg, n, d, ctx.progress, k=k, **limits)
            ),
        )
        for n, d, k in cfg.all_cases()
    ]
    ctx.progress(
        f"{len(items)} (n, d, k) cases × {len(METHODS)} methods × {len(cfg.epsilons)} ε ×"
        f" {cfg.seeds} seeds × {len(cfg.learning_rates)} step sizes"
    )
    cases = ctx.store.run_many(items)
    frames = [
        pd.DataFrame(c["rows"]).assign(versions=provenance_json(ctx.store.provenance(key)))
        for (key, _), c in zip(items, cases)
    ]
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(len(frame.columns) - 1, "config", config_json(cfg))
    write_csv(frame, ctx.out_dir / "fig3.csv")
    tuned = tune(frame)
    write_csv(tuned, ctx.out_dir / "fig3_tuned.csv")
    # Figure 3 at the profile's k; the other ranks in a figure of their own.
    plot(tuned[tuned.k == cfg.k], ctx.out_dir / "fig3.png")
    if cfg.rank_cases:
        plot(tuned[tuned.k != cfg.k], ctx.out_dir / "fig3_ranks.png")
    return verdicts(cfg, tuned, cases) + spec_rows(cfg, cases)
