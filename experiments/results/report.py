"""Paper-vs-ours rows: each experiment returns :class:`Comparison` rows, which become its
``comparisons.csv`` and its part of REPORT.md.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import pandas as pd

from dpprep.files import (
    atomic_write_bytes,  # noqa: F401 (re-exported)
)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One paper (or spec) number next to ours, for REPORT.md.

    ``status`` is "pass" or "miss" for a number with a tolerance, "info" for a reported value with
    no target (e.g. a quantity the paper does not state).
    """

    quantity: str
    paper: str
    measured: str
    tolerance: str
    status: str
    note: str = ""

    @classmethod
    def numeric(
        cls,
        quantity: str,
        paper: float,
        measured: float,
        *,
        rel_tol: float | None = None,
        abs_tol: float | None = None,
        note: str = "",
        digits: int = 6,
    ) -> "Comparison":
        if rel_tol is None and abs_tol is None:
            raise ValueError("give rel_tol and/or abs_tol")
        ok = math.isfinite(measured) and math.isclose(
            measured, paper, rel_tol=rel_tol or 0.0, abs_tol=abs_tol or 0.0
        )
        tol = " or ".join(
            t
            for t in (f"rel {rel_tol:g}" if rel_tol else "", f"abs {abs_tol:g}" if abs_tol else "")
            if t
        )
        return cls(
            quantity,
            f"{paper:.{digits}g}",
            f"{measured:.{digits}g}",
            tol,
            "pass" if ok else "miss",
            note,
        )

    @classmethod
    def claim(
        cls, quantity: str, paper: str, measured: str, holds: bool, note: str = ""
    ) -> "Comparison":
        """A qualitative claim (e.g. an ordering) that our run either confirms or not."""
        return cls(quantity, paper, measured, "qualitative", "pass" if holds else "miss", note)

    @classmethod
    def info(cls, quantity: str, measured: str, note: str = "", paper: str = "—") -> "Comparison":
        return cls(quantity, paper, measured, "—", "info", note)


def comparisons_frame(comparisons: Iterable[Comparison]) -> pd.DataFrame:
    rows = [dataclasses.asdict(c) for c in comparisons]
    columns = [f.name for f in dataclasses.fields(Comparison)]
    return pd.DataFrame(rows, columns=columns)
