"""Getting data into the unit ball without looking at it."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.preprocess import check_unit_ball, project_to_unit_ball, scale_into_unit_ball


def test_project_is_rowwise_and_non_expansive():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 4)), rng.normal(size=(50, 4))
    pa, pb = project_to_unit_ball(a), project_to_unit_ball(b)
    assert np.all(np.linalg.norm(pa, axis=1) <= 1 + 1e-12)
    inside = np.linalg.norm(a, axis=1) <= 1
    np.testing.assert_array_equal(pa[inside], a[inside])
    assert np.all(np.linalg.norm(pa - pb, axis=1) <= np.linalg.norm(a - b, axis=1) + 1e-12)


def test_scale_with_public_bound_keeps_nan_and_rejects_longer_rows():
    x = np.array([[1.0, np.nan, 1.0], [0.0, 1.0, 0.0]])
    out = scale_into_unit_ball(x, np.sqrt(3))
    assert np.isnan(out[0, 1]) and out[1, 1] == pytest.approx(1 / np.sqrt(3))
    with pytest.raises(ValueError, match="unit L2 ball"):
        scale_into_unit_ball(x, 1.2)
    with pytest.raises(ValueError, match="max_norm"):
        scale_into_unit_ball(x, 0.0)


def test_check_unit_ball_messages():
    with pytest.raises(ValueError, match="row 1 has norm"):
        check_unit_ball(np.array([[0.1, 0.1], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="non-finite"):
        check_unit_ball(np.array([[np.nan, 0.1]]))
    check_unit_ball(np.array([[np.nan, 0.1]]), allow_nan=True)
