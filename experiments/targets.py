"""The papers' numbers as data: each experiment keeps its targets in ``targets.csv`` beside it.

A targets file is a CSV table: one row per number the paper reports, the columns the experiment
needs to match a row to its measurement (dataset, ε, method, …), the paper's value and, where the
comparison has one, its tolerance. Lines starting with ``#`` are comments (where a number comes
from in the paper). Targets are read when the report is written, never by a unit, so editing
them leaves cached units valid (the units' digest covers Python sources only).
"""

from __future__ import annotations

import importlib.resources

import pandas as pd


def paper_targets(package: str, name: str = "targets.csv") -> pd.DataFrame:
    """The table ``name`` of the experiment package ``package`` (pass ``__name__`` from inside
    it), with ``#`` comment lines skipped."""
    path = importlib.resources.files(package).joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"{package} has no {name}")
    with path.open() as stream:
        frame = pd.read_csv(stream, comment="#", skipinitialspace=True)
    if frame.empty:
        raise ValueError(f"{package}/{name} has no rows")
    return frame
