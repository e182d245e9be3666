"""The papers' numbers as data: each experiment keeps its targets in ``targets.csv`` beside it.

A targets file is a CSV table: one row per number the paper reports, the columns the experiment
needs to match a row to its measurement (dataset, ε, method, …), the paper's value and, where the
comparison has one, its tolerance. Lines starting with ``#`` are comments (where a number comes
from in the paper). Targets are read when the report is written, never by a unit, so editing
them leaves cached units valid (the units' digest covers Python sources only).
"""

from __future__ import annotations

import importlib.resources
import io

import pandas as pd


def paper_targets(package: str, name: str = "targets.csv") -> pd.DataFrame:
    """The table ``name`` of the experiment package ``package`` (pass ``__package__`` from inside
    it), without its ``#`` comment lines.

    >>> paper_targets("experiments.wang2026_selection").columns.tolist()[:2]
    ['panel', 'dataset']
    """
    path = importlib.resources.files(package).joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"{package} has no {name}")
    # Only whole lines starting with "#" are comments (pandas' comment= would also cut a value at a
    # "#" anywhere in a line).
    rows = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    frame = pd.read_csv(io.StringIO("\n".join(rows)), skipinitialspace=True)
    if frame.empty:
        raise ValueError(f"{package}/{name} has no rows")
    return frame
