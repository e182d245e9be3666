"""The CorrDP synthetic generator (spec 5.2): determinism, structure and sample statistics."""

from __future__ import annotations

import numpy as np
import pytest

from dpprep.data.synthetic import (
    corrdp_covariance,
    corrdp_mean,
    corrdp_synthetic,
    corrdp_theta_star,
)


def test_population_parameters():
    np.testing.assert_array_equal(corrdp_mean(5), [1, -1, 1, -1, 1])
    np.testing.assert_allclose(corrdp_theta_star(4), [np.sqrt(2), -np.sqrt(3), 2.0, -np.sqrt(5)])
    cov = corrdp_covariance(6, 2)
    expected = np.array(
        [
            [1.0, 0.5, 0.1, 0.1, 0.1, 0.1],
            [0.5, 1.0, 0.1, 0.1, 0.1, 0.1],
            [0.1, 0.1, 2.0, 0.5, 0.5, 0.5],
            [0.1, 0.1, 0.5, 2.0, 0.5, 0.5],
            [0.1, 0.1, 0.5, 0.5, 2.0, 0.5],
            [0.1, 0.1, 0.5, 0.5, 0.5, 2.0],
        ]
    )
    np.testing.assert_array_equal(cov, expected)
    for m_s in (5, 10, 20, 50, 80):  # Fig. 2's settings: positive definite
        assert np.linalg.eigvalsh(corrdp_covariance(100, m_s)).min() > 0


def test_default_shapes_and_metadata():
    data = corrdp_synthetic()
    ds = data.dataset
    assert (
        ds.x_train.shape == (2000, 100)
        and ds.y_train.shape == (2000,)
        and ds.x_test.shape == (0, 100)
    )
    assert ds.task == "regression" and ds.num_classes is None
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.float32
    assert data.sensitive == tuple(range(10)) and data.insensitive == tuple(range(10, 100))
    assert ds.feature_names[0] == "x1" and ds.feature_names[-1] == "x100"
    assert not ds.x_train.flags.writeable and not data.cov.flags.writeable


def test_deterministic_given_seed():
    a, b, c = corrdp_synthetic(seed=3), corrdp_synthetic(seed=3), corrdp_synthetic(seed=4)
    np.testing.assert_array_equal(a.dataset.x_train, b.dataset.x_train)
    np.testing.assert_array_equal(a.dataset.y_train, b.dataset.y_train)
    assert not np.array_equal(a.dataset.x_train, c.dataset.x_train)


def test_sample_statistics_match_the_population():
    n, m, m_s = 40_000, 30, 6
    data = corrdp_synthetic(n=n, m=m, m_s=m_s, seed=1)
    x = data.dataset.x_train.astype(np.float64)
    se = np.sqrt(np.diag(data.cov) / n)
    assert np.all(np.abs(x.mean(axis=0) - data.mean) < 5 * se)
    # covariance entries: standard error of a sample covariance is <= sqrt(2 * 2 * 2 / n) ~ 0.014
    assert np.abs(np.cov(x, rowvar=False) - data.cov).max() < 0.06
    residual = data.dataset.y_train.astype(np.float64) - x @ data.theta_star
    assert abs(residual.std() - 5.0) < 0.1 and abs(residual.mean()) < 0.1
    # least squares recovers theta*
    theta_hat = np.linalg.lstsq(x, data.dataset.y_train.astype(np.float64), rcond=None)[0]
    assert np.abs(theta_hat - data.theta_star).max() < 0.25


def test_noise_free_targets_are_linear():
    data = corrdp_synthetic(n=50, m=8, m_s=3, noise_std=0.0, seed=0)
    x = data.dataset.x_train.astype(np.float64)
    np.testing.assert_allclose(data.dataset.y_train, x @ data.theta_star, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"m_s": 101}, "m_s must be <= m"),
        ({"n": 0}, "n must be"),
        ({"noise_std": -1.0}, "noise_std"),
        ({"m_s": 0}, "m_s"),
    ],
)
def test_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        corrdp_synthetic(**kwargs)
