"""Experiment registry: one module per paper table/figure, each runnable alone.

Every experiment module exposes ``run(ctx: RunContext) -> list[Comparison]`` and ends with
``if __name__ == "__main__": main_for("<id>")``.
It writes its tables/figures into ``ctx.out_dir`` through ``experiments.results`` (atomic writes),
caches each finished unit of work in ``ctx.store`` (grids through ``ctx.store.run_many``, which
``run_all --shard`` spreads over machines) and returns the paper-vs-ours rows for REPORT.md.
A table's ``versions`` column says what produced each row:
``provenance_json(ctx.store.provenance(key))``
for a row from unit ``key`` (computed now or by an earlier run), ``provenance_json()`` for a row
computed now without a unit.
A grid unit whose work is sweeps should be an ``experiments.results.SweepUnit`` (``run_groups``'
units are), so ``run_all --validate`` can run it at its real shapes with few steps
(``experiments/planning.py``; ``--plan`` reads the experiment's profile through a cost model there).
Progress needs nothing from an experiment: the store's units drive the bar; ``ctx.progress(msg)``
lines are details (shown with ``--verbose``), ``ctx.progress.track(items, label)`` makes a loop's
items steps of the bar.
Run one alone with ``python -m experiments.<module> [--profile P] [--out DIR] [--verbose]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import importlib
import logging
import os
import tempfile
from pathlib import Path
from types import ModuleType

from dpprep.accounting.dp import ENV_CALIBRATION_CACHE
from experiments.results import (
    Comparison,
    Progress,
    UnitsElsewhere,
    UnitStore,
    atomic_write_text,
    comparisons_frame,
    experiment_digest,
    write_csv,
)

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
        "Hu et al. 2024 Figure 3 (c) with the step size selected privately, tuning paid (issue 22)",
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
        (
            "Sun et al. 2024 Table 1 with the tuning paid: DPSGD-F vs DPSGD at end-to-end epsilon"
            " (issue 22)"
        ),
    ),
    "sun2024_counterexample": (
        "experiments.sun2024_counterexample",
        "Sun et al. 2024 Sections 3-4: the counter-example (E1, E2; C9, C10)",
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
            "standard-DP epsilon of selection + training (issue 22)"
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


class ExperimentElsewhere(UnitsElsewhere):
    """Shard mode: an experiment without a grid, run whole by another shard."""

    def __init__(self, experiment_id: str, owner: int, shard: tuple[int, int]):
        self.pending, self.shard = {owner: 1}, shard
        RuntimeError.__init__(
            self,
            f"skipped: {experiment_id} has no grid to split, so shard {owner}/{shard[1]} "
            "runs it whole",
        )


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(err: BaseException | None) -> OSError | None:
    """The "no space left on device" (or quota) error behind ``err`` — itself or what caused it,
    e.g. inside matplotlib's or pandas' own errors — or None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _DISK_FULL:
            return err
        err = err.__cause__ or err.__context__
    return None


def disk_full_message(err: OSError) -> str:
    """One line for a full disk: what happened, that nothing finished is lost, how to go on."""
    where = f" writing {err.filename}" if err.filename else ""
    return (
        f"the disk is full ({err.strerror or os.strerror(err.errno)}{where}); every finished unit"
        " of work is kept (files are replaced whole, never half-written): free some space and"
        " rerun to resume"
    )


def unwritable(out: Path) -> str | None:
    """Why nothing can be written into ``out`` (checked once, before hours of computing), or
    None."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a directory"
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return f"cannot write into --out {out}: {err.strerror or err}"
    return None


def title(experiment_id: str) -> str:
    return REGISTRY[experiment_id][1]


@dataclasses.dataclass(frozen=True)
class RunContext:
    profile: str
    out_dir: Path
    store: UnitStore
    progress: Progress
    data_dir: Path | None = None


class _ConvergenceNoise(logging.Filter):
    """dp-accounting logs a warning per RDP order whose series does not converge; it excludes that
    order (ε stays an upper bound), and one calibration logs dozens. Shown only with ``verbose``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "failed to converge" not in record.getMessage()


def unit_source(experiment_id: str) -> str | None:
    """The code digest ``experiment_id``'s units are keyed on: :func:`experiment_digest` of its
    module (the package and the experiment's own modules), or None (the whole tree's digest) for a
    module outside ``experiments/`` (e.g. one a test registers)."""
    module = REGISTRY[experiment_id][0]
    return experiment_digest(module) if module.startswith("experiments.") else None


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
    verbose: bool = False,
    progress: Progress | None = None,
    shard: tuple[int, int] | None = None,
    merge: int | None = None,
) -> list[Comparison]:
    """Runs one experiment into ``results_dir/<id>/`` and writes its ``comparisons.csv``.

    ``shard``/``merge`` go to the :class:`UnitStore` (see ``run_all --shard/--merge``); in shard
    mode an experiment whose grid has units left to other shards raises ``UnitsElsewhere``, and one
    without a grid (:data:`UNSHARDED`) runs whole in one shard and raises ``ExperimentElsewhere``
    (a ``UnitsElsewhere``) in the others. A
    failure is recorded in ``<id>/FAILED.txt`` for REPORT.md, then re-raised.

    Progress goes to stderr (:class:`Progress`: a bar on a terminal, a plain line at most every 30 s
    elsewhere); ``verbose`` adds the experiment's detail lines (one per unit, group or item) and
    dp-accounting's convergence warnings, ``quiet`` shows nothing. ``progress`` replaces that
    default (e.g. to read its unit counts).
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    # Grids calibrate hundreds of settings: keep them on disk across processes (verified on every
    # hit, so a stale or edited entry costs time, never privacy). Off when the caller says so.
    os.environ.setdefault(ENV_CALIBRATION_CACHE, "1")
    module = load(experiment_id)
    if shard is not None and experiment_id in UNSHARDED:
        owner = whole_owner(experiment_id, shard[1])
        if owner != shard[0]:
            raise ExperimentElsewhere(experiment_id, owner, shard)
        shard = None  # the owner computes every unit (its store.run units need no slicing)
    out_dir = Path(results_dir) / experiment_id
    out_dir.mkdir(parents=True, exist_ok=True)
    # Unit caches are keyed by profile so a smoke run never satisfies a paper run.
    if progress is None:
        progress = Progress(experiment_id, quiet=quiet, verbose=verbose)
    store = UnitStore(
        out_dir / ".units" / profile,
        fresh=fresh,
        shard=shard,
        merge=merge,
        progress=progress,
        source=unit_source(experiment_id),
    )
    ctx = RunContext(profile, out_dir, store, progress, data_dir)
    failure = out_dir / FAILURE_FILE
    noise = None if progress.verbose else _ConvergenceNoise()
    if noise is not None:
        logging.getLogger("absl").addFilter(noise)
    try:
        comparisons = list(module.run(ctx))
    except UnitsElsewhere:
        raise  # not a failure: this shard's part is done
    except Exception as err:
        try:
            atomic_write_text(failure, f"profile {profile}: {type(err).__name__}: {err}\n")
        except OSError as unrecorded:
            # Most often the disk is full and the run failed for the same reason: raise the run's
            # error alone (no traceback inside a traceback), noting that the marker is missing.
            err.add_note(
                f"(could not record this failure in {failure}: {unrecorded.strerror or unrecorded})"
            )
        raise
    finally:
        progress.close()
        if noise is not None:
            logging.getLogger("absl").removeFilter(noise)
    frame = comparisons_frame(comparisons)
    frame.insert(0, "profile", profile)
    write_csv(frame, out_dir / "comparisons.csv")
    failure.unlink(missing_ok=True)
    return comparisons


def main_for(experiment_id: str, argv: list[str] | None = None) -> None:
    """``python -m experiments.<module>`` entry point."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {REGISTRY[experiment_id][0]}",
        description=f"Run experiment {experiment_id!r} alone.",
    )
    parser.add_argument("--profile", choices=PROFILES, default="quick")
    parser.add_argument(
        "--out", type=Path, default=None, help="default: results/ (quick), else results-<profile>/"
    )
    parser.add_argument("--fresh", action="store_true", help="ignore finished units of work")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument(
        "--verbose", action="store_true", help="a progress line per unit of work (default: a bar)"
    )
    args = parser.parse_args(argv)
    out = args.out or default_out(args.profile)
    problem = unwritable(out)
    if problem:
        parser.exit(2, f"{parser.prog}: error: {problem}\n")
    print(f"profile {args.profile} -> {out}/")
    try:
        comparisons = run_experiment(
            experiment_id,
            args.profile,
            out,
            fresh=args.fresh,
            data_dir=args.data_dir,
            verbose=args.verbose,
        )
    except Exception as err:
        full = disk_full(err)
        if full is None:
            raise
        parser.exit(1, f"{parser.prog}: error: {disk_full_message(full)}\n")
    for c in comparisons:
        print(f"{c.status:5s} {c.quantity}: paper {c.paper} | ours {c.measured} ({c.tolerance})")
