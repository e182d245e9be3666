"""Experiment registry: one module per paper table/figure, each runnable alone.

Every experiment module exposes ``run(ctx: RunContext) -> list[Comparison]`` and ends with
``if __name__ == "__main__": main_for("<id>")``.
It writes its tables/figures into ``ctx.out_dir`` through ``dpprep.results`` (atomic writes), caches
each finished unit of work in ``ctx.store`` and returns the paper-vs-ours rows for REPORT.md.
Run one alone with ``python -m experiments.<module> [--profile P] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from pathlib import Path
from types import ModuleType

from dpprep.results import Comparison, Progress, UnitStore, comparisons_frame, write_csv

PROFILES = ("smoke", "quick", "paper")

# Experiment id -> (module under experiments/, one-line title). Order is the order of REPORT.md.
REGISTRY: dict[str, tuple[str, str]] = {
    "datasets": ("experiments.datasets", "Every dataset: rows, columns, class balance, feature norms"),
    "hu2024_table1": ("experiments.hu2024_table1", "Hu et al. 2024 Table 1: RDP and SRDP of six mechanisms"),
    "hu2024_table2": ("experiments.hu2024_table2", "Hu et al. 2024 Table 2: overall RDP of pre-processed pipelines"),
    "hu2024_table3": ("experiments.hu2024_table3", "Hu et al. 2024 Table 3: imputation sensitivities"),
    "hu2024_fig2": ("experiments.hu2024_fig2", "Hu et al. 2024 Figure 2: SRDP vs group privacy"),
    "hu2024_pipeline_demo": ("experiments.hu2024_pipeline_demo", "Worked example: overall privacy of a pre-processed Adult pipeline"),
    "sun2024_accounting": ("experiments.sun2024_accounting", "Sun et al. 2024 (DPSGD-F): sigma_F, the z table, PLD vs RDP, the cost of eps_F (C1-C4)"),
    "sun2024_table2": ("experiments.sun2024_table2", "Sun et al. 2024 Table 2: diameter and distances to the mean (C5, C6)"),
    "sun2024_table1": ("experiments.sun2024_table1", "Sun et al. 2024 Table 1: DPSGD vs DPSGD-F vs non-private SGD (C11-C16)"),
    "sun2024_counterexample": ("experiments.sun2024_counterexample", "Sun et al. 2024 Sections 3-4: the counter-example (E1, E2; C9, C10)"),
}


def title(experiment_id: str) -> str:
    return REGISTRY[experiment_id][1]


@dataclasses.dataclass(frozen=True)
class RunContext:
    profile: str
    out_dir: Path
    store: UnitStore
    progress: Progress
    data_dir: Path | None = None


def load(experiment_id: str) -> ModuleType:
    if experiment_id not in REGISTRY:
        raise ValueError(f"unknown experiment {experiment_id!r}; known: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[experiment_id][0])


def run_experiment(
    experiment_id: str,
    profile: str,
    results_dir: Path,
    *,
    fresh: bool = False,
    data_dir: Path | None = None,
    quiet: bool = False,
) -> list[Comparison]:
    """Runs one experiment into ``results_dir/<id>/`` and writes its ``comparisons.csv``."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    module = load(experiment_id)
    out_dir = Path(results_dir) / experiment_id
    out_dir.mkdir(parents=True, exist_ok=True)
    # Unit caches are keyed by profile so a smoke run never satisfies a paper run.
    store = UnitStore(out_dir / ".units" / profile, fresh=fresh)
    ctx = RunContext(profile, out_dir, store, Progress(experiment_id, quiet=quiet), data_dir)
    comparisons = list(module.run(ctx))
    frame = comparisons_frame(comparisons)
    frame.insert(0, "profile", profile)
    write_csv(frame, out_dir / "comparisons.csv")
    return comparisons


def main_for(experiment_id: str) -> None:
    """``python -m experiments.<module>`` entry point."""
    parser = argparse.ArgumentParser(description=f"Run experiment {experiment_id!r} alone.")
    parser.add_argument("--profile", choices=PROFILES, default="quick")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--fresh", action="store_true", help="ignore finished units of work")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    comparisons = run_experiment(experiment_id, args.profile, args.out, fresh=args.fresh, data_dir=args.data_dir)
    for c in comparisons:
        print(f"{c.status:5s} {c.quantity}: paper {c.paper} | ours {c.measured} ({c.tolerance})")
