"""The instance space of Hu et al. (2024): rows in the closed unit L2 ball (the paper's §4).

All sensitivity constants of ``dpprep.preprocess.sensitivity`` rely on it, so every pre-processing
function checks it (``check_unit_ball``). Two data-independent ways to get there:
``scale_into_unit_ball`` divides by a *public* bound on the row norm (e.g. 3 for the one-hot +
[0, 1]-scaled Adult encoding), ``project_to_unit_ball`` shrinks only rows longer than 1. Scaling by
the data's own largest norm would itself be a data-dependent pre-processing step, so it is not
offered.
"""

from __future__ import annotations

import numpy as np

from dpprep.validation import check_finite_array, check_positive

# Rounding slack for rows that are in the ball up to float32 arithmetic.
UNIT_BALL_TOL = 1e-6


def _as_matrix(x, name: str, *, allow_nan: bool = False) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows = records), got shape {arr.shape}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got shape {arr.shape}")
    if allow_nan:
        if np.isinf(arr).any():
            raise ValueError(f"{name} contains infinite values (only NaN marks a missing entry)")
    else:
        check_finite_array(arr, name)
    return arr


def row_norms(x: np.ndarray) -> np.ndarray:
    """L2 norm of each row, treating NaN (missing) entries as 0."""
    return np.sqrt(np.nansum(np.square(np.asarray(x, dtype=np.float64)), axis=1))


def check_unit_ball(x, name: str = "x", *, allow_nan: bool = False) -> np.ndarray:
    """Returns ``x`` as a float64 matrix after checking finite entries and row norms ``≤ 1``.

    With ``allow_nan`` NaN marks a missing entry and the observed part of each row must lie in the
    ball. Raises ``ValueError`` naming the worst row otherwise.
    """
    arr = _as_matrix(x, name, allow_nan=allow_nan)
    norms = row_norms(arr)
    worst = int(np.argmax(norms))
    if norms[worst] > 1.0 + UNIT_BALL_TOL:
        raise ValueError(
            f"{name} rows must lie in the unit L2 ball (Hu et al. 2024, §4); row {worst} has norm"
            f" {norms[worst]:.6g}. Use dpprep.preprocess.scale_into_unit_ball with a public norm"
            " bound or project_to_unit_ball first."
        )
    return arr


def scale_into_unit_ball(x, max_norm: float) -> np.ndarray:
    """Divides every row by the public bound ``max_norm`` and checks the result is in the ball.

    ``max_norm`` must be known without looking at the data (e.g. ``sqrt(#one-hot groups +
    #[0,1] features)``); a row longer than ``max_norm`` raises ``ValueError``. NaN entries stay NaN.
    """
    max_norm = check_positive(max_norm, "max_norm")
    arr = _as_matrix(x, "x", allow_nan=True)
    return check_unit_ball(arr / max_norm, f"x / max_norm (max_norm={max_norm:g})", allow_nan=True)


def project_to_unit_ball(x) -> np.ndarray:
    """Euclidean projection of each row onto the unit ball (rows with norm > 1 are rescaled to 1).

    Row-wise and data-independent, hence non-expansive: applying it after a pre-processing step
    leaves that step's (Δ∞, Δ2) unchanged.
    """
    arr = _as_matrix(x, "x")
    norms = row_norms(arr)
    factor = np.where(norms > 1.0, 1.0 / np.maximum(norms, 1e-300), 1.0)
    return arr * factor[:, None]
