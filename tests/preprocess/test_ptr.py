"""Algorithm 1 (PTR for PCA rank reduction + DP-GD, spec §8): the distance statistic's
sensitivity on sampled neighbours, the Laplace test, ⊥ as a value, the doubled noise, Theorem 7
and Proposition 8 through the learner, and bad input."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpprep.preprocess import ptr
from dpprep.preprocess.privacy.theorem7 import (
    proposition8_failure_probability,
    proposition8_min_gap,
    theorem7,
)
from dpprep.data.synthetic import low_rank_logistic
from dpprep.preprocess.pca import pca_reduce
from dpprep.sweeps import sweep_points


def _unit_rows(rng, m, d, scale):
    z = rng.standard_normal((m, d)) * scale
    return z / np.maximum(1.0, np.linalg.norm(z, axis=1, keepdims=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(101, 160),
    d=st.integers(2, 6),
    k=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
    spread=st.floats(0.05, 1.0),
    replacement=st.sampled_from(["random", "top", "orthogonal", "zero", "far"]),
)
def test_distance_statistic_has_sensitivity_one(n, d, k, seed, spread, replacement):
    k = min(k, d - 1)
    rng = np.random.default_rng(seed)
    # anisotropic data so that gaps are sizeable and the statistic is non-zero for small beta
    x = _unit_rows(rng, n, d, spread * np.linspace(1.0, 0.1, d))
    i = int(rng.integers(n))
    x2 = x.copy()
    if replacement == "random":
        x2[i] = _unit_rows(rng, 1, d, 1.0)[0]
    elif replacement == "top":  # along the top eigenvector: moves λ1 most
        x2[i] = np.linalg.eigh(np.cov(x.T))[1][:, -1]
    elif replacement == "orthogonal":
        x2[i] = np.linalg.eigh(np.cov(x.T))[1][:, 0]
    elif replacement == "zero":
        x2[i] = 0.0
    else:  # the row farthest from the mean, replaced by its antipode
        j = int(np.argmax(np.linalg.norm(x - x.mean(0), axis=1)))
        x2[j] = -x[j] / max(1.0, np.linalg.norm(x[j]))
    g = ptr.gap_change_bound(n)
    assert abs(ptr.eigen_gap(x, k) - ptr.eigen_gap(x2, k)) <= g * (1 + 1e-9)
    for beta in (1e-6, 0.01, 0.1):
        j1, j2 = ptr.distance_statistic(x, k, beta), ptr.distance_statistic(x2, k, beta)
        assert abs(j1 - j2) <= 1.0 + 1e-9
        assert j1 >= 0.0


def test_distance_statistic_values():
    data = low_rank_logistic(2000, 20, 1, seed=0)
    gap = ptr.eigen_gap(data.x, 1)
    # same covariance as pca_reduce
    assert gap == pytest.approx(pca_reduce(data.x, 1).gap_k, rel=1e-10)
    n = 2000
    assert ptr.gap_change_bound(n) == pytest.approx(4 * (3 * n + 2) / (n * (n - 1)))
    assert ptr.gap_change_bound(101) * 101 == pytest.approx(12.2)
    assert ptr.distance_statistic(data.x, 1, gap / 2) == pytest.approx(
        (gap / 2) / ptr.gap_change_bound(n)
    )
    assert ptr.distance_statistic(data.x, 1, gap) == 0.0
    assert ptr.distance_statistic(data.x, 1, 2 * gap) == 0.0


def test_laplace_test_noise_and_pass_rate():
    data = low_rank_logistic(200, 5, 1, seed=0)
    beta = 10.0  # above any unit-ball gap: J_lb = 0, the worst case of the privacy proof
    eps, delta = 0.7, 0.5
    keys = jax.random.split(jax.random.key(0), 4000)
    tests = [ptr.ptr_test(data.x, 1, beta, eps, delta, key) for key in keys]
    noise = np.array([t.noisy_statistic - t.statistic for t in tests])
    assert all(t.statistic == 0.0 for t in tests)
    # Lap(1/ε): mean 0, mean absolute deviation 1/ε
    assert abs(noise.mean()) < 4 * math.sqrt(2) / eps / math.sqrt(noise.size)
    assert np.abs(noise).mean() == pytest.approx(1 / eps, rel=0.06)
    # P(pass | J_lb = 0) = P(Lap(1/ε) > log(2/δ)/ε) = δ/4
    rate = np.mean([t.passed for t in tests])
    assert rate == pytest.approx(delta / 4, abs=4 * math.sqrt(delta / 4 / len(tests)))
    assert all(t.passed == (t.noisy_statistic > t.threshold) for t in tests)
    assert tests[0].threshold == pytest.approx(math.log(2 / delta) / eps)


def test_bottom_is_an_explicit_result():
    data = low_rank_logistic(300, 8, 1, seed=1)
    out = ptr.algorithm1(
        data.x,
        data.y,
        k=1,
        beta=0.5,
        epsilon=0.1,
        delta=1e-5,
        key=jax.random.key(0),
        steps=10,
        learning_rate=0.3,
    )
    # J_lb ≈ (0.81 − 0.5)·300/12.1 ≈ 8 is far below the threshold log(2e5)/0.1 ≈ 122
    assert out.is_bottom and out.output is ptr.BOTTOM and out.pca is None
    assert repr(out.output) == "⊥" and not out.output
    assert out.test.threshold == pytest.approx(out.guarantee.ptr_threshold)


def test_release_uses_rank_reduction_and_doubled_noise():
    data = low_rank_logistic(3000, 10, 1, seed=2)
    eps, delta, steps, lr = 8.0, 1e-5, 30, 1.0
    gap = ptr.eigen_gap(data.x, 1)
    key = jax.random.key(3)
    out = ptr.algorithm1(
        data.x,
        data.y,
        k=1,
        beta=gap / 4,
        epsilon=eps,
        delta=delta,
        key=key,
        steps=steps,
        learning_rate=lr,
    )
    assert not out.is_bottom  # J_lb ≈ 0.6·3000/12 ≈ 150 ≫ threshold log(2e5)/8 ≈ 1.5
    assert out.stddev == pytest.approx(2 * math.sqrt(steps) / eps)  # twice L√T/ε on the sum
    assert out.stddev == pytest.approx(ptr.dp_gd_stddev(eps / 2, steps))
    np.testing.assert_allclose(out.pca.data, pca_reduce(data.x, 1, mode="rank").data)
    w = np.asarray(out.output["w"])[:, 0]
    assert np.linalg.norm(w) <= 1.0 + 1e-6
    # the learner is the engine's DP-GD on the rank-reduced data with DP-GD's half of the key
    config = ptr.train_config(10, 3000, steps, lr, out.stddev, delta)
    # its plan clips at L = 1 (never binding on the unit ball) and adds z·L = stddev to the sum
    assert config.plan.l2_clip_norm == 1.0 and config.plan.noise_multiplier == pytest.approx(
        out.stddev
    )
    assert (config.plan.sampler, config.plan.steps, config.plan.neighboring_relation) == (
        "full",
        steps,
        "replace_one",
    )
    _, k_train = jax.random.split(key)
    swept = sweep_points(
        config,
        config.model.init(k_train),
        (out.pca.data, data.y),
        k_train[None],
        {"learning_rate": [lr]},
    )
    np.testing.assert_allclose(np.asarray(swept.params["w"])[0, 0, :, 0], w, rtol=1e-5, atol=1e-6)
    # the guarantee is Theorem 7 at μ = 1 + R/4 = 1.25
    assert out.guarantee == theorem7(eps, delta, gap / 4, smoothness=1.25)


def test_spec_11_5_values_through_the_learner():
    """§11.5 (μ = L = 1): the PTR learner's guarantee is theorem7's (pinned in tests/accounting
    too)."""
    r = ptr.guarantee(0.1, 1e-5, 1.0)
    assert (r.constant_c, r.epsilon_hat, r.total_epsilon, r.ptr_threshold) == pytest.approx(
        (149.84, 12.768, 12.868, 122.06), abs=5e-3
    )
    r = ptr.guarantee(0.05, 1e-6, 0.5)
    assert (r.constant_c, r.epsilon_hat, r.total_epsilon, r.ptr_threshold) == pytest.approx(
        (596.36, 13.952, 14.002, 290.17), abs=5e-3
    )
    assert proposition8_failure_probability(0.5, 0.25, 10_000, 1.0, 1e-5) == pytest.approx(
        5.06e-85, rel=1e-3
    )
    assert proposition8_min_gap(0.25, 10_000, 1.0, 1e-5) == pytest.approx(0.2640, abs=5e-5)
    # Prop. 8's p_fail bounds the ⊥ probability under Algorithm 1's own threshold log(2/δ)/ε as
    # well: P(J_lb + Lap(1/ε) ≤ log(2/δ)/ε) = ½ exp(−(J_lb ε − log(2/δ))) with J_lb = (δ_k − β)/g_n
    n, gap, beta, eps, delta = 10_000, 0.5, 0.25, 1.0, 1e-5
    j = (gap - beta) / ptr.gap_change_bound(n)
    exact = 0.5 * math.exp(-(j * eps - math.log(2 / delta)))
    assert exact <= proposition8_failure_probability(gap, beta, n, eps, delta) * 2 * (1 + 1e-9)


@pytest.mark.parametrize("level", ["numeric", "paper"])
def test_calibrate_epsilon(level):
    eps = ptr.calibrate_epsilon(12.868, 1e-5, 1.0, level=level)
    r = ptr.guarantee(eps, 1e-5, 1.0)
    total = r.numeric_total_epsilon if level == "numeric" else r.total_epsilon
    assert total <= 12.868 and total == pytest.approx(12.868, rel=1e-9)
    if level == "paper":
        assert eps == pytest.approx(0.1, rel=1e-4)  # §11.5: ε = 0.1 gives 12.868
    else:
        assert eps > 0.1  # the rigorous level is tighter than the paper's closed form (§10.19)


def test_bad_input():
    data = low_rank_logistic(200, 5, 1, seed=0)
    kw = dict(epsilon=1.0, delta=1e-5, key=jax.random.key(0), steps=5, learning_rate=0.1)
    with pytest.raises(ValueError, match="k must be smaller"):
        ptr.algorithm1(data.x, data.y, k=5, beta=0.1, **kw)
    with pytest.raises(ValueError, match="beta"):
        ptr.algorithm1(data.x, data.y, k=1, beta=0.0, **kw)
    with pytest.raises(ValueError, match="beta"):
        ptr.algorithm1(data.x, data.y, k=1, beta=-1.0, **kw)
    with pytest.raises(ValueError, match="x rows must lie in the unit"):
        ptr.algorithm1(data.x * 2, data.y, k=1, beta=0.1, **kw)
    with pytest.raises(ValueError, match="n must be >= 101"):
        ptr.algorithm1(data.x[:100], data.y[:100], k=1, beta=0.1, **kw)
    with pytest.raises(ValueError, match="epsilon"):
        ptr.algorithm1(data.x, data.y, k=1, beta=0.1, **{**kw, "epsilon": 0.0})
    with pytest.raises(TypeError, match="key"):  # dpprep.validation.check_key: a TypeError
        ptr.algorithm1(data.x, data.y, k=1, beta=0.1, **{**kw, "key": 3})
    with pytest.raises(ValueError, match="n must be >= 101"):
        ptr.distance_statistic(data.x[:50], 1, 0.1)
    with pytest.raises(ValueError, match="level"):
        ptr.calibrate_epsilon(1.0, 1e-5, 1.0, level="exact")


def test_laplace_test_on_a_precomputed_statistic_matches_ptr_test():
    data = low_rank_logistic(500, 6, 1, seed=4)
    key = jax.random.key(11)
    a = ptr.ptr_test(data.x, 1, 0.3, 0.5, 1e-5, key)
    b = ptr.laplace_test(ptr.distance_statistic(data.x, 1, 0.3), 0.5, 1e-5, key)
    assert a == b
    with pytest.raises(ValueError, match="statistic"):
        ptr.laplace_test(-1.0, 0.5, 1e-5, key)


def test_statistic_from_gap_matches_distance_statistic():
    data = low_rank_logistic(500, 6, 1, seed=4)
    pca = pca_reduce(data.x, 1)
    want = ptr.distance_statistic(data.x, 1, 0.3)
    assert ptr.statistic_from_gap(pca.gap_k, 500, 0.3) == pytest.approx(want, rel=1e-10)
    with pytest.raises(ValueError, match="n must be an integer >= 101"):
        ptr.statistic_from_gap(0.5, 100, 0.1)


def test_algorithm1_sweep_is_algorithm1_at_every_point():
    """The sweep and the single run are one code path: each (ε, key, step size) of the sweep is
    Algorithm 1 with that ε, key and step size (same test, same ⊥, same DP-GD up to float32 order).
    """
    data = low_rank_logistic(3000, 10, 1, seed=2)
    gap = ptr.eigen_gap(data.x, 1)
    eps_list, lrs, steps, delta = [0.01, 8.0], [0.3, 1.0], 10, 1e-5
    keys = jax.random.split(jax.random.key(5), 2)
    run = ptr.algorithm1_sweep(
        data.x,
        data.y,
        k=1,
        beta=gap / 4,
        epsilons=eps_list,
        delta=delta,
        keys=keys,
        steps=steps,
        learning_rates=lrs,
        eval_data=(data.x, data.y),
    )
    # J_lb ≈ 150: far below ε = 0.01's threshold log(2e5)/0.01 ≈ 1221, far above ε = 8's ≈ 1.5
    np.testing.assert_array_equal(run.passed, [[False, False], [True, True]])
    assert run.trained and run.params["w"].shape == (2, 2, 2, 10, 1)
    assert np.isnan(run.params["w"][0]).all() and np.isnan(run.evaluation["loss"][0]).all()
    assert np.isfinite(run.evaluation["loss"][1]).all()
    np.testing.assert_allclose(run.stddev, [2 * math.sqrt(steps) / e for e in eps_list])
    assert run.guarantees == tuple(theorem7(e, delta, gap / 4, smoothness=1.25) for e in eps_list)
    for i, eps in enumerate(eps_list):
        for s in range(2):
            for p, lr in enumerate(lrs):
                one = ptr.algorithm1(
                    data.x,
                    data.y,
                    k=1,
                    beta=gap / 4,
                    epsilon=eps,
                    delta=delta,
                    key=keys[s],
                    steps=steps,
                    learning_rate=lr,
                )
                assert one.test == run.tests[i][s] and one.stddev == run.stddev[i]
                if run.passed[i, s]:
                    np.testing.assert_allclose(
                        np.asarray(one.output["w"]), run.params["w"][i, s, p], rtol=1e-5, atol=1e-7
                    )
                else:
                    assert one.is_bottom
    # evaluation is the engine's loss of each returned model on eval_data
    w = run.params["w"][1, 0, 1, :, 0]
    z = data.x @ w
    assert run.evaluation["loss"][1, 0, 1] == pytest.approx(
        np.mean(np.logaddexp(0, z) - data.y * z), rel=1e-5
    )


def test_algorithm1_sweep_shares_a_given_pca_and_trains_nothing_when_every_test_fails():
    data = low_rank_logistic(500, 6, 1, seed=4)
    pca = pca_reduce(data.x, 1, mode="rank")
    keys = jax.random.split(jax.random.key(0), 3)
    kw = dict(k=1, beta=0.01, delta=1e-5, keys=keys, steps=5, learning_rates=[0.1])
    a = ptr.algorithm1_sweep(data.x, data.y, epsilons=[1e-3, 2e-3], pca=pca, **kw)
    b = ptr.algorithm1_sweep(data.x, data.y, epsilons=[1e-3, 2e-3], **kw)
    assert a.tests == b.tests and a.pca is pca
    assert not a.passed.any() and not a.trained and a.params is None and a.evaluation == {}
    with pytest.raises(ValueError, match="pca must be"):
        ptr.algorithm1_sweep(
            data.x, data.y, epsilons=[1.0], pca=pca_reduce(data.x, 1, mode="dim"), **kw
        )
    with pytest.raises(ValueError, match="pca must be"):
        ptr.algorithm1_sweep(
            data.x, data.y, epsilons=[1.0], pca=pca_reduce(data.x[:400], 1, mode="rank"), **kw
        )
    with pytest.raises(TypeError, match="keys"):  # dpprep.validation.check_key: a TypeError
        ptr.algorithm1_sweep(data.x, data.y, epsilons=[1.0], **{**kw, "keys": jax.random.key(0)})
    with pytest.raises(ValueError, match="epsilon"):
        ptr.algorithm1_sweep(data.x, data.y, epsilons=[1.0, -1.0], **kw)
    with pytest.raises(ValueError, match="non-empty"):
        ptr.algorithm1_sweep(data.x, data.y, epsilons=[], **kw)
