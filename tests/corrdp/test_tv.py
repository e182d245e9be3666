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
        numeric = (
            0.5
            * integrate.quad(
                lambda t: abs(stats.norm.pdf(t) - stats.norm.pdf(t, loc=d)),
                -12,
                12 + d,
                points=[d / 2],
            )[0]
        )
        assert tv.gaussian_tv([0.0], [d], [[1.0]]) == pytest.approx(numeric, abs=1e-9)
        assert tv.gaussian_tv([0.0], [d], [[1.0]]) == pytest.approx(
            2 * stats.norm.cdf(d / 2) - 1, abs=1e-12
        )


def test_gaussian_tv_is_the_mahalanobis_formula_in_several_dimensions():
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    a, b = np.array([0.1, -1.0, 0.4]), np.array([0.5, 0.2, 0.0])
    delta = math.sqrt((a - b) @ np.linalg.inv(cov) @ (a - b))
    assert tv.gaussian_tv(a, b, cov) == pytest.approx(2 * stats.norm.cdf(delta / 2) - 1, abs=1e-12)
    # TV is invariant under an invertible linear map of both laws
    m = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [1.0, 0.0, 1.0]])
    assert tv.gaussian_tv(m @ a, m @ b, m @ cov @ m.T) == pytest.approx(
        tv.gaussian_tv(a, b, cov), abs=1e-10
    )


def _population_tv_closed_form(m_s: int, delta: float = 1e-4) -> float:
    # Σ_c = 0.5 I + (0.5 − 0.1²/2) 11ᵀ, B = (0.1/2)·1: 1ᵀΣ_c⁻¹1 = m_s / (0.5 + 0.495 m_s)
    # (Sherman–Morrison)
    gap = 4 * math.sqrt(math.log(2 * m_s / delta))
    mahalanobis = 0.05 * gap * math.sqrt(m_s / (0.5 + 0.495 * m_s))
    return 2 * stats.norm.cdf(mahalanobis / 2) - 1


@pytest.mark.parametrize(
    "m_s,expected", [(5, 0.340), (10, 0.364), (20, 0.382), (50, 0.399), (80, 0.407)]
)
def test_synthetic_population_tv_matches_spec_item_13(m_s, expected):
    truth = synthetic_truth(m_s)
    factors = tv.synthetic_tv_factors(
        truth.mean, truth.cov, truth.sensitive, truth.insensitive, delta=1e-4
    )
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
    single = tv.gaussian_posterior_tv(
        truth.mean, truth.cov, truth.sensitive, [10], [1 - half], [1 + half]
    )
    assert single == pytest.approx(0.364, abs=1e-3)
    # conditioning on a block I ⊆ U: changing only coordinate 10 inside the block gives a smaller TV
    # than conditioning on it alone would, as the others carry information about S as well
    block = tv.gaussian_posterior_tv(
        truth.mean, truth.cov, truth.sensitive, [10, 11], [1 - half, -1], [1 + half, -1]
    )
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
    for kwargs, match in [
        ({"tv_hat": [1.2]}, "tv_hat"),
        ({"gamma": 0.7}, "gamma"),
        ({"delta": 0.0}, "delta"),
        ({"c2": -1.0}, "c2"),
        ({"m_s": 100}, "m_s"),
    ]:
        args = {
            "tv_hat": [0.2],
            "c2": 1.0,
            "gamma": 0.5,
            "n": 100,
            "m": 100,
            "m_s": 10,
            "delta": 1e-4,
        } | kwargs
        with pytest.raises(ValueError, match=match):
            tv.tv_upper_bound(**args)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=8), st.floats(0, 5), st.integers(1, 10**6))
def test_tv_upper_bound_is_monotone_and_in_unit_interval(tv_hat, c2, n):
    out = tv.tv_upper_bound(tv_hat, c2, 0.5, n, 20, 5, 1e-5)
    assert np.all((out >= np.asarray(tv_hat) - 1e-15) & (out <= 1.0))


# --- plug-in estimators (App. D.1–D.3) ------------------------------------------------------------


def test_discrete_plugin_is_exact_on_exact_frequencies():
    # u = 0: s ~ (0.5, 0.5, 0); u = 1: (0.25, 0.25, 0.5); u = 2: (0.5, 0.5, 0) -> max TV = 0.5
    s = np.array([0, 1] * 2 + [0, 1, 2, 2] + [0, 1] * 3)
    u = np.array([0] * 4 + [1] * 4 + [2] * 6)
    assert tv.discrete_tv(s, u) == pytest.approx(0.5, abs=1e-12)
    # two sensitive features as joint categories (App. D.2 item 1): (a, b) pairs
    s2 = np.column_stack([[0, 0, 1, 1, 0, 0, 1, 1], [0, 1, 0, 1, 0, 0, 0, 0]])
    u2 = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    # u = 0: uniform over 4 joint cells; u = 1: (0,0) and (1,0) with 1/2 each -> TV = 1/2
    assert tv.discrete_tv(s2, u2) == pytest.approx(0.5, abs=1e-12)
    assert tv.discrete_tv(s2[:, 0], u2) == pytest.approx(0.0, abs=1e-12)  # margins alone agree


def test_discrete_plugin_converges_to_the_true_tv():
    rng = np.random.default_rng(0)
    u = rng.integers(0, 3, 60_000)
    probs = np.array([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2], [0.2, 0.3, 0.5]])
    s = (rng.random(u.size)[:, None] > np.cumsum(probs[u], axis=1)).sum(axis=1)
    assert tv.discrete_tv(s, u) == pytest.approx(0.5, abs=0.02)  # TV(row 0, row 2) = 0.5


def test_histogram_tv_converges_to_the_shift_tv_and_takes_configurable_bins():
    rng = np.random.default_rng(1)
    u = rng.integers(0, 2, 40_000)
    s = rng.random(u.size) + 0.5 * u  # U(0,1) vs U(0.5,1.5): TV = 0.5
    assert tv.histogram_tv(s, u, bins=30) == pytest.approx(0.5, abs=0.03)
    assert tv.histogram_tv(s, u) == pytest.approx(0.5, abs=0.03)  # default ceil(n_min^(1/3)) bins
    assert tv.histogram_tv(s, u, bins=1) == 0.0  # one bin sees nothing
    # invariant to an affine map of s (edges on the pooled sample)
    assert tv.histogram_tv(3 * s - 7, u, bins=30) == pytest.approx(
        tv.histogram_tv(s, u, bins=30), abs=1e-12
    )
    # joint histogram for a 2-D sensitive block
    s2 = np.column_stack([s, rng.random(u.size)])
    assert 0.45 < tv.histogram_tv(s2, u, bins=[30, 4]) < 0.6
    with pytest.raises(ValueError, match="bins"):
        tv.histogram_tv(s2, u, bins=[3, 3, 3])


def test_block_conditioning_needs_every_cell_and_names_an_empty_one():
    u = np.array([[0, 1], [0, 2], [1, 1], [1, 1]])
    with pytest.raises(ValueError, match=r"conditioning cell \(1, 2\) of u has no rows"):
        tv.histogram_tv(np.arange(4.0), u, bins=2)
    codes, cells = tv.conditioning_cells(np.array([[0, 1], [0, 2], [1, 1], [1, 2]]))
    assert cells == [(0, 1), (0, 2), (1, 1), (1, 2)] and list(codes) == [0, 1, 2, 3]


def test_regression_gaussian_tv_converges_to_the_true_tv():
    rng = np.random.default_rng(2)
    u = rng.random(50_000)
    phi, eta = 1.5, 2.0
    s = phi * u + 0.3 + eta * rng.standard_normal(u.size)
    true = 2 * stats.norm.cdf(phi / (2 * eta)) - 1  # conditionals at u = 0 and u = 1
    assert tv.regression_gaussian_tv(s, u) == pytest.approx(true, abs=0.01)
    # Eq. 22 with the plug-in (s, u) Gaussian gives the same law (up to ddof)
    assert tv.gaussian_plugin_tv(s, u) == pytest.approx(tv.regression_gaussian_tv(s, u), abs=1e-3)
    # a block of two u's: φᵀu ranges over [0, φ1 + φ2]
    u2 = rng.random((50_000, 2))
    s2 = u2 @ np.array([1.0, -2.0]) + rng.standard_normal(50_000)
    assert tv.regression_gaussian_tv(s2, u2) == pytest.approx(
        2 * stats.norm.cdf(3 / 2) - 1, abs=0.01
    )
    with pytest.raises(ValueError, match="x_u"):
        tv.gaussian_plugin_tv(s2, u2)


def test_mixed_tv_parts_and_cap():
    rng = np.random.default_rng(3)
    n = 20_000
    u = rng.integers(0, 2, n)
    s_disc = (rng.random(n) < np.where(u == 1, 0.8, 0.2)).astype(int)  # TV 0.6
    s_cont = rng.random(n) + 0.5 * u  # TV 0.5
    onehot = np.eye(2)[u]
    out = tv.mixed_tv(s_cont, s_disc, onehot, kind="discrete", bins=20, feature="u")
    assert out.discrete_part == pytest.approx(0.6, abs=0.03)
    assert out.continuous_part == pytest.approx(0.5, abs=0.04)
    assert out.total == 1.0  # min{1.1, 1} (A11)
    indep = tv.mixed_tv(rng.random(n), rng.integers(0, 3, n), rng.random(n), kind="continuous")
    assert indep.discrete_part < 0.05 and indep.continuous_part < 0.1 and indep.kind == "continuous"
    with pytest.raises(ValueError, match="kind"):
        tv.mixed_tv(s_cont, None, u, kind="ordinal")


def test_sepsis_tv_is_the_joint_cell_histogram():
    rng = np.random.default_rng(4)
    sex, ep = rng.integers(0, 2, 5000), rng.integers(1, 6, 5000)
    age = rng.normal(60 + 5 * sex, 10)
    x = np.column_stack([age, sex, ep])
    value = tv.sepsis_tv(x, bins=10)
    assert value == pytest.approx(tv.histogram_tv(age, x[:, 1:], bins=10))
    assert value == pytest.approx(
        tv.sepsis_tv(np.column_stack([age / 100, sex, ep]), bins=10), abs=1e-12
    )
    with pytest.raises(ValueError, match=r"conditioning cell \(1, 5\)"):
        tv.sepsis_tv(x[~((sex == 1) & (ep == 5))], bins=10)


@pytest.mark.slow
def test_adult_mixed_procedure_reproduces_the_spec_attempt(data_dir):
    from dpprep.corrdp.data import load_corrdp

    out = tv.adult_tv(load_corrdp("adult", data_dir), bins=10)
    # spec 5.3 (≈ 0.23 in Table 2)
    assert out["race"].discrete_part == pytest.approx(0.245, abs=0.01)
    assert 0.83 <= out["gender"].total <= 0.90
    assert out["workclass"].total == 1.0
    assert out["fnlwgt"].continuous_part == pytest.approx(0.45, abs=0.01)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.integers(2, 4))
def test_discrete_plugin_properties(seed, k_s, k_u):
    rng = np.random.default_rng(seed)
    n = 200
    u = np.concatenate([np.arange(k_u), rng.integers(0, k_u, n - k_u)])  # every level present
    s = rng.integers(0, k_s, n)
    value = tv.discrete_tv(s, u)
    assert 0.0 <= value <= 1.0
    perm = rng.permutation(n)
    # row order is irrelevant
    assert tv.discrete_tv(s[perm], u[perm]) == pytest.approx(value, abs=1e-12)
    # level names are irrelevant
    assert tv.discrete_tv(s, (u + 3) * 7) == pytest.approx(value, abs=1e-12)
    assert tv.discrete_tv(np.zeros(n), u) == 0.0  # a constant S carries no information
    assert tv.discrete_tv(u, u) == pytest.approx(1.0)  # S = U: disjoint conditionals
