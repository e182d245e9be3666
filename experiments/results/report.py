"""Paper-vs-ours rows: each experiment returns :class:`Comparison` rows, which become its
``comparisons.csv`` and its part of REPORT.md.
"""

from __future__ import annotations

import dataclasses
import math
import re
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


_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?([eE][-+]?\d+)?")


def pair_rows(left: pd.DataFrame, right: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Two runs' comparison rows (of one experiment, e.g. at two profiles) matched by quantity,
    then the rest by their quantity with every number masked ("over 60 neighbours" at one size is
    "over 300 neighbours" at another); a quantity repeated within a run is matched by its order.

    Columns: ``quantity`` (``"x → y"`` for a masked match), ``status_{a}``, ``measured_{a}``,
    ``status_{b}``, ``measured_{b}`` and ``_merge`` (``both``, ``left_only``, ``right_only``).
    """
    left, right = (
        frame[["quantity", "status", "measured"]].assign(
            occurrence=frame.groupby("quantity").cumcount()
        )
        for frame in (left, right)
    )
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
    columns = ["quantity", f"status_{a}", f"measured_{a}", f"status_{b}", f"measured_{b}"]
    return pd.concat([keep, paired[[*columns, "_merge"]]], ignore_index=True)
