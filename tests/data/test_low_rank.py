"""The approximately low-rank logistic generator of Hu et al. (2024) Figure 3 (spec §9.2)."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.data.synthetic import low_rank_logistic
from dpprep.preprocess.pca import centred_covariance


def test_unit_ball_centred_deterministic():
    a = low_rank_logistic(2000, 200, 1, seed=3)
    b = low_rank_logistic(2000, 200, 1, seed=3)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.x, low_rank_logistic(2000, 200, 1, seed=4).x)
    assert np.linalg.norm(a.x, axis=1).max() <= 1.0 + 1e-12
    # centred before the last clip, which (with |x| ≈ 0.95) almost never binds
    assert np.abs(a.x.mean(axis=0)).max() < 1e-3
    assert set(np.unique(a.y)) == {0.0, 1.0}
    assert a.x.shape == (2000, 200) and a.basis.shape == (200, 1)
    np.testing.assert_allclose(a.basis.T @ a.basis, np.eye(1), atol=1e-12)
    assert np.linalg.norm(a.w) == pytest.approx(1.0)
    assert np.linalg.norm(a.w - a.basis @ (a.basis.T @ a.w)) < 1e-12  # w in span(U)
    with pytest.raises(ValueError, match="a.x|read-only|destination"):
        a.x[0, 0] = 1.0


@pytest.mark.parametrize("k", [1, 2])
def test_spectrum_as_spec_9_2(k):
    n, d, r, lam0 = 4000, 100, 0.9, 0.1
    data = low_rank_logistic(n, d, k, radius=r, tail_mass=lam0, seed=0)
    cov, _ = centred_covariance(data.x)
    ev = np.sort(np.linalg.eigvalsh(cov))[::-1]
    # top k ≈ r²/k + Λ0/d; tail ≈ Λ0/d each (sampling noise of a d × d covariance from n rows)
    np.testing.assert_allclose(ev[:k], r**2 / k + lam0 / d, rtol=0.05)
    tail = ev[k:]
    assert tail.mean() == pytest.approx(lam0 / d, rel=0.05)
    assert tail.min() > 0 and tail.max() < 2 * lam0 / d  # small yet positive
    # the eigen-gap the PCA pipelines rely on
    assert ev[k - 1] - ev[k] > 0.5 * r**2 / k


def test_labels_follow_the_logistic_model():
    data = low_rank_logistic(20_000, 50, 1, seed=1)
    margin = data.x @ data.w
    p = 1 / (1 + np.exp(-4.0 * margin))
    # mean label ≈ mean probability (binomial s.e. ≈ 0.0035)
    assert abs(data.y.mean() - p.mean()) < 0.015
    agree = np.mean((margin > 0) == (data.y == 1))
    assert agree == pytest.approx(np.mean(np.maximum(p, 1 - p)), abs=0.015)


def test_bad_input():
    with pytest.raises(ValueError, match="k"):
        low_rank_logistic(100, 5, 5)
    with pytest.raises(ValueError, match="radius"):
        low_rank_logistic(100, 5, 1, radius=1.5)
    with pytest.raises(ValueError, match="n"):
        low_rank_logistic(1, 5, 1)
    with pytest.raises(ValueError, match="tail_mass"):
        low_rank_logistic(100, 5, 1, tail_mass=-0.1)
