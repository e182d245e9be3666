"""Sun et al. (2024) experiments: Table 2's blocked diameter, smoke runs."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.sun2024_table2 import diameter


def test_blocked_diameter_is_exact_over_all_pairs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(301, 5)).astype(np.float32)
    x[7] = 0.0  # a zero row
    brute = max(np.linalg.norm(x[i].astype(np.float64) - x[j]) for i in range(len(x)) for j in range(len(x)))
    got, (i, j) = diameter(x, block=64)
    assert got == pytest.approx(brute, rel=1e-6)
    assert np.linalg.norm(x[i].astype(np.float64) - x[j]) == pytest.approx(brute, rel=1e-9)
