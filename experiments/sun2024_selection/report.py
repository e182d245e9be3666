"""Sun, Suresh & Menon (2024) Table 1 with the tuning paid, the comparison rows: per method and
ε the honest-tuning test accuracy next to the paper-style one (best grid point on test,
training-only ε) that ``sun2024_table1`` wrote to the same output directory, with the end-to-end
ε and its charged parts in the note."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dpprep.selection import Repetitions
from experiments.results import Comparison

from .config import DELTA, Grid


def paper_style(out_dir: Path) -> pd.DataFrame | None:
    """``sun2024_table1``'s best-on-test cells (MNIST, main variant) from the same output
    directory as ``out_dir``, this experiment's (None when that experiment has not run there)."""
    path = out_dir.parent / "sun2024_table1" / "selection.csv"
    if not path.exists():
        return None
    f = pd.read_csv(path)
    return f[(f.dataset == "mnist") & (f.variant == "main")]


def _paper_cell(table: pd.DataFrame | None, method: str, eps: float | None):
    if table is None:
        return None
    row = table[
        (table.method == method)
        & ((table.epsilon == eps) if eps is not None else table.epsilon.isna())
    ]
    return None if row.empty else row.iloc[0]


def _eps(value) -> str:
    return "none" if value is None or not np.isfinite(value) else f"{value:.3f}"


def comparisons(records: list[dict], grid: Grid, table: pd.DataFrame | None) -> list[Comparison]:
    """The rows: the tuning protocol, the non-private reference, then per ε and private method
    the selected model's test accuracy (mean ± s.d. over draws when there are several)."""
    out = [
        Comparison.info(
            "tuning protocol",
            f"private random search, K ~ {Repetitions(grid.mean_candidates, 1.0).describe()}, "
            f"score noise {grid.score_noise:g} on {grid.validation_size} validation rows",
            paper="best of grid on test, tuning not charged",
        )
    ]
    label = {"dpsgdf": "DPSGD-F", "dpsgd": "DPSGD"}
    for r in records:
        if r["method"] != "nonprivate":
            continue
        cell = _paper_cell(table, "nonprivate", None)
        out.append(
            Comparison.info(
                "non-private SGD, eta tuned on validation",
                f"{r['test_accuracy']:.2f}",
                note=f"lr={r['lr']:g}; nothing to charge",
                paper=(
                    "n/a" if cell is None else f"{cell['mean']:.2f} (best on test, sun2024_table1)"
                ),
            )
        )
    for eps in grid.epsilons:
        for method in ("dpsgdf", "dpsgd"):
            draws = [r for r in records if r["method"] == method and r["epsilon_target"] == eps]
            # the account is the same for every draw (the calibration does not depend on it)
            r = draws[0]
            accs = [d["test_accuracy"] for d in draws if d["test_accuracy"] is not None]
            if not accs:
                measured = "K = 0: no model"
            elif len(draws) == 1:
                measured = f"{accs[0]:.2f}"
            else:
                measured = f"{np.mean(accs):.2f} ± {np.std(accs, ddof=1):.2f} ({len(accs)} draws)"
            chosen = "; ".join(
                f"C_F={d.get('C_F')} lr={d.get('lr')} eps_F={d.get('eps_F')}" for d in draws
            )
            each = (
                ""
                if len(draws) == 1
                else "; per draw: "
                + ", ".join(
                    "K=0" if d["test_accuracy"] is None else f"{d['test_accuracy']:.2f}"
                    for d in draws
                )
            )
            note = (
                f"end-to-end eps={r['epsilon_end_to_end']:.3f} (delta={DELTA:g},"
                f" {r['accountant']}), charged: {r['charged']}; parts: statistics"
                f" {_eps(r['epsilon_private_statistics'])}, selection {r['epsilon_selection']:.3f},"
                f" one training run {r['epsilon_training']:.3f}; the same run reported"
                f" training-only: eps={r['epsilon_training_only_same_run']:.3f}; chosen"
                f" {chosen}{each}"
            )
            cell = _paper_cell(table, method, eps)
            out.append(
                Comparison.info(
                    f"{label[method]} end-to-end eps={eps:g}, tuning paid",
                    measured,
                    note=note,
                    paper=(
                        "sun2024_table1 not in this output"
                        if cell is None
                        else f"{cell['mean']:.2f} (training-only eps={eps:g}, best on test)"
                    ),
                )
            )
    return out
