"""The figures' shared pieces: a headless pyplot, a grid of panels, mean ± s.d. series, saving.

Every figure of ``experiments/`` is drawn by its experiment's ``plots.py`` from these, so the look
is the same everywhere and a figure never needs a display. Figures are drawn from finished units
and never feed one: this module and every ``plots.py`` are outside the units' code digest
(``experiments.results.NOT_KEYED``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from experiments.results import save_figure

CAPSIZE = 3


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panels(rows: int, cols: int, *, width: float, height: float) -> tuple[Any, np.ndarray]:
    """A figure of ``rows`` × ``cols`` panels, each ``width`` × ``height`` inches; the axes always
    as a 2-D array (``axes[r, c]``), whatever the shape."""
    fig, axes = pyplot().subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    return fig, axes


def mean_sd(frame: pd.DataFrame, by: str | list[str], value: str) -> pd.DataFrame:
    """``value``'s mean and sample standard deviation (``ddof=1``; 0 for a single row) per group
    of ``by``, as columns ``mean`` and ``sd`` beside the group columns.

    >>> f = pd.DataFrame({"eps": [1, 1, 2], "acc": [0.5, 0.7, 0.9]})
    >>> mean_sd(f, "eps", "acc").round(3).to_dict("list")
    {'eps': [1, 2], 'mean': [0.6, 0.9], 'sd': [0.141, 0.0]}
    """
    grouped = frame.groupby(by)[value]
    out = grouped.mean().rename("mean").to_frame()
    out["sd"] = grouped.std(ddof=1).fillna(0.0)
    return out.reset_index()


def errorbar(ax: Any, x: Any, mean: Any, sd: Any, **style: Any) -> Any:
    """A mean ± s.d. series with the figures' common caps (``style`` as for ``ax.errorbar``)."""
    return ax.errorbar(x, mean, yerr=sd, **({"fmt": "o-", "capsize": CAPSIZE} | style))


def band(ax: Any, x: Any, mean: Any, low: Any, high: Any, **style: Any) -> Any:
    """A mean line with a shaded ``low`` … ``high`` band in the line's colour."""
    (line,) = ax.plot(x, mean, **style)
    ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def save(fig: Any, path: Path | str, **kwargs: Any) -> None:
    """Writes ``fig`` to ``path`` atomically (:func:`experiments.results.save_figure`) and closes
    it, so a long run drawing many figures holds none of them in memory."""
    try:
        save_figure(fig, path, **kwargs)
    finally:
        pyplot().close(fig)
