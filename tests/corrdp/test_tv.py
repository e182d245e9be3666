"""TV estimators (spec §4): Eq. 22 Gaussian posterior, the App. E.1 synthetic factors, Def. 4.3."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dpprep.corrdp import tv
from dpprep.corrdp.data import synthetic_truth


def test_gaussian_tv_matches_numerical_integration():
    for d in (0.0, 0.3, 1.0, 2.5):
        numeric = 0.5 * integrate.quad(lambda t: abs(stats.norm.pdf(t) - stats.norm.pdf(t, loc=d)), -12, 12 + d,
                                       points=[d / 2])[0]  # fmt: skip
        assert tv.gaussian_tv([0.0], [d], [[1.0]]) == pytest.approx(numeric, abs=1e-9)
        assert tv.gaussian_tv([0.0], [d], [[1.0]]) == pytest.approx(2 * stats.norm.cdf(d / 2) - 1, abs=1e-12)


def test_gaussian_tv_is_the_mahalanobis_formula_in_several_dimensions():
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    a, b = np.array([0.1, -1.0, 0.4]), np.array([0.5, 0.2, 0.0])
    delta = math.sqrt((a - b) @ np.linalg.inv(cov) @ (a - b))
    assert tv.gaussian_tv(a, b, cov) == pytest.approx(2 * stats.norm.cdf(delta / 2) - 1, abs=1e-12)
    # TV is invariant under an invertible linear map of both laws
    m = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [1.0, 0.0, 1.0]])
    assert tv.gaussian_tv(m @ a, m @ b, m @ cov @ m.T) == pytest.approx(tv.gaussian_tv(a, b, cov), abs=1e-10)


def _population_tv_closed_form(m_s: int, delta: float = 1e-4) -> float:
    # Σ_c = 0.5 I + (0.5 − 0.1²/2) 11ᵀ, B = (0.1/2)·1: 1ᵀΣ_c⁻¹1 = m_s / (0.5 + 0.495 m_s) (Sherman–Morrison)
    gap = 4 * math.sqrt(math.log(2 * m_s / delta))
    mahalanobis = 0.05 * gap * math.sqrt(m_s / (0.5 + 0.495 * m_s))
    return 2 * stats.norm.cdf(mahalanobis / 2) - 1


@pytest.mark.parametrize("m_s,expected", [(5, 0.340), (10, 0.364), (20, 0.382), (50, 0.399), (80, 0.407)])
def test_synthetic_population_tv_matches_spec_item_13(m_s, expected):
    truth = synthetic_truth(m_s)
    factors = tv.synthetic_tv_factors(truth.mean, truth.cov, truth.sensitive, truth.insensitive, delta=1e-4)
    assert factors.shape == (100 - m_s,)
    np.testing.assert_allclose(factors, _population_tv_closed_form(m_s), atol=1e-12)
    assert factors[0] == pytest.approx(expected, abs=1e-3)


def test_synthetic_plugin_tv_is_biased_upward_as_the_spec_says():
    truth = synthetic_truth(10)
    plug = tv.plugin_tv_factors(truth.dataset.x_train, truth.sensitive, truth.insensitive)
    assert plug.shape == (90,) and np.all((plug >= 0) & (plug <= 1))
    assert 0.40 < plug.mean() < 0.50  # spec: ≈ 0.44 (0.26–0.66) at m_s = 10
    assert plug.mean() > 0.364


def test_posterior_tv_single_and_block_conditioning_agree_with_the_sub_block():
    truth = synthetic_truth(10)
    half = tv.e1_half_width(10, 1e-4)
    single = tv.gaussian_posterior_tv(truth.mean, truth.cov, truth.sensitive, [10], [1 - half], [1 + half])
    assert single == pytest.approx(0.364, abs=1e-3)
    # conditioning on a block I ⊆ U: changing only coordinate 10 inside the block gives a smaller TV
    # than conditioning on it alone would, as the others carry information about S as well
    block = tv.gaussian_posterior_tv(truth.mean, truth.cov, truth.sensitive, [10, 11], [1 - half, -1], [1 + half, -1])
    assert 0 < block < single
    _, _, b, cond = tv.gaussian_conditional(truth.mean, truth.cov, truth.sensitive, [10, 11])
    assert b.shape == (10, 2) and cond.shape == (10, 10)


def test_gaussian_validation():
    cov = np.eye(3)
    with pytest.raises(ValueError, match=r"\[1\] are in both sensitive and given"):
        tv.gaussian_conditional(np.zeros(3), cov, [0, 1], [1])
    with pytest.raises(ValueError, match="x_given"):
        tv.gaussian_posterior_tv(np.zeros(3), cov, [0], [1, 2], [0.0], [1.0])
    with pytest.raises(ValueError, match="symmetric"):
        tv.gaussian_tv([0, 0], [1, 1], [[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match="delta"):
        tv.synthetic_tv_factors(np.zeros(3), cov, [0], [1, 2], delta=1.0)


def test_tv_upper_bound_def_4_3():
    # A5: c2 = 1, n = 2000, δ = 1e-4, m − m_s = 90 → inflation 2·sqrt(log(9e5))/sqrt(2000) ≈ 0.166
    inflation = 2 * math.sqrt(math.log(90 / 1e-4)) / math.sqrt(2000)
    assert inflation == pytest.approx(0.166, abs=1e-3)
    out = tv.tv_upper_bound([0.1, 0.364, 0.95], 1.0, 0.5, 2000, 100, 10, 1e-4)
    np.testing.assert_allclose(out, [0.1 + inflation, 0.364 + inflation, 1.0])
    np.testing.assert_allclose(tv.tv_upper_bound([0.2], 0.0, 0.5, 2000, 100, 10, 1e-4), [0.2])
    for kwargs, match in [({"tv_hat": [1.2]}, "tv_hat"), ({"gamma": 0.7}, "gamma"), ({"delta": 0.0}, "delta"),
                          ({"c2": -1.0}, "c2"), ({"m_s": 100}, "m_s")]:  # fmt: skip
        args = {"tv_hat": [0.2], "c2": 1.0, "gamma": 0.5, "n": 100, "m": 100, "m_s": 10, "delta": 1e-4} | kwargs
        with pytest.raises(ValueError, match=match):
            tv.tv_upper_bound(**args)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=8), st.floats(0, 5), st.integers(1, 10**6))
def test_tv_upper_bound_is_monotone_and_in_unit_interval(tv_hat, c2, n):
    out = tv.tv_upper_bound(tv_hat, c2, 0.5, n, 20, 5, 1e-5)
    assert np.all((out >= np.asarray(tv_hat) - 1e-15) & (out <= 1.0))
