"""Empirical privacy audit of every dpprep learner: ε lower bounds beside the theory.

Each unit is one :func:`dpprep.auditing.audit`: a learner calibrated to a target ε (δ = 1e-5),
trained ``pilot + runs`` times per world (canary in / out) as vmapped chunks of one compiled call,
scored by the threat model's attack; the Gaussian-DP and Clopper–Pearson lower bounds (95 %
confidence) are set beside the ε the learner's guarantee gives the canary pair. Targets
(``targets.csv``): white-box DP-GD's GDP bound ≥ 0.8 of ε at ε ∈ {1, 2, 4}; white-box Poisson
DP-SGD ≥ 0.6; no bound above its theoretical ε; a deliberately broken learner (half the noise its
accountant assumes) is caught. Outputs ``audit.csv``, ``audit.png`` and REPORT rows. An audit is a
lower bound, never a certificate (see :mod:`dpprep.auditing`).

The bug catalogue: each ``(learner, bug)`` of :data:`CATALOGUE` is audited with the bug planted in
dpprep's library code (:func:`experiments.audit.inject.inject`) at the learner's audit settings; a
bug is *caught* when any test of the verdict refutes the claim (:attr:`AuditResult.caught_by`: a
rigorous bound — Clopper–Pearson, GDP for full-batch learners, the trade-off test against the
yardstick's curve —, the noise test, or a deterministic check of the plan against the independent
yardstick). Outputs ``catalogue.md`` (bug × learner × rigorous bound × held-to ε × caught? × caught
by × runs × seconds × why not, then the catalogue per path: which test catches what) and one
REPORT row per entry; a missed row's note gives the measured reason (:data:`NOT_CATCHABLE`). Every
honest audit (every learner and path) is repeated at ``Profile.honest_seeds`` (quick: 5 seeds,
225 audits) for the false-alarm rates in ``alarms.md``: an honest learner is suspected with
probability ≤ 5 % and reported as a violation with probability ≤ 1e-3 (confirmed on fresh runs).

Layout: ``config.py`` (shapes, catalogue, profiles), ``units.py`` (the plan of audits and one
unit), ``bugs.py`` and ``patches.py`` (the planted bugs), ``report.py`` (REPORT rows and
``catalogue.md``), ``plots.py`` (the figure), ``targets.csv`` (the ratio targets).
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd

from experiments import RunContext
from experiments.results import Comparison, provenance_json, write_csv

from .bugs import BUGS
from .inject import audit_with_bug
from .notes import NOT_CATCHABLE
from .config import (
    CATALOGUE,
    EPSILONS,
    FINAL_MODEL_ONLY,
    PIPELINE_EPSILONS,
    PROFILES,
    SHAPES,
    TITLES,
    Profile,
)
from .paths import path_of
from .plots import plot
from .alarms import alarms_table
from .report import catalogue_by_path, catalogue_table, comparisons
from .units import bug_of, configs, run_unit, unit_key


def run(ctx: RunContext) -> list[Comparison]:
    """The profile's audits as units, then ``audit.csv``, ``audit.png``, ``catalogue.md`` and the
    REPORT rows."""
    profile = PROFILES[ctx.profile]
    plan = configs(profile)
    keys = [unit_key(role, cfg) for role, cfg in plan]
    values = ctx.store.run_many(
        [
            (key, (lambda cfg=cfg, role=role: run_unit(ctx, cfg, bug_of(role))))
            for key, (role, cfg) in zip(keys, plan)
        ]
    )
    rows = []
    for key, (role, cfg), value in zip(keys, plan, values):
        rows.append(
            {
                "role": role,
                "path": path_of(cfg),
                **value,
                "config": json.dumps(dataclasses.asdict(cfg), sort_keys=True),
                "versions": provenance_json(ctx.store.provenance(key)),
            }
        )
    frame = pd.DataFrame(rows)
    write_csv(frame, ctx.out_dir / "audit.csv")
    plot(frame, ctx.out_dir / "audit.png")
    catalogue = frame[frame["role"].str.startswith("bug:")]
    (ctx.out_dir / "catalogue.md").write_text(
        catalogue_table(catalogue) + "\n" + catalogue_by_path(catalogue), encoding="utf-8"
    )
    (ctx.out_dir / "alarms.md").write_text(
        alarms_table(frame[frame["role"] == "honest"]), encoding="utf-8"
    )
    return comparisons(frame)


__all__ = [
    "BUGS",
    "CATALOGUE",
    "EPSILONS",
    "FINAL_MODEL_ONLY",
    "NOT_CATCHABLE",
    "PIPELINE_EPSILONS",
    "PROFILES",
    "SHAPES",
    "TITLES",
    "Profile",
    "audit_with_bug",
    "bug_of",
    "alarms_table",
    "catalogue_by_path",
    "catalogue_table",
    "comparisons",
    "configs",
    "plot",
    "run",
    "run_unit",
    "unit_key",
]
