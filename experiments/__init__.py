"""The experiments: one package per paper table/figure (``experiments/<id>/``), each runnable alone
with ``python -m experiments.<id> [--profile P] [--out DIR] [--verbose]``.

Every experiment package exposes ``run(ctx: RunContext) -> list[Comparison]``. It writes its
tables/figures into ``ctx.out_dir`` through ``experiments.results`` (atomic writes), caches each
finished unit of work in ``ctx.store`` (grids through ``ctx.store.run_many``, which ``run_all
--shard`` spreads over machines) and returns the paper-vs-ours rows for REPORT.md, read against
its ``targets.csv``. A table's ``versions`` column says what produced each row:
``provenance_json(ctx.store.provenance(key))`` for a row from unit ``key`` (computed now or by an
earlier run), ``provenance_json()`` for a row computed now without a unit. A grid unit whose work
is sweeps should be an ``experiments.results.SweepUnit`` (``run_groups``' units are), so ``run_all
--validate`` can run it at its real shapes with few steps (``experiments.planning``); ``--plan``
reads the experiment's profile through its ``cost.py``. Progress needs nothing from an experiment:
the store's units drive the bar; ``ctx.progress(msg)`` lines are details (shown with
``--verbose``), ``ctx.progress.track(items, label)`` makes a loop's items steps of the bar.

This module holds the registry (the profiles, the registered experiments in REPORT.md's order,
which have no grid to split over shards) and re-exports the runner (:mod:`experiments.runner`).
Neither is part of any unit's digest (``experiments.results.identity``): renaming a title
recomputes nothing.
"""

from __future__ import annotations

from pathlib import Path

PROFILES = ("smoke", "quick", "paper")
# Written into results/<id>/ when the experiment's latest run failed (removed when one succeeds), so
# REPORT.md never presents an earlier run's numbers as current.
FAILURE_FILE = "FAILED.txt"
COMMITTED_PROFILE = "quick"  # the profile whose outputs are committed in results/


def default_out(profile: str) -> Path:
    """results/ for the committed profile, results-<profile>/ for the others (git-ignored, except
    results-paper/'s outputs without their units), so a smoke or paper run never silently replaces
    the committed quick numbers."""
    return Path("results" if profile == COMMITTED_PROFILE else f"results-{profile}")


# Experiment id -> (module under experiments/, one-line title). Order is the order of REPORT.md.
REGISTRY: dict[str, tuple[str, str]] = {
    "datasets": (
        "experiments.datasets",
        "Every dataset: rows, columns, class balance, feature norms",
    ),
    "hu2024_table1": (
        "experiments.hu2024_table1",
        "Hu et al. 2024 Table 1: RDP and SRDP of six mechanisms",
    ),
    "hu2024_table2": (
        "experiments.hu2024_table2",
        "Hu et al. 2024 Table 2: overall RDP of pre-processed pipelines",
    ),
    "hu2024_table3": (
        "experiments.hu2024_table3",
        "Hu et al. 2024 Table 3: imputation sensitivities",
    ),
    "hu2024_fig2": ("experiments.hu2024_fig2", "Hu et al. 2024 Figure 2: SRDP vs group privacy"),
    "hu2024_pipeline_demo": (
        "experiments.hu2024_pipeline_demo",
        "Worked example: overall privacy of a pre-processed Adult pipeline",
    ),
    "hu2024_fig3": (
        "experiments.hu2024_fig3",
        "Hu et al. 2024 Figure 3: non-private PCA vs DP-PCA vs none vs PTR on low-rank data",
    ),
    "hu2024_fig3_selection": (
        "experiments.hu2024_fig3_selection",
        "Hu et al. 2024 Figure 3 (c) with the step size selected privately, tuning paid",
    ),
    "sun2024_accounting": (
        "experiments.sun2024_accounting",
        "Sun et al. 2024 (DPSGD-F): sigma_F, the z table, PLD vs RDP, the cost of eps_F (C1-C4)",
    ),
    "sun2024_table2": (
        "experiments.sun2024_table2",
        "Sun et al. 2024 Table 2: diameter and distances to the mean (C5, C6)",
    ),
    "sun2024_table1": (
        "experiments.sun2024_table1",
        "Sun et al. 2024 Table 1: DPSGD vs DPSGD-F vs non-private SGD (C11-C16)",
    ),
    "sun2024_selection": (
        "experiments.sun2024_selection",
        ("Sun et al. 2024 Table 1 with the tuning paid: DPSGD-F vs DPSGD at end-to-end epsilon"),
    ),
    "sun2024_counterexample": (
        "experiments.sun2024_counterexample",
        "Sun et al. 2024 Section 4 / App. A: the counter-example (E1, E2; C9, C10)",
    ),
    "wang2026_table2": (
        "experiments.wang2026_table2",
        (
            "Wang et al. 2026 Table 2 / App. E: the paper's TV factors beside our estimators (items"
            " 9-13)"
        ),
    ),
    "wang2026_checks": (
        "experiments.wang2026_checks",
        "Wang et al. 2026: definition, data and mechanism checks (items 1-8, 14, 24, 25)",
    ),
    "wang2026_fig1": (
        "experiments.wang2026_fig1",
        (
            "Wang et al. 2026 Figure 1: CorrDP-SGD vs Standard / Semi / Partial, panels a-f (items"
            " 14-22)"
        ),
    ),
    "wang2026_selection": (
        "experiments.wang2026_selection",
        (
            "Wang et al. 2026 Figure 1 (b), (d) with C selected privately, paid: "
            "standard-DP epsilon of selection + training"
        ),
    ),
    "wang2026_fig2": (
        "experiments.wang2026_fig2",
        "Wang et al. 2026 Figure 2: synthetic m_s sweep (item 23)",
    ),
    "audit": (
        "experiments.audit",
        "Privacy audit of every learner: empirical epsilon lower bounds vs theory",
    ),
}


# Experiments with no ``run_many`` grid (their units go through ``store.run`` one after another,
# each
# needing the last). ``run_all --shard K/N`` cannot split them unit by unit, so each is run whole
# by one shard (:func:`whole_owner`) and skipped by the others; before, every shard computed all of
# them. tests/test_run_all.py checks this set against the modules' sources.
UNSHARDED = frozenset(
    {
        "datasets",
        "hu2024_table1",
        "hu2024_table2",
        "hu2024_table3",
        "hu2024_fig2",
        "hu2024_pipeline_demo",
        "sun2024_accounting",
        "sun2024_table2",
        "sun2024_counterexample",
        "wang2026_table2",
        "wang2026_checks",
        "wang2026_fig2",
    }
)


def whole_owner(experiment_id: str, n: int) -> int:
    """The shard (1-based, of ``n``) that runs an :data:`UNSHARDED` experiment whole: round robin in
    registry order (the same in every job, whatever its ``--only``)."""
    whole = [e for e in REGISTRY if e in UNSHARDED]
    return whole.index(experiment_id) % n + 1


def title(experiment_id: str) -> str:
    return REGISTRY[experiment_id][1]


# The runner looks the registry up here at call time (``experiments.REGISTRY``), so it comes last.
from experiments.runner import (  # noqa: E402
    ExperimentElsewhere,
    RunContext,
    disk_full,
    disk_full_message,
    load,
    main_for,
    run_experiment,
    unit_source,
    unwritable,
)

__all__ = [
    "COMMITTED_PROFILE",
    "FAILURE_FILE",
    "PROFILES",
    "REGISTRY",
    "UNSHARDED",
    "ExperimentElsewhere",
    "RunContext",
    "default_out",
    "disk_full",
    "disk_full_message",
    "load",
    "main_for",
    "run_experiment",
    "title",
    "unit_source",
    "unwritable",
    "whole_owner",
]
