"""Hu, Sanyal, Schölkopf (2024) Table 1: RDP and Smooth-RDP of six mechanisms.

Writes the symbolic table (with the spec §10 corrections applied and flagged) as ``table1.md`` and
``table1.tex`` (:mod:`.tables`), and a CSV of independent cross-checks of the implemented bounds
(``table1_checks.csv``, :mod:`.compute`): each Table-1 RDP value of
:mod:`dpprep.preprocess.privacy.table1` against a value derived from the mechanism's own noise
scale (Gaussian divergence, Lemma C; exact Laplace Rényi divergence; Feldman et al.'s Thm 26 for
DP-SGD-iter), plus the Remark-1 coefficient of spec §11.1 (the paper-side numbers in
``targets.csv``). Every profile does the same (cheap, closed-form) work.
"""

from __future__ import annotations

from experiments import RunContext
from experiments.results import Comparison, atomic_write_text, write_csv
from experiments.targets import paper_targets

from .compute import Findings, cross_checks, laplace_renyi
from .config import (
    COLUMNS,
    HEADERS,
    SGD_SAMP_ORDERS,
    SGD_SAMP_RAW_ORDERS,
    SGD_SAMP_SETTINGS,
    TEX_HEADERS,
)
from .report import SAMP_2L_NOTE, SAMP_NOTE, comparisons
from .tables import latex_table, markdown_table

__all__ = [
    "COLUMNS",
    "HEADERS",
    "SAMP_2L_NOTE",
    "SAMP_NOTE",
    "SGD_SAMP_ORDERS",
    "SGD_SAMP_RAW_ORDERS",
    "SGD_SAMP_SETTINGS",
    "TEX_HEADERS",
    "Findings",
    "comparisons",
    "cross_checks",
    "laplace_renyi",
    "latex_table",
    "markdown_table",
    "run",
]


def run(ctx: RunContext) -> list[Comparison]:
    atomic_write_text(ctx.out_dir / "table1.md", markdown_table())
    atomic_write_text(ctx.out_dir / "table1.tex", latex_table())
    frame, findings = cross_checks()
    write_csv(frame, ctx.out_dir / "table1_checks.csv")
    ctx.progress(f"wrote table1.md/.tex and {len(frame)} cross-checks")
    return comparisons(frame, findings, paper_targets(__name__))
