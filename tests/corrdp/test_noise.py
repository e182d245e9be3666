"""CorrDP noise levels: Eq. 4 variances, the §5.1 method factors, Eq. 5 placement, C presets and
bad input."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpprep import models
from dpprep.corrdp import noise


def test_k_delta_matches_the_spec():
    assert noise.k_delta(1e-4) == pytest.approx(10.2103, abs=1e-4)
    assert noise.k_delta(1e-5) == pytest.approx(12.5129, abs=1e-4)


def test_eq4_variances_by_hand():
    # m = 5, S = {0, 1}, U = {2, 3, 4}; L = 2, T = 100, n = 50, ε = 0.5, δ = 1e-5.
    tv = np.array([0.3, 0.1, 0.0])
    base = noise.k_delta(1e-5) * 4 * 100 / (50**2 * 0.25)
    got = noise.eq4_variances(
        5, [0, 1], tv, lipschitz=2.0, steps=100, n=50, epsilon=0.5, delta=1e-5
    )
    floor = (2 / 5) ** 2  # 0.16 beats 0.1 and 0
    np.testing.assert_allclose(got, base * np.array([1, 1, 0.3, floor, floor]), rtol=1e-12)
    no_floor = noise.eq4_variances(
        5, [0, 1], tv, lipschitz=2.0, steps=100, n=50, epsilon=0.5, delta=1e-5, use_floor=False
    )
    np.testing.assert_allclose(no_floor, base * np.array([1, 1, 0.3, 0.1, 0.0]), rtol=1e-12)
    # n is the full dataset size: halving n quadruples every variance.
    half = noise.eq4_variances(
        5, [0, 1], tv, lipschitz=2.0, steps=100, n=25, epsilon=0.5, delta=1e-5
    )
    np.testing.assert_allclose(half, 4 * got, rtol=1e-12)


def test_method_factors_of_section_5():
    s, tv = [0, 1], [0.2, 0.5]
    np.testing.assert_array_equal(noise.method_factors("standard", 4, s), [1, 1, 1, 1])
    np.testing.assert_array_equal(noise.method_factors("semi", 4, s), [1, 1, 0, 0])
    np.testing.assert_allclose(noise.method_factors("corrdp", 4, s, tv), [1, 1, 0.2, 0.5])
    np.testing.assert_array_equal(noise.method_factors("partial", 4, s), [0, 0, 0, 0])
    np.testing.assert_array_equal(noise.partial_feature_mask(4, s), [0, 0, 1, 1])
    # An intercept (column 4, in neither set) keeps factor 1 under every private method.
    np.testing.assert_allclose(
        noise.method_factors("corrdp", 5, s, tv, insensitive=[2, 3]), [1, 1, 0.2, 0.5, 1]
    )
    np.testing.assert_allclose(
        noise.method_factors("semi", 5, s, insensitive=[2, 3]), [1, 1, 0, 0, 1]
    )
    with pytest.raises(ValueError, match="tv"):
        noise.method_factors("corrdp", 4, s)
    with pytest.raises(ValueError, match="method"):
        noise.method_factors("dp", 4, s)


def test_relaxations_graded_and_label_scale():
    f = noise.corrdp_factors(3, [0], [0.2, 0.4], use_floor=False, graded=[1.0, 0.5, 0.0])
    np.testing.assert_allclose(f, [1.0, 0.5 * 0.2 + 0.5, 0.4])
    f = noise.corrdp_factors(3, [0], [0.2, 0.4], use_floor=False, label_scale=0.3)
    np.testing.assert_allclose(f, [1.0, 0.3, 0.4])


@settings(max_examples=50, deadline=None)
@given(
    st.integers(2, 30).flatmap(
        lambda m: st.tuples(
            st.just(m), st.integers(1, m - 1), st.lists(st.floats(0, 1), min_size=m, max_size=m)
        )
    )
)
def test_corrdp_factors_lie_between_semi_and_standard(args):
    """Property: 0 ≤ Semi ≤ CorrDP (floored or not) ≤ Standard = 1, floor ≥ m_s²/m² on U."""
    m, m_s, tvs = args
    s = list(range(m_s))
    tv = np.array(tvs[m_s:])
    semi = noise.method_factors("semi", m, s)
    plain = noise.corrdp_factors(m, s, tv, use_floor=False)
    floored = noise.corrdp_factors(m, s, tv, use_floor=True)
    assert np.all(semi <= plain) and np.all(plain <= floored) and np.all(floored <= 1.0)
    assert np.all(floored[m_s:] >= (m_s / m) ** 2 - 1e-15)
    np.testing.assert_array_equal(floored[:m_s], 1.0)


def test_param_factors_place_the_factor_on_w1_rows_and_b1():
    params = models.mlp(3, 4, 2).init(jax.random.key(0))
    f = np.array([1.0, 0.3, 0.2])  # input 0 sensitive, inputs 1, 2 insensitive
    paper = noise.param_factors(params, f)
    np.testing.assert_array_equal(np.broadcast_to(paper["w1"], (3, 4))[:, 2], np.float32(f))
    assert float(paper["b1"]) == pytest.approx(0.3)  # the largest insensitive factor (A8)
    assert float(paper["w2"]) == 1.0 and float(paper["b2"]) == 1.0
    conservative = noise.param_factors(params, f, bias_factor="sensitive")
    assert float(conservative["b1"]) == 1.0
    semi = noise.param_factors(params, np.array([1.0, 0.0, 0.0]))
    assert float(semi["b1"]) == 0.0
    glm = models.logistic_regression(3, fit_intercept=True).init(None)
    out = noise.param_factors(glm, f)
    np.testing.assert_array_equal(out["w"][:, 0], np.float32(f))
    assert float(out["b"]) == 1.0
    assert noise.noise_trace(paper, params) == pytest.approx(
        4 * 1.5 + 4 * 0.3 + 4 * 2 + 2, rel=1e-6
    )


def test_presets():
    assert noise.theory_constant(3.0, 5000, 45175) == pytest.approx(9 * 5000 / 45175**2)
    assert noise.constant("theory", lipschitz=5.0, steps=200, n=10_000) == pytest.approx(5e-5)
    assert noise.constant("paper", dataset="synthetic") == 1.0
    assert noise.constant("paper", dataset="adult") == 3e-3
    with pytest.raises(ValueError, match="calibrated"):
        noise.constant("paper", dataset="credit")
    with pytest.raises(ValueError, match="c_mode"):
        noise.constant("eq4", dataset="adult")
    assert noise.base_variance(0.5, 1e-4, 1.0) == pytest.approx(noise.k_delta(1e-4) / 0.25)


def test_bad_input_is_refused_by_name():
    params = models.mlp(3, 4, 2).init(jax.random.key(0))
    with pytest.raises(ValueError, match=r"\['w1'\]"):
        noise.check_param_factors(params, {"w1": np.ones((4, 3)), "b1": 1.0, "w2": 1.0, "b2": 1.0})
    with pytest.raises(ValueError, match="missing leaves"):
        noise.check_param_factors(params, {"w1": 1.0, "b1": 1.0, "w2": 1.0})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        noise.check_param_factors(params, {"w1": 1.5, "b1": 1.0, "w2": 1.0, "b2": 1.0})
    with pytest.raises(ValueError, match="tv"):
        noise.corrdp_factors(3, [0], [0.5, 1.2])
    with pytest.raises(ValueError, match="column_factors"):
        noise.param_factors(params, [1.0, -0.1, 0.5])
    with pytest.raises(ValueError, match="rows"):
        noise.param_factors(params, [1.0, 0.5])
    with pytest.raises(ValueError, match="epsilon"):
        noise.base_variance(0.0, 1e-5, 1.0)
    with pytest.raises(ValueError, match="delta"):
        noise.eq4_variances(3, [0], 0.5, lipschitz=1, steps=1, n=10, epsilon=1, delta=1.0)
    with pytest.raises(ValueError, match="delta"):
        noise.k_delta(0.0)
    with pytest.raises(ValueError, match="overlap"):
        noise.corrdp_factors(3, [0, 1], 0.5, insensitive=[1, 2])
    with pytest.raises(ValueError, match="sensitive"):
        noise.corrdp_factors(3, [5], 0.5)
    assert math.isfinite(noise.k_delta(0.5))


def _one_hot_data(rng, blocks=(3, 1, 4, 2)):
    """A CorrDPData named "adult" (a one-hot / MinMax encoding): one-hot blocks (size > 1), MinMax
    columns (size 1), an intercept; the last two raw features insensitive."""
    from dpprep.corrdp.data import CorrDPData

    groups, start = {}, 0
    for b, size in enumerate(blocks):
        groups[f"f{b}"] = tuple(range(start, start + size))
        start += size
    rows = []
    for _ in range(50):
        row = np.zeros(start + 1)
        for g in groups.values():
            if len(g) == 1:
                row[g[0]] = rng.uniform()
            else:
                row[rng.choice(g)] = 1.0
        row[-1] = 1.0
        rows.append(row)
    names = tuple(f"c{j}" for j in range(start)) + ("intercept",)
    sens = {k: v for k, v in list(groups.items())[:2]}
    ins = {k: v for k, v in list(groups.items())[2:]}
    return CorrDPData(
        "adult",
        np.array(rows),
        rng.integers(0, 2, 50).astype(float),
        "classification",
        names,
        tuple(i for v in sens.values() for i in v),
        tuple(i for v in ins.values() for i in v),
        ins,
        start,
        {k: 0.5 for k in ins},
        "toy",
        sensitive_groups=sens,
    )


def test_whitened_gradient_bound_bounds_and_is_attained():
    """Over random domain records and parameters, every logistic gradient has ‖D^{-1/2}g‖ ≤ L_f;
    the record with each block at its least-noisy column and a saturated margin comes within 1e-6.
    """
    rng = np.random.default_rng(0)
    data = _one_hot_data(rng)
    for _ in range(20):
        f = rng.uniform(0.05, 1.0, data.m)
        bound, why = noise.whitened_gradient_bound(data, f)
        assert why.startswith("domain: √5")
        x = np.array(data.x)
        theta = rng.normal(size=data.m) * 3
        y = rng.integers(0, 2, x.shape[0])
        g = (1 / (1 + np.exp(-x @ theta)) - y)[:, None] * x
        assert np.max(np.linalg.norm(g / np.sqrt(f), axis=1)) <= bound
        worst = np.zeros(data.m)
        for cols in [*data.sensitive_groups.values(), *data.insensitive_groups.values()]:
            worst[cols[int(np.argmin(f[list(cols)]))]] = 1.0
        worst[data.intercept] = 1.0
        g = (1 / (1 + np.exp(-worst @ (-50 * worst))) - 1.0) * worst  # σ → 0, y = 1: |σ − y| → 1
        assert np.linalg.norm(g / np.sqrt(f)) == pytest.approx(bound, rel=1e-6)
    clipped, _ = noise.whitened_gradient_bound(data, f, l2_clip_norm=2.0)
    assert clipped == pytest.approx(2.0 / math.sqrt(f.min()))
    unnamed = dataclasses.replace(data, name="mine")
    with pytest.raises(ValueError, match="no a-priori gradient bound"):
        noise.whitened_gradient_bound(unnamed, f)
    with pytest.raises(ValueError, match="entries"):
        noise.whitened_gradient_bound(data, f[:-1])
