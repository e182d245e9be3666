"""Running one experiment: its output folder, unit store and progress (:class:`RunContext`), a
failure recorded for REPORT.md, a full disk reported as such, and ``python -m experiments.<id>``
(:func:`main_for`). Not part of any unit's digest (see ``experiments.results.identity``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import importlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from dpprep.accounting import dp
import experiments
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
from experiments.results.calibrations import DiskCalibrations

#: ``0``/``off``/``false``/``no`` (anything but ``1``/``on``/``true``/``yes``) keeps the runner's
#: on-disk calibration cache off; unset, it is on (the tests turn it off, to stay hermetic).
ENV_CALIBRATION_CACHE = "DPPREP_CALIBRATION_CACHE"


def calibration_cache_enabled() -> bool:
    """Whether :func:`run_experiment` keeps calibrations on disk (:class:`DiskCalibrations`):
    yes unless ``$DPPREP_CALIBRATION_CACHE`` turns it off."""
    value = os.environ.get(ENV_CALIBRATION_CACHE)
    return value is None or value.strip().lower() in ("1", "on", "true", "yes")


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


@dataclasses.dataclass(frozen=True)
class RunContext:
    profile: str
    out_dir: Path
    store: UnitStore
    progress: Progress
    data_dir: Path | None = None


@contextlib.contextmanager
def _show_library_info() -> Iterator[None]:
    """The library's INFO records (e.g. dp-accounting's orders left out) on stderr."""
    library = logging.getLogger("dpprep")
    handler, level = logging.StreamHandler(), library.level
    library.addHandler(handler)
    library.setLevel(logging.INFO)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(level)


def unit_source(experiment_id: str) -> str | None:
    """The code digest ``experiment_id``'s units are keyed on: :func:`experiment_digest` of its
    module (the package and the experiment's own modules), or None (the whole tree's digest) for a
    module outside ``experiments/`` (e.g. one a test registers)."""
    module = experiments.REGISTRY[experiment_id][0]
    return experiment_digest(module) if module.startswith("experiments.") else None


def load(experiment_id: str) -> ModuleType:
    if experiment_id not in experiments.REGISTRY:
        raise ValueError(
            f"unknown experiment {experiment_id!r}; known: {', '.join(experiments.REGISTRY)}"
        )
    return importlib.import_module(experiments.REGISTRY[experiment_id][0])


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
    without a grid (:data:`~experiments.experiments.UNSHARDED`) runs whole in one shard and raises
    ``ExperimentElsewhere`` (a ``UnitsElsewhere``) in the others. A failure is recorded in
    ``<id>/FAILED.txt`` for REPORT.md, then re-raised.

    Progress goes to stderr (:class:`Progress`: a bar on a terminal, a plain line at most every 30 s
    elsewhere); ``verbose`` adds the experiment's detail lines (one per unit, group or item) and
    dp-accounting's convergence warnings, ``quiet`` shows nothing. ``progress`` replaces that
    default (e.g. to read its unit counts).
    """
    if profile not in experiments.PROFILES:
        raise ValueError(f"profile must be one of {experiments.PROFILES}, got {profile!r}")
    module = load(experiment_id)
    if shard is not None and experiment_id in experiments.UNSHARDED:
        owner = experiments.whole_owner(experiment_id, shard[1])
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
    failure = out_dir / experiments.FAILURE_FILE
    # dp-accounting's per-order convergence warnings: one INFO line for the whole experiment,
    # shown with verbose (the library's accounting functions already summarise theirs).
    shown = _show_library_info() if progress.verbose else contextlib.nullcontext()
    # Grids calibrate hundreds of settings: keep them on disk across processes (verified on every
    # hit, so a stale or edited entry costs time, never privacy). Off when the caller says so.
    calibrations = (
        dp.calibration_store(DiskCalibrations())
        if calibration_cache_enabled()
        else contextlib.nullcontext()
    )
    try:
        with calibrations, shown, dp.rdp_orders_summarised():
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
    frame = comparisons_frame(comparisons)
    frame.insert(0, "profile", profile)
    write_csv(frame, out_dir / "comparisons.csv")
    failure.unlink(missing_ok=True)
    return comparisons


def main_for(experiment_id: str, argv: list[str] | None = None) -> None:
    """``python -m experiments.<module>`` entry point."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {experiments.REGISTRY[experiment_id][0]}",
        description=f"Run experiment {experiment_id!r} alone.",
    )
    parser.add_argument("--profile", choices=experiments.PROFILES, default="quick")
    parser.add_argument(
        "--out", type=Path, default=None, help="default: results/ (quick), else results-<profile>/"
    )
    parser.add_argument("--fresh", action="store_true", help="ignore finished units of work")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument(
        "--verbose", action="store_true", help="a progress line per unit of work (default: a bar)"
    )
    args = parser.parse_args(argv)
    out = args.out or experiments.default_out(args.profile)
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
