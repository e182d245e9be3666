"""Hu, Sanyal, Schölkopf (2024) Table 3 on Adult: the imputation models compared and the profiles
(rows used, missing rates, which columns go missing, the trimmed mean's m, how many neighbours are
sampled per setting)."""

from __future__ import annotations

import dataclasses

EXPERIMENT = "hu2024_table3"
METHODS = ("mean", "median", "trimmed_mean", "regression")
#: Adult's continuous features: the regression imputes a missing one from the others.
CONTINUOUS = ("age", "fnlwgt", "educational-num", "hours-per-week")


@dataclasses.dataclass(frozen=True)
class Table3Config:
    n_rows: int | None  # None: all 45,175 Adult rows
    missing_rates: tuple[float, ...] = (0.01, 0.05, 0.10)
    settings: tuple[tuple[str, ...], ...] = (("age",), ("age", "hours-per-week"))
    trim_fraction: float = 0.05
    neighbours: int = 100
    seed: int = 0


PROFILES = {
    "smoke": Table3Config(n_rows=2000, missing_rates=(0.05,), settings=(("age",),), neighbours=12),
    "quick": Table3Config(n_rows=None, neighbours=60),
    "paper": Table3Config(n_rows=None, neighbours=300),
}
