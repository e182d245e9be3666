#!/usr/bin/env python
"""Regenerates every table and figure and writes REPORT.md.

    python scripts/run_all.py                       # quick profile (laptop CPU) into results/
    python scripts/run_all.py --profile paper       # full grids (GPU recommended): results-paper/
    python scripts/run_all.py --only datasets --out /tmp/r
    python scripts/run_all.py --list
    python scripts/run_all.py --profile paper --plan      # units, FLOPs, memory, PROJECTED times
    python scripts/run_all.py --profile paper --validate  # every sweep shape at 2 steps

results/ holds the committed quick profile; other profiles go to results-<profile>/ unless --out
says otherwise. Finished units of work are cached under <out>/<id>/.units/<profile>/ with the source
digest and package versions that computed them, so an interrupted run resumes where it stopped and
a code change recomputes what it may change (the digest of dpprep/ and the experiment's own modules:
editing one experiment leaves the others' units valid); --fresh recomputes everything.

Many machines: `--shard K/N` (1-based) computes the K-th of N disjoint slices of every grid (one
job of a job array), runs each experiment that has no grid whole in one of the N shards (round
robin; the others say which shard has it) and writes no REPORT.md; `--merge SHARD_DIR...` copies
the shards' units into --out (checksums verified) and assembles every table and REPORT.md from them
without computing any grid unit. Shards that share one --out need `--merge` with no directories.

Output (stderr): while an experiment runs, a progress bar (units done/total, elapsed, ETA) on a
terminal, or a plain status line at most every 30 s in a log; a grid projected to take long says so
once ("N of M units left ≈ T (from k computed units, weighted by size)"); then one line per finished
experiment (wall time, pass/miss/info
rows, units computed vs cached). REPORT.md of a smoke or quick run reads each miss against the
committed runs of the larger profiles: expected at this size where it passes there, a finding where
it misses there too. --verbose adds the experiments' line per unit of work.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

import experiments  # noqa: E402
from experiments.results import (  # noqa: E402
    CorruptUnit,
    MissingUnits,
    Progress,
    UnitsElsewhere,
    atomic_write_bytes,
    atomic_write_text,
    code_identity,
    pair_rows,
    parse_shard,
    read_unit,
)

REPO = Path(__file__).resolve().parents[1]
SHARD_MANIFESTS = ".shards"  # <out>/.shards/K-of-N-<profile>.json: which shard ran, for --merge
_COLUMNS = ["quantity", "paper", "measured", "tolerance", "status", "note"]


def _markdown_table(frame: pd.DataFrame) -> str:
    marks = {"pass": "✅ pass", "miss": "❌ miss", "info": "ℹ️ info"}
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for _, row in frame.iterrows():
        cells = [str(row[c]) if pd.notna(row[c]) else "" for c in _COLUMNS]
        cells[4] = marks.get(cells[4], cells[4])
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def _read_comparisons(path: Path) -> pd.DataFrame:
    """An experiment's comparisons.csv; ValueError when it is not one."""
    try:
        frame = pd.read_csv(path, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{type(err).__name__}: {err}") from err
    absent = [c for c in ["profile", *_COLUMNS] if c not in frame.columns]
    if absent:
        raise ValueError(f"columns {absent} missing")
    return frame


def larger_committed_runs(profile: str, out: Path) -> dict[str, Path]:
    """The committed results of the profiles larger than ``profile`` (``results/`` for quick,
    ``results-paper/`` for paper, where this checkout has them), which a smaller run's misses are
    read against; never ``out`` itself."""
    larger = experiments.PROFILES[experiments.PROFILES.index(profile) + 1 :]
    runs = {name: REPO / experiments.default_out(name) for name in larger}
    return {
        name: directory
        for name, directory in runs.items()
        if (directory / "REPORT.md").exists() and directory.resolve() != out.resolve()
    }


def _larger_statuses(
    frame: pd.DataFrame, experiment_id: str, larger: dict[str, Path]
) -> dict[str, dict[str, str]]:
    """For each miss of ``frame`` (by quantity), its status in each larger run that has the row."""
    statuses: dict[str, dict[str, str]] = {
        q: {} for q in frame["quantity"][frame["status"] == "miss"]
    }
    for name, directory in larger.items():
        path = directory / experiment_id / "comparisons.csv"
        if not path.exists() or (directory / experiment_id / experiments.FAILURE_FILE).exists():
            continue
        try:
            other = _read_comparisons(path)
        except ValueError:
            continue
        paired = pair_rows(frame.astype(str), other.astype(str), "here", "there")
        for _, row in paired[paired["_merge"] == "both"].iterrows():
            if row["status_here"] == "miss":
                statuses[row["quantity"].split(" → ")[0]][name] = row["status_there"]
    return statuses


def _misses_at_this_size(statuses: dict[str, dict[str, str]], profile: str) -> tuple[str, str]:
    """The paragraph that sorts an experiment's misses by what the larger runs found, and each
    miss's class: ``expected`` (passes in a larger run), ``finding`` (misses in every larger run
    that has it) or ``alone`` (no larger run has the row)."""
    groups: dict[str, list[str]] = {"expected": [], "finding": [], "alone": []}
    for quantity, found in statuses.items():
        short = quantity if len(quantity) <= 90 else quantity[:89] + "…"
        passing = [name for name, status in found.items() if status == "pass"]
        if passing:
            groups["expected"].append(f"{short} (passes at {', '.join(passing)})")
        elif found:
            groups["finding"].append(f"{short} (misses at {', '.join(found)} too)")
        else:
            groups["alone"].append(short)
    labels = {
        "expected": f"expected at `{profile}`'s size (smaller grids, fewer seeds and steps)",
        "finding": "a finding at every size, explained in its row",
        "alone": "no larger committed run has this row",
    }
    lines = [
        f"- {len(items)} {labels[kind]}: " + "; ".join(items)
        for kind, items in groups.items()
        if items
    ]
    text = "**Misses at this profile's size**, read against the larger committed runs:\n\n"
    return (text + "\n".join(lines) + "\n") if lines else "", groups


def write_report(results_dir: Path, larger: dict[str, Path] | None = None) -> Path:
    """Collects every experiment's comparisons.csv (run now or earlier) into REPORT.md; an
    experiment whose latest run failed shows the failure instead of its earlier numbers.

    ``larger``: committed runs of larger profiles (:func:`larger_committed_runs`); each miss is
    then marked as expected at this size (it passes there), a finding at every size, or unmatched.
    """
    larger = larger or {}
    sections = []
    totals = {"pass": 0, "miss": 0, "info": 0, "failed": 0, "unreadable": 0}
    kinds = {"expected": 0, "finding": 0, "alone": 0}
    for experiment_id in experiments.REGISTRY:
        directory = results_dir / experiment_id
        head = f"## `{experiment_id}` — {experiments.title(experiment_id)}\n\n"
        failure = directory / experiments.FAILURE_FILE
        if failure.exists():
            totals["failed"] += 1
            error = failure.read_text(errors="replace").strip()
            sections.append(
                f"{head}**❌ FAILED** in its latest run; files left in"
                f" [`{experiment_id}/`]({experiment_id}/) are from an earlier run and not"
                f" reported.\n\n```\n{error[:2000]}\n```\n"
            )
            continue
        path = directory / "comparisons.csv"
        if not path.exists():
            sections.append(f"{head}_Not run yet._\n")
            continue
        try:
            frame = _read_comparisons(path)
        except ValueError as err:
            totals["unreadable"] += 1
            sections.append(
                f"{head}**⚠️ UNREADABLE**: `{experiment_id}/comparisons.csv` ({err}); rerun it.\n"
            )
            continue
        for status in ("pass", "miss", "info"):
            totals[status] += int((frame["status"] == status).sum())
        profile = frame["profile"].iloc[0] if len(frame) else "?"
        misses = ""
        if larger and (frame["status"] == "miss").any():
            statuses = _larger_statuses(frame, experiment_id, larger)
            misses, groups = _misses_at_this_size(statuses, profile)
            for kind, items in groups.items():
                kinds[kind] += len(items)
        sections.append(
            f"{head}Profile: `{profile}`. Outputs:"
            f" [`{experiment_id}/`]({experiment_id}/).\n\n{_markdown_table(frame)}\n"
            + (f"\n{misses}" if misses else "")
        )
    identity = code_identity()
    versions = ", ".join(f"{k} {v}" for k, v in identity["versions"].items())
    header = (
        "# dpprep results report\n\n"
        "Each reference number next to the one our code produced, with the tolerance and a "
        "pass/miss mark. A reference is a paper's number or claim, cited by its section, table, "
        "figure or theorem, or, where the paper prints none, a value or decision of this "
        "reproduction, cited to `docs/papers/decisions.md`, which states each with its reason. "
        "`info` rows report a measured value without a target.\n\n"
        f"Totals: {totals['pass']} pass, {totals['miss']} miss, {totals['info']} info"
        + "".join(f", {totals[k]} {k}" for k in ("failed", "unreadable") if totals[k])
        + "."
        + (
            f" Read against the committed {' and '.join(f'`{n}` run' for n in larger)}"
            f" ({', '.join(f'`{d.name}/`' for d in larger.values())}): {kinds['expected']} of"
            " the misses pass there, as expected at this profile's smaller size;"
            f" {kinds['finding']} miss there too (findings at every size, explained in their"
            f" rows); {kinds['alone']} have no row there. Each experiment lists its own."
            if larger and totals["miss"]
            else ""
        )
        + f"\n\nGenerated by `scripts/run_all.py` (source digest `{identity['source']}`) with"
        f" {versions}; each table's `versions` column records the computation behind each row.\n"
    )
    report = results_dir / "REPORT.md"
    atomic_write_text(report, header + "\n" + "\n".join(sections))
    return report


def _shard_arg(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _merge_shards(dirs: list[Path], out: Path, profile: str) -> int:
    """Copies the shards' units of ``profile`` into ``out`` (checksums verified) and returns N, the
    number of shards, read from the manifests each shard wrote."""
    manifests = [
        json.loads(p.read_text())
        for d in dict.fromkeys([*dirs, out])
        for p in sorted((d / SHARD_MANIFESTS).glob(f"*-{profile}.json"))
    ]
    counts = {m["shard"][1] for m in manifests}
    if len(counts) != 1:
        found = "none" if not counts else f"shard counts {sorted(counts)}"
        raise SystemExit(
            f"--merge: need the manifests of one K/N split for profile {profile!r} "
            f"in {[str(d) for d in dict.fromkeys([*dirs, out])]}/{SHARD_MANIFESTS}/, found {found}"
        )
    (n,) = counts
    absent = sorted(set(range(1, n + 1)) - {m["shard"][0] for m in manifests})
    if absent:
        print(
            f"--merge: no manifest from shard(s) {absent} of {n}; their units may be missing",
            file=sys.stderr,
        )
    copied, stale, kept = 0, 0, 0
    for directory in dirs:
        for src in sorted(directory.glob(f"*/.units/{profile}/*.json")):
            dest = out / src.relative_to(directory)
            try:
                record = read_unit(src)
            except CorruptUnit as err:
                print(f"--merge: skipped {err}", file=sys.stderr)
                continue
            experiment_id = src.relative_to(directory).parts[0]  # units are keyed per experiment
            identity = code_identity(
                experiments.unit_source(experiment_id)
                if experiment_id in experiments.REGISTRY
                else None
            )
            if dest.resolve() == src.resolve():
                stale += not _current(record, identity)
                continue
            if not _current(record, identity):
                # A unit of other code never replaces one of this code: --out keeps its own.
                if dest.exists() and _current(_read_or_none(dest), identity):
                    kept += 1
                    continue
                stale += 1
            atomic_write_bytes(dest, src.read_bytes())
            copied += 1
        for manifest in sorted((directory / SHARD_MANIFESTS).glob(f"*-{profile}.json")):
            if (out / SHARD_MANIFESTS / manifest.name).resolve() != manifest.resolve():
                atomic_write_bytes(out / SHARD_MANIFESTS / manifest.name, manifest.read_bytes())
    print(
        f"--merge: copied {copied} unit file(s) from {len(dirs)} shard dir(s) into {out}",
        file=sys.stderr,
    )
    if kept:
        print(
            f"--merge: kept {kept} unit(s) of this code already in {out}: the shards' copies were"
            " computed by other code (source or versions differ) and were not copied over them",
            file=sys.stderr,
        )
    if stale:
        print(
            f"--merge: {stale} unit(s) were computed by other code (source or versions differ) and "
            "will count as missing",
            file=sys.stderr,
        )
    return n


def _read_or_none(path: Path) -> dict | None:
    try:
        return read_unit(path)
    except CorruptUnit:
        return None


def _current(record: dict | None, identity: dict) -> bool:
    """Whether a unit record was computed by the code ``identity`` describes (source, versions)."""
    return record is not None and all(record["provenance"].get(k) == v for k, v in identity.items())


def _rate_arg(text: str) -> float:
    """A FLOP rate: a finite number > 0 (a time is FLOPs divided by it)."""
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(rate) and rate > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of FLOP/s > 0, got {text!r}")
    return rate


def _validate(selected: list[str], args: argparse.Namespace) -> int:
    """``--validate``: one line per experiment on stdout; exit status 1 (traceback on stderr, the
    experiment named) when any fails: a shape, a memory budget or a code path a real run would hit.
    """
    from experiments import planning

    failed = []
    # measured once, when an experiment without a sweep grid needs a projection
    rate: list[float] = []

    def cpu_rate() -> float:
        if not rate:
            rate.append(planning.measured_sweep_rate()[0])
        return rate[0]

    for experiment_id in selected:
        go, why = planning.should_validate(experiment_id, args.profile, cpu_rate)
        if not go:
            print(f"not validated {experiment_id}: {why}", flush=True)
            continue
        try:
            report = planning.validate_experiment(
                experiment_id,
                args.profile,
                args.data_dir,
                args.validate_steps,
                log=lambda line: print(line, file=sys.stderr, flush=True),
                cpu_rate=cpu_rate,
            )
        except Exception as err:
            if experiments.disk_full(err):
                raise
            traceback.print_exc()
            message = f"{experiment_id} (profile {args.profile}): {type(err).__name__}: {err}"
            print(f"VALIDATE FAILED {message}"[:500], flush=True)
            failed.append(experiment_id)
            continue
        print(planning.summary_line(report), flush=True)
    if failed:
        print(f"VALIDATE FAILED: {', '.join(failed)}", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except Exception as err:
        # A full disk stops the run with one line (no traceback): every unit written so far is
        # whole and is reused by the rerun.
        full = experiments.disk_full(err)
        if full is None:
            raise
        print(f"run_all.py: error: {experiments.disk_full_message(full)}", file=sys.stderr)
        return 1


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--profile", choices=experiments.PROFILES, default=experiments.COMMITTED_PROFILE
    )
    parser.add_argument("--only", default=None, help="comma-separated experiment ids")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=(
            f"output directory (default: results/ for the committed {experiments.COMMITTED_PROFILE}"
            " profile, results-<profile>/ for the others)"
        ),
    )
    parser.add_argument("--list", action="store_true", help="list experiments and exit")
    parser.add_argument("--fresh", action="store_true", help="ignore finished units of work")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="dataset directory (else $DPPREP_DATA_DIR)"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also a line per unit of work (default: a progress bar and one line per experiment)",
    )
    many = parser.add_mutually_exclusive_group()
    many.add_argument(
        "--shard",
        type=_shard_arg,
        default=None,
        metavar="K/N",
        help=(
            "compute only the K-th of N slices of every grid (1-based), and the experiments without"
            " a grid assigned whole to shard K; no REPORT.md"
        ),
    )
    many.add_argument(
        "--merge",
        type=Path,
        nargs="*",
        default=None,
        metavar="SHARD_DIR",
        help="copy these shards' units into --out, then assemble tables and REPORT.md",
    )
    check = parser.add_mutually_exclusive_group()
    check.add_argument(
        "--plan",
        action="store_true",
        help=(
            "print each experiment's units, FLOPs, peak memory and PROJECTED CPU/GPU wall time; "
            "computes no unit"
        ),
    )
    check.add_argument(
        "--validate",
        action="store_true",
        help=(
            "run every distinct compiled sweep shape at --validate-steps steps, first chunk only "
            "(cheap experiments run whole); saves nothing; exit 1 naming a failing experiment"
        ),
    )
    parser.add_argument(
        "--gpu-flops",
        type=_rate_arg,
        default=5e13,
        help="the GPU FLOP rate --plan projects to (default 5e13 FLOP/s, a stated assumption)",
    )
    parser.add_argument(
        "--validate-steps",
        type=int,
        default=2,
        help="training steps per sweep in --validate (default 2)",
    )
    args = parser.parse_args(argv)

    if args.list:
        for experiment_id in experiments.REGISTRY:
            print(f"{experiment_id:28s} {experiments.title(experiment_id)}")
        return 0

    selected = list(experiments.REGISTRY)
    if args.only is not None:
        selected = [s.strip() for s in args.only.split(",")]
        if not all(selected):
            parser.error(
                f"--only needs comma-separated experiment ids, got {args.only!r}; see --list"
            )
        selected = list(dict.fromkeys(selected))
        unknown = [s for s in selected if s not in experiments.REGISTRY]
        if unknown:
            parser.error(f"unknown experiment(s) {unknown}; see --list")
    if args.merge is not None and args.fresh:
        parser.error("--merge assembles finished units; --fresh would discard them")
    missing_dirs = [str(d) for d in args.merge or [] if not d.is_dir()]
    if missing_dirs:
        parser.error(f"--merge: not a directory: {', '.join(missing_dirs)}")
    if args.data_dir is not None:
        if not args.data_dir.is_dir():
            parser.error(f"--data-dir: not a directory: {args.data_dir}")
        # An explicit flag wins over $DPPREP_DATA_DIR: a file missing from it must not be read
        # from the environment's directory instead (the loaders search data_dir, then the env).
        os.environ["DPPREP_DATA_DIR"] = str(args.data_dir)

    if (args.plan or args.validate) and (args.shard or args.merge is not None or args.fresh):
        parser.error(
            "--plan/--validate compute and save no unit: they exclude --shard, --merge and --fresh"
        )
    if args.validate_steps < 1:
        parser.error("--validate-steps must be >= 1")
    if args.plan:
        from experiments import planning

        searched = [(args.profile, args.out or experiments.default_out(args.profile))]
        if args.profile != experiments.COMMITTED_PROFILE:
            searched.append(
                (
                    experiments.COMMITTED_PROFILE,
                    experiments.default_out(experiments.COMMITTED_PROFILE),
                )
            )
        print(
            planning.plan_report(selected, args.profile, args.gpu_flops, measured_in=searched),
            flush=True,
        )
        return 0
    if args.validate:
        return _validate(selected, args)

    out = args.out or experiments.default_out(args.profile)
    problem = experiments.unwritable(out)
    if problem:
        print(f"run_all.py: error: {problem}", file=sys.stderr)
        return 2
    print(
        f"profile {args.profile} -> {out}/"
        + ("" if args.out else " (default for this profile; --out to change)"),
        file=sys.stderr,
    )
    merge = _merge_shards(args.merge, out, args.profile) if args.merge is not None else None

    failures, elsewhere = [], {}
    for i, experiment_id in enumerate(selected, 1):
        head = f"[{i}/{len(selected)}] {experiment_id}"
        if args.verbose:
            print(f"==> {head} (profile {args.profile})", file=sys.stderr, flush=True)
        progress = Progress(experiment_id, label=head, verbose=args.verbose)
        start = time.perf_counter()
        took = lambda: f"{time.perf_counter() - start:.1f}s (units: {progress.counts()})"  # noqa: E731
        try:
            comparisons = experiments.run_experiment(
                experiment_id,
                args.profile,
                out,
                fresh=args.fresh,
                data_dir=args.data_dir,
                shard=args.shard,
                merge=merge,
                progress=progress,
            )
        except UnitsElsewhere as err:
            k, n = args.shard
            elsewhere[experiment_id] = err
            print(f"{head}: shard {k}/{n} done in {took()}: {err}", file=sys.stderr, flush=True)
            continue
        except MissingUnits as err:  # merge: one line says which unit and which shard
            print(f"{head} FAILED: {err}", file=sys.stderr, flush=True)
            failures.append(experiment_id)
            continue
        except Exception as err:  # one failing experiment must not lose the others' results
            if experiments.disk_full(err):
                raise  # the others would fail too: stop with one line (main)
            traceback.print_exc()
            print(f"{head} FAILED after {took()}", file=sys.stderr, flush=True)
            failures.append(experiment_id)
            continue
        counts = {s: sum(c.status == s for c in comparisons) for s in ("pass", "miss", "info")}
        print(
            f"{head} done in {took()}: {counts['pass']} pass, {counts['miss']} miss,"
            f" {counts['info']} info",
            file=sys.stderr,
            flush=True,
        )
    if args.shard is not None:
        k, n = args.shard
        manifest = {
            "shard": [k, n],
            "profile": args.profile,
            "source": code_identity()["source"],
            "experiments": {
                e: "failed" if e in failures else "pending elsewhere" if e in elsewhere else "done"
                for e in selected
            },
        }
        atomic_write_text(
            out / SHARD_MANIFESTS / f"{k}-of-{n}-{args.profile}.json",
            json.dumps(manifest, indent=1),
        )
        print(
            f"shard {k}/{n}: REPORT.md not written; assemble with `run_all.py --merge <shard dirs> "
            f"--profile {args.profile}` once all {n} shards are done",
            file=sys.stderr,
        )
    else:
        report = write_report(out, larger_committed_runs(args.profile, out))
        print(f"report: {report}", file=sys.stderr)
    if failures:
        print(f"FAILED experiments: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
