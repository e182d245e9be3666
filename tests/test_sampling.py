"""Batch selection: Poisson sizes are Binomial(n, q), every example is reachable, padding and
overflow behave as documented, shuffled epochs are permutations, stopping times are uniform."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpprep import sampling


def _chi_square_pvalue(
    observed_values: np.ndarray, support: np.ndarray, pmf: np.ndarray, min_expected=5.0
):
    """Chi-square goodness of fit of integer draws to a pmf, merging sparse cells into
    neighbours."""
    total = len(observed_values)
    counts = np.array([np.sum(observed_values == k) for k in support], float)
    outside = total - counts.sum()
    expected = pmf * total
    obs_cells, exp_cells, o, e = [], [], outside, (1.0 - pmf.sum()) * total
    for c, x in zip(counts, expected):
        o, e = o + c, e + x
        if e >= min_expected:
            obs_cells.append(o)
            exp_cells.append(e)
            o, e = 0.0, 0.0
    obs_cells[-1] += o
    exp_cells[-1] += e
    exp_cells = np.array(exp_cells) * total / np.sum(exp_cells)
    return stats.chisquare(obs_cells, exp_cells).pvalue


@jax.jit
def _draws(keys):
    return jax.vmap(lambda k: sampling.poisson_batch(k, 200, 0.1, 60))(keys)


def test_poisson_sizes_are_binomial_and_every_example_is_selected():
    keys = jax.random.split(jax.random.PRNGKey(0), 4000)
    indices, mask, sizes, overflow = map(np.asarray, _draws(keys))
    assert not overflow.any()
    support = np.arange(0, 61)
    assert _chi_square_pvalue(sizes, support, stats.binom.pmf(support, 200, 0.1)) > 1e-3
    # The mask marks exactly `size` slots, and the selected indices are distinct and sorted.
    np.testing.assert_array_equal(mask.sum(axis=1), sizes)
    for row, m in zip(indices[:50], mask[:50]):
        chosen = row[m > 0]
        assert np.all(np.diff(chosen) > 0)
    # Every index is selected, each about q·draws = 400 times (Binomial(4000, 0.1), sd 19).
    counts = np.bincount(indices[mask > 0], minlength=200)
    assert counts.min() > 0
    assert np.all(np.abs(counts - 400) < 6 * math.sqrt(4000 * 0.1 * 0.9))


def test_a_wrong_rate_is_detected_by_the_size_test():
    """The chi-square test above has power: q = 0.11 draws are rejected as Binomial(200, 0.1)."""
    keys = jax.random.split(jax.random.PRNGKey(1), 4000)
    sizes = np.asarray(
        jax.jit(jax.vmap(lambda k: sampling.poisson_batch(k, 200, 0.11, 60)[2]))(keys)
    )
    support = np.arange(0, 61)
    assert _chi_square_pvalue(sizes, support, stats.binom.pmf(support, 200, 0.1)) < 1e-3


def test_pad_size_bounds_the_overflow_probability_and_is_minimal():
    for n, q, steps in [(60000, 4096 / 60000, 1172), (1000, 0.001, 5000), (50, 0.5, 10)]:
        pad = sampling.poisson_pad_size(n, q, steps, max_overflow_prob=1e-10)
        assert steps * stats.binom.sf(pad, n, q) <= 1e-10
        assert steps * stats.binom.sf(pad - 1, n, q) > 1e-10
        assert sampling.overflow_probability(n, q, pad, steps) <= 1e-10
    assert sampling.poisson_pad_size(10, 1.0) == 10


def test_overflow_is_flagged_not_silent():
    key = jax.random.PRNGKey(3)
    indices, mask, size, overflow = sampling.poisson_batch(key, 100, 0.5, 10)
    assert bool(overflow) and int(size) > 10
    np.testing.assert_array_equal(mask, 1.0)
    selected = np.nonzero(np.asarray(jax.random.bits(key, (100,), jnp.uint32)) < 2**31)[0]
    np.testing.assert_array_equal(indices, selected[:10])


def test_inclusion_probability_never_exceeds_q():
    for q in (1e-9, 1 / 3, 4096 / 60000, 0.5, 1 - 1e-12):
        t = sampling.inclusion_threshold(q)
        assert q - 2.0**-32 < t / 2.0**32 <= q
    assert sampling.inclusion_threshold(1.0) is None
    _, mask, size, overflow = sampling.poisson_batch(jax.random.PRNGKey(0), 7, 1.0, 7)
    assert int(size) == 7 and not bool(overflow) and float(mask.sum()) == 7


def test_overflow_delta_and_arguments():
    assert sampling.overflow_delta(1.0, 1e-10) == pytest.approx((1 + math.e) * 1e-10)
    with pytest.raises(ValueError, match="epsilon"):
        sampling.overflow_delta(0.0, 1e-10)
    with pytest.raises(ValueError, match="q"):
        sampling.poisson_pad_size(100, 0.0)
    with pytest.raises(ValueError, match="q"):
        sampling.poisson_pad_size(100, 1.5)
    with pytest.raises(ValueError, match="n"):
        sampling.poisson_pad_size(0, 0.5)


def test_overflow_delta_beyond_the_float_range_of_exp():
    # Issue 21: math.exp(epsilon) raised OverflowError for epsilon > 709.78.
    assert sampling.overflow_delta(800.0, 1e-10) == math.inf
    assert sampling.overflow_delta(1e300, 1e-10) == math.inf
    assert sampling.overflow_delta(800.0, 0.0) == 0.0
    tiny = 1e-320  # (1 + e^750)·1e-320 is finite: log space keeps it
    assert sampling.overflow_delta(750.0, tiny) == pytest.approx(
        math.exp(750.0 + math.log(tiny)), rel=1e-9
    )
    # unchanged below
    assert sampling.overflow_delta(699.0, 1e-10) == (1.0 + math.exp(699.0)) * 1e-10


def test_shuffled_batches_are_permutations_per_epoch():
    indices, mask = sampling.shuffled_batches(jax.random.PRNGKey(0), 10, 4, 3)
    assert indices.shape == (9, 4) and mask.shape == (9, 4)
    for epoch in range(3):
        idx = np.asarray(indices[3 * epoch : 3 * epoch + 3]).ravel()
        m = np.asarray(mask[3 * epoch : 3 * epoch + 3]).ravel()
        assert sorted(idx[m > 0]) == list(range(10))
        assert m.sum() == 10
    assert not np.array_equal(indices[:3], indices[3:6])
    assert sampling.steps_per_epoch(10, 4) == 3
    assert sampling.poisson_steps(60000, 4096, 80) == 1172


def test_stopping_time_is_uniform():
    n, kappa = 20, 4
    keys = jax.random.split(jax.random.PRNGKey(5), 5000)
    t = np.asarray(jax.jit(jax.vmap(lambda k: sampling.stopping_time(k, n, kappa)))(keys))
    support = np.arange(1, n - kappa + 2)
    assert t.min() == 1 and t.max() == n - kappa + 1
    assert _chi_square_pvalue(t, support, np.full(len(support), 1 / len(support))) > 1e-3


def test_one_sampler_vocabulary():
    """Every module that names samplers names registered ones (one vocabulary: the registry)."""
    from dpprep.accounting import dp
    from dpprep.preprocess.privacy import sgd_samp
    from dpprep.corrdp import sgd as corrdp_sgd

    for names in (dp.SAMPLINGS, sgd_samp.SAMPLINGS, corrdp_sgd.SAMPLINGS):
        assert set(names) <= set(sampling.SAMPLERS), names
    # What the plan charges uses the accountant's names for the sampler's own event.
    for name in dp.SAMPLINGS:
        impl = sampling.get(name)
        assert impl.name == name
