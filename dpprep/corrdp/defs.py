"""The CorrDP definition (Wang et al. 2026, §2; spec §1): the TV-based distance of Eq. 1, per-feature
correlation weights, correlated sensitivity (Def. 2.8) and the CorrDP Laplace mechanism (Def. 2.9).

Indices are 0-based. ``S`` (sensitive) and ``U`` (insensitive) partition the features.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dpprep.validation import check_finite_array


def check_index_sets(
    first: Sequence[int], second: Sequence[int], m: int, *, names: tuple[str, str] = ("sensitive", "insensitive"),
    cover: bool = True,
) -> tuple[tuple[int, ...], tuple[int, ...]]:  # fmt: skip
    """Two non-empty, disjoint sets of feature indices in ``0..m-1`` (and, with ``cover``, covering
    all m features); a violation raises ValueError naming the feature and the argument."""
    out = []
    for values, name in zip((first, second), names):
        values = [int(v) for v in np.atleast_1d(np.asarray(values, dtype=np.int64))]
        if not values:
            raise ValueError(f"{name} must name at least one feature")
        bad = [v for v in values if not 0 <= v < m]
        if bad:
            raise ValueError(f"{name} has index(es) {bad} outside 0..{m - 1}")
        if len(set(values)) != len(values):
            raise ValueError(f"{name} lists a feature twice: {values}")
        out.append(tuple(values))
    both = sorted(set(out[0]) & set(out[1]))
    if both:
        raise ValueError(f"feature(s) {both} are in both {names[0]} and {names[1]}; the sets must be disjoint")
    if cover:
        neither = sorted(set(range(m)) - set(out[0]) - set(out[1]))
        if neither:
            raise ValueError(f"feature(s) {neither} are in neither {names[0]} nor {names[1]}; every feature "
                             "must be in exactly one")  # fmt: skip
    return out[0], out[1]


def check_tv(values, name: str = "tv") -> np.ndarray:
    """TV values / factors as a float64 array, each finite and in [0, 1]."""
    arr = check_finite_array(values, name).astype(np.float64)
    bad = np.flatnonzero((arr < 0) | (arr > 1))
    if bad.size:
        raise ValueError(f"{name} must lie in [0, 1] (a TV), got {arr.reshape(-1)[bad[0]]!r} at position {int(bad[0])}")
    return arr
