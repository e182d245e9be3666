"""The CorrDP definition (spec §1): Eq. 1 on Ex. 2.6, weights, correlated sensitivity, Laplace."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpprep.corrdp import defs


def _example_2_6(p_x2=(0.5, 0.5)) -> np.ndarray:
    # m = 2, S = {X1}, U = {X2}; X1 | X2 = k ~ Bernoulli(k/3), k ∈ {1, 2}: joint[x1, k-1]
    joint = np.zeros((2, 2))
    for j, k in enumerate((1, 2)):
        joint[1, j] = p_x2[j] * k / 3
        joint[0, j] = p_x2[j] * (1 - k / 3)
    return joint


@pytest.mark.parametrize("p_x2", [(0.5, 0.5), (0.2, 0.8)])
def test_example_2_6_distances_are_exact(p_x2):
    joint = _example_2_6(p_x2)
    # e = (1, 2), e' = (0, 1): differ in the sensitive coordinate -> d = 1
    assert defs.corrdp_distance(joint, [0], (1, 1), (0, 0)) == pytest.approx(1.0, abs=1e-12)
    # e = (1, 2), e' = (1, 1): differ only in X2 -> TV(Bern(2/3), Bern(1/3)) = 1/3
    assert defs.corrdp_distance(joint, [0], (1, 1), (1, 0)) == pytest.approx(1 / 3, abs=1e-12)
    assert defs.feature_tv_weights(joint, [0]) == {1: pytest.approx(1 / 3, abs=1e-12)}


def test_distance_axioms_on_an_independent_insensitive_feature():
    joint = np.outer([0.3, 0.7], [0.1, 0.5, 0.4])  # X1 ⟂ X2 (axiom 4): d = 0
    assert defs.corrdp_distance(joint, [0], (0, 0), (0, 2)) == pytest.approx(0.0, abs=1e-12)
    assert defs.corrdp_distance(joint, [0], (0, 0), (1, 0)) == 1.0  # axiom 2
    assert defs.corrdp_distance(joint, [0], (0, 0), (1, 2)) == 1.0  # both change (Remark 2.4)
    with pytest.raises(ValueError, match="probability table"):
        defs.corrdp_distance(joint * 2, [0], (0, 0), (0, 2))


def test_block_weight_dominates_single_feature_weights():
    rng = np.random.default_rng(0)
    joint = rng.random((3, 2, 2))
    joint /= joint.sum()
    single = defs.feature_tv_weights(joint, [0])
    block = defs.feature_tv_weights(joint, [0], block=True)["U"]
    assert set(single) == {1, 2}
    assert block >= max(single.values()) - 1e-12  # conditioning on more can only separate more
    # Eq. 1 between records differing in U is bounded by the block weight
    assert defs.corrdp_distance(joint, [0], (0, 0, 0), (0, 1, 1)) <= block + 1e-12


def test_index_set_validation_names_the_feature():
    with pytest.raises(ValueError, match=r"\[2\] are in both sensitive and insensitive"):
        defs.check_index_sets([0, 2], [1, 2], 3)
    with pytest.raises(ValueError, match=r"\[3\] are in neither sensitive nor insensitive"):
        defs.check_index_sets([0, 1], [2], 4)
    with pytest.raises(ValueError, match="outside"):
        defs.check_index_sets([0, 5], [1], 3)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=2, max_size=8), st.data())
def test_correlated_sensitivity_limits(coord, data):
    m = len(coord)
    m_s = data.draw(st.integers(1, m - 1))
    s, u = list(range(m_s)), list(range(m_s, m))
    total = float(np.sum(coord))
    # tv ≡ 1: Δf
    assert defs.correlated_sensitivity(coord, np.ones(len(u)), s, u) == pytest.approx(total)
    assert defs.correlated_sensitivity(coord, np.zeros(len(u)), s, u) == pytest.approx(
        sum(coord[:m_s])
    )  # tv ≡ 0
    tv = np.asarray(data.draw(st.lists(st.floats(0, 1), min_size=len(u), max_size=len(u))))
    mid = defs.correlated_sensitivity(coord, tv, s, u)
    assert sum(coord[:m_s]) - 1e-9 <= mid <= total + 1e-9
    assert defs.correlated_sensitivity(coord, tv, s, u, l1_sens=0.5 * total) <= 0.5 * total + 1e-12


def test_correlated_sensitivity_validation():
    with pytest.raises(ValueError, match="tv must lie in"):
        defs.correlated_sensitivity([1.0, 1.0], [1.5], [0], [1])
    with pytest.raises(ValueError, match="one entry per insensitive"):
        defs.correlated_sensitivity([1.0, 1.0, 1.0], [0.5], [0], [1, 2])
    with pytest.raises(ValueError, match="neither"):
        defs.correlated_sensitivity([1.0, 1.0, 1.0], [0.5], [0], [1])


def test_laplace_noise_has_the_correlated_scale():
    coord, tv, s, u = np.ones(6), np.array([0.2, 0.5, 0.1]), [0, 1, 2], [3, 4, 5]
    eps = 0.5
    scale = (3 + 0.8) / eps
    draws = np.stack(
        [
            np.asarray(defs.corrdp_laplace(k, np.zeros(6), coord, tv, s, u, eps))
            for k in jax.random.split(jax.random.key(0), 2000)
        ]
    ).reshape(-1)
    # KS against Laplace(0, Δ_C/ε): 12,000 draws; a 20 % scale error would be rejected
    assert stats.kstest(draws, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(draws, stats.laplace(scale=1.2 * scale).cdf).pvalue < 1e-6
    with pytest.raises(ValueError, match="epsilon"):
        defs.corrdp_laplace(jax.random.key(0), np.zeros(6), coord, tv, s, u, 0.0)


def test_laplace_tail_bound_coverage():
    coord, tv, s, u = np.ones(10), np.full(7, 0.3), [0, 1, 2], list(range(3, 10))
    eps, beta = 1.0, 0.1
    delta_c = defs.correlated_sensitivity(coord, tv, s, u)
    radius = defs.laplace_tail_bound(delta_c, eps, 10, beta)
    assert radius == pytest.approx(delta_c * math.log(100))
    keys = jax.random.split(jax.random.key(1), 10_000)
    errs = jax.vmap(lambda k: defs.corrdp_laplace(k, np.zeros(10), coord, tv, s, u, eps))(keys)
    coverage = float(np.mean(np.max(np.abs(np.asarray(errs)), axis=1) <= radius))
    assert coverage >= 0.89  # Thm 2.10 promises >= 0.9; item 25's Monte Carlo tolerance
    with pytest.raises(ValueError, match="beta"):
        defs.laplace_tail_bound(1.0, 1.0, 10, 0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=50))
def test_inequality_chain_item_24(tv):
    middle = defs.lower_bound_dimension_term(tv)
    assert max(tv) ** 2 <= middle + 1e-12
    assert middle <= sum(tv) + 1e-12
