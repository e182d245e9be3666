#!/usr/bin/env python
"""Compares two profiles' outputs row by row: where does the paper profile change a conclusion?

    python scripts/compare_profiles.py results results-paper                 # markdown to stdout
    python scripts/compare_profiles.py results results-paper --out results-paper/COMPARISON.md

Reads each experiment's ``comparisons.csv`` in both directories and matches rows by their
``quantity`` text. For every experiment present in both it reports the pass/miss/info counts of
each, every row whose status changed (a pass that became a miss is a changed conclusion), every
row whose measured value changed, and the rows only one profile has. A quantity that names its size
(e.g. "over 60 neighbours" vs "over 300 neighbours") is paired with its counterpart when the two
texts differ only in their numbers (shown as ``quick text → paper text``). Nothing is interpreted:
the judgement of whether a changed number changes a conclusion stays with the reader.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import experiments  # noqa: E402

_STATUSES = ("pass", "miss", "info")


def _rows(directory: Path, experiment_id: str) -> pd.DataFrame | None:
    path = directory / experiment_id / "comparisons.csv"
    if not path.exists() or (directory / experiment_id / experiments.FAILURE_FILE).exists():
        return None
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    # A quantity repeated within one experiment is matched by its order of appearance.
    frame["occurrence"] = frame.groupby("quantity").cumcount()
    return frame


_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?([eE][-+]?\d+)?")


def _pair(left: pd.DataFrame, right: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Rows matched by quantity, then the rest by their quantity with every number masked."""
    merged = left.merge(
        right,
        on=["quantity", "occurrence"],
        how="outer",
        suffixes=(f"_{a}", f"_{b}"),
        indicator=True,
    )
    rest = {side: merged[merged["_merge"] == f"{side}_only"] for side in ("left", "right")}
    if rest["left"].empty or rest["right"].empty:
        return merged
    masked = {}
    for side, name in (("left", a), ("right", b)):
        frame = rest[side][["quantity", f"status_{name}", f"measured_{name}"]].copy()
        frame["shape"] = frame["quantity"].map(lambda q: _NUMBER.sub("#", q))
        frame["occurrence"] = frame.groupby("shape").cumcount()
        masked[side] = frame.rename(columns={"quantity": f"quantity_{name}"})
    paired = masked["left"].merge(masked["right"], on=["shape", "occurrence"], how="inner")
    paired["quantity"] = paired[f"quantity_{a}"] + " → " + paired[f"quantity_{b}"]
    paired["_merge"] = "both"
    used_a, used_b = set(paired[f"quantity_{a}"]), set(paired[f"quantity_{b}"])
    keep = merged[
        (merged["_merge"] == "both")
        | ((merged["_merge"] == "left_only") & ~merged["quantity"].isin(used_a))
        | ((merged["_merge"] == "right_only") & ~merged["quantity"].isin(used_b))
    ]
    return pd.concat(
        [
            keep,
            paired[
                [
                    "quantity",
                    f"status_{a}",
                    f"measured_{a}",
                    f"status_{b}",
                    f"measured_{b}",
                    "_merge",
                ]
            ],
        ],
        ignore_index=True,
    )


def _counts(frame: pd.DataFrame) -> str:
    return " / ".join(str(int((frame["status"] == s).sum())) for s in _STATUSES)


def _cell(text: str, limit: int = 160) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compare(first: Path, second: Path, names: tuple[str, str] = ("quick", "paper")) -> str:
    """The markdown comparison of ``first``'s and ``second``'s comparisons, experiment by
    experiment."""
    a, b = names
    summary = [
        (
            f"| experiment | {a}: pass / miss / info | {b}: pass / miss / info | status changed |"
            f" measured changed | only in {a} | only in {b} |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    details = []
    for experiment_id in experiments.REGISTRY:
        left, right = _rows(first, experiment_id), _rows(second, experiment_id)
        if left is None or right is None:
            missing = " and ".join(n for n, f in ((a, left), (b, right)) if f is None)
            summary.append(
                f"| `{experiment_id}` | {'—' if left is None else _counts(left)} |"
                f" {'—' if right is None else _counts(right)} | not compared: no results in"
                f" {missing} | | | |"
            )
            continue
        merged = _pair(left, right, a, b)
        both = merged[merged["_merge"] == "both"]
        status = both[both[f"status_{a}"] != both[f"status_{b}"]]
        measured = both[both[f"measured_{a}"] != both[f"measured_{b}"]]
        only_a = merged[merged["_merge"] == "left_only"]
        only_b = merged[merged["_merge"] == "right_only"]
        summary.append(
            f"| `{experiment_id}` | {_counts(left)} | {_counts(right)} | {len(status)} |"
            f" {len(measured)} | {len(only_a)} | {len(only_b)} |"
        )
        parts = []
        if len(status):
            lines = [f"| quantity | {a} | {b} |", "|---|---|---|"]
            for _, r in status.iterrows():
                lines.append(
                    f"| {_cell(r['quantity'])} | {r[f'status_{a}']}: {_cell(r[f'measured_{a}'])} "
                    f"| {r[f'status_{b}']}: {_cell(r[f'measured_{b}'])} |"
                )
            parts.append("Status changed:\n\n" + "\n".join(lines))
        if len(measured):
            lines = [f"| quantity | {a} | {b} |", "|---|---|---|"]
            for _, r in measured.iterrows():
                lines.append(
                    f"| {_cell(r['quantity'])} | {_cell(r[f'measured_{a}'])} |"
                    f" {_cell(r[f'measured_{b}'])} |"
                )
            parts.append("Measured value changed:\n\n" + "\n".join(lines))
        for label, rows, side in ((f"Only in {a}", only_a, a), (f"Only in {b}", only_b, b)):
            if len(rows):
                items = "\n".join(
                    f"- {_cell(r['quantity'])}: {r[f'status_{side}']},"
                    f" {_cell(r[f'measured_{side}'])}"
                    for _, r in rows.iterrows()
                )
                parts.append(f"{label}:\n\n{items}")
        if parts:
            details.append(f"## `{experiment_id}`\n\n" + "\n\n".join(parts) + "\n")
    head = (
        f"# {a} vs {b}: the same experiments at two profiles\n\nGenerated by"
        f" `scripts/compare_profiles.py {first} {second}` from each experiment's `comparisons.csv`"
        " (rows matched by their quantity). A status that changed between profiles is a conclusion"
        " that changed with scale; a changed measured value may or may not be.\n\n"
    )
    return head + "\n".join(summary) + "\n\n" + "\n".join(details)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="e.g. results (quick)")
    parser.add_argument("second", type=Path, help="e.g. results-paper")
    parser.add_argument("--names", default="quick,paper", help="labels of the two, comma-separated")
    parser.add_argument(
        "--out", type=Path, default=None, help="write the markdown here instead of stdout"
    )
    args = parser.parse_args(argv)
    for directory in (args.first, args.second):
        if not directory.is_dir():
            parser.error(f"{directory} is not a directory")
    names = tuple(args.names.split(","))
    if len(names) != 2 or not all(names):
        parser.error(f"--names needs two comma-separated labels, got {args.names!r}")
    text = compare(args.first, args.second, (names[0], names[1]))
    if args.out is None:
        sys.stdout.write(text)
    else:
        from experiments.results import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
