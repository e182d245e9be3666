"""Analyze-Gauss DP-PCA (spec §9.2): sensitivity, calibration pinned against independent values,
the released noise checked statistically, recovery and bad input."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import stats

from dpprep.preprocess import dp_pca as dpp
from dpprep.preprocess.privacy.renyi import rdp_to_dp
from dpprep.data.synthetic import low_rank_logistic


def test_sensitivity_bound_is_attained_and_never_exceeded():
    n = 50
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2000):
        x, x2 = rng.standard_normal((2, 6))
        x, x2 = x / max(1.0, np.linalg.norm(x)), x2 / max(1.0, np.linalg.norm(x2))
        diff = (np.outer(x, x) - np.outer(x2, x2)) / n
        worst = max(worst, np.linalg.norm(diff[np.triu_indices(6)]))
    assert worst <= dpp.analyze_gauss_sensitivity(n) + 1e-15
    e1, e2 = np.eye(6)[0], np.eye(6)[1]  # orthogonal unit vectors attain ‖xxᵀ − x'x'ᵀ‖_F = sqrt(2)
    assert np.linalg.norm((np.outer(e1, e1) - np.outer(e2, e2)) / n) == pytest.approx(
        dpp.analyze_gauss_sensitivity(n)
    )


@pytest.mark.parametrize("eps,delta,n", [(0.05, 5e-6, 2000), (0.5, 5e-6, 10_000), (4.0, 1e-5, 500)])
def test_lemma_m_calibration_against_numeric_lemma_m_and_dp_accounting(eps, delta, n):
    s = dpp.analyze_gauss_noise(eps, delta, n)
    sens = math.sqrt(2) / n
    # independent 1: Lemma M minimised numerically over α on the RDP curve αΔ²/(2s²)
    conv = rdp_to_dp(lambda a: a * sens**2 / (2 * s**2), delta)
    assert conv.epsilon == pytest.approx(eps, rel=1e-6)
    # independent 2: dp-accounting's RDP accountant (a tighter conversion) certifies at most eps
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.GaussianDpEvent(s / sens))
    assert acc.get_epsilon(delta) <= eps
    # the analytic Gaussian is exact, hence needs less noise than Lemma M
    s_an = dpp.analyze_gauss_noise(eps, delta, n, calibration="analytic")
    assert s_an < s
    assert dpp.analyze_gauss_noise(eps, delta, n) == pytest.approx(s)


def test_calibration_hand_value():
    # ε = 1, δ = 1e−5, n = 1000: c0 = sqrt(2 ln 1e5) = 4.798525, u = sqrt(c0² + 2) − c0 = 0.2040585
    assert dpp.analyze_gauss_noise(1.0, 1e-5, 1000) == pytest.approx(
        math.sqrt(2) / 1000 / 0.2040585, rel=1e-6
    )


def test_released_noise_statistics():
    data = low_rank_logistic(400, 60, 1, seed=0)
    release, s = dpp.analyze_gauss_release(data.x, 0.5, 1e-5, jax.random.key(7))
    noise = release - data.x.T @ data.x / 400
    np.testing.assert_allclose(noise, noise.T, atol=0)
    upper = noise[np.triu_indices(60)] / s  # 1830 i.i.d. N(0, 1) draws
    assert abs(upper.mean()) < 4 / math.sqrt(upper.size)
    assert upper.std() == pytest.approx(1.0, abs=4 * math.sqrt(1 / (2 * upper.size)))
    assert stats.kstest(upper, "norm").pvalue > 1e-3
    again, _ = dpp.analyze_gauss_release(data.x, 0.5, 1e-5, jax.random.key(7))
    np.testing.assert_array_equal(release, again)
    other, _ = dpp.analyze_gauss_release(data.x, 0.5, 1e-5, jax.random.key(8))
    assert not np.array_equal(release, other)
    shared, _ = dpp.analyze_gauss_release(
        data.x, 0.5, 1e-5, jax.random.key(7), second_moment=data.x.T @ data.x / 400
    )
    np.testing.assert_allclose(shared, release, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="second_moment"):
        dpp.analyze_gauss_release(data.x, 0.5, 1e-5, jax.random.key(7), second_moment=np.eye(3))


def test_recovery_at_large_epsilon_and_modes():
    data = low_rank_logistic(5000, 40, 1, seed=2)
    u = data.basis[:, 0]
    rank = dpp.dp_pca(data.x, 1, 50.0, 1e-5, jax.random.key(0), mode="rank")
    assert abs(rank.components[:, 0] @ u) > 0.99
    assert rank.data.shape == (5000, 40)
    np.testing.assert_allclose(rank.data, rank.transform(data.x))
    dim = dpp.dp_pca(data.x, 1, 50.0, 1e-5, jax.random.key(0), mode="dim")
    assert dim.data.shape == (5000, 1)
    np.testing.assert_allclose(dim.components, rank.components)
    np.testing.assert_allclose(dim.data @ dim.components.T, rank.data, atol=1e-12)
    # tiny budget: the noise dominates, the direction is far from U
    noisy = dpp.dp_pca(data.x, 1, 1e-3, 1e-5, jax.random.key(0), mode="dim")
    assert abs(noisy.components[:, 0] @ u) < 0.9


def test_top_k_sparse_path_matches_dense():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 300))
    m = (a + a.T) / 2 + np.diag(np.r_[40.0, 35.0, np.zeros(298)])
    values, vectors = dpp._top_k(m, 2)
    ev, evec = np.linalg.eigh(m)
    np.testing.assert_allclose(values, ev[::-1][:2], rtol=1e-8)
    np.testing.assert_allclose(np.abs(vectors.T @ evec[:, ::-1][:, :2]), np.eye(2), atol=1e-6)


def test_bad_input():
    x = low_rank_logistic(200, 5, 1, seed=0).x
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="k"):
        dpp.dp_pca(x, 5, 1.0, 1e-5, key)
    with pytest.raises(ValueError, match="x"):
        dpp.dp_pca(x * 3, 1, 1.0, 1e-5, key)
    with pytest.raises(ValueError, match="mode"):
        dpp.dp_pca(x, 1, 1.0, 1e-5, key, mode="both")
    with pytest.raises(ValueError, match="epsilon"):
        dpp.analyze_gauss_noise(0.0, 1e-5, 100)
    with pytest.raises(ValueError, match="delta"):
        dpp.analyze_gauss_noise(1.0, 1.0, 100)
    with pytest.raises(ValueError, match="calibration"):
        dpp.analyze_gauss_noise(1.0, 1e-5, 100, calibration="pld")
    with pytest.raises(TypeError, match="key"):  # dpprep.validation.check_key: a TypeError
        dpp.dp_pca(x, 1, 1.0, 1e-5, 0)
