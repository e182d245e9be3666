"""Named PRNG streams: deterministic, distinct by name, independent of one another; learners with
the same key and sampler share batches whatever their noise or feature transform."""

from __future__ import annotations

import dataclasses
import math
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.features import AffineFeatures
from dpprep import models, noise, sampling, streams
from dpprep.accounting.dp import AccountingOptions
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.plan import DPPlan

KEY = jax.random.PRNGKey(3)
RNG = np.random.default_rng(4)
N, D = 40, 3
X = RNG.normal(size=(N, D)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)
LOGISTIC = models.logistic_regression(D)


def _bits(key):
    return np.asarray(
        jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    )


def test_stream_is_deterministic_distinct_by_name_and_key():
    a = streams.stream(KEY, streams.BATCH)
    np.testing.assert_array_equal(_bits(a), _bits(streams.stream(KEY, "batch")))
    names = [streams.BATCH, streams.NOISE, streams.STOP, "private_mean", "batch ", "Batch"]
    keys = {tuple(_bits(streams.stream(KEY, name))) for name in names}
    assert len(keys) == len(names)
    assert tuple(_bits(a)) != tuple(_bits(streams.stream(jax.random.PRNGKey(4), streams.BATCH)))
    assert tuple(_bits(a)) != tuple(_bits(KEY))
    # Stable across processes: fold_in of the name's CRC-32 (31 bits), not Python's salted hash.
    np.testing.assert_array_equal(
        _bits(a), _bits(jax.random.fold_in(KEY, zlib.crc32(b"batch") & 0x7FFFFFFF))
    )
    # Typed keys give the same stream as raw keys with the same bits.
    typed = streams.stream(jax.random.wrap_key_data(KEY), streams.NOISE)
    np.testing.assert_array_equal(_bits(typed), _bits(streams.stream(KEY, streams.NOISE)))


@pytest.mark.parametrize("name", ["", None, 3])
def test_stream_name_must_be_a_non_empty_string(name):
    with pytest.raises(ValueError, match="stream name"):
        streams.stream(KEY, name)


def test_dpsgd_and_dpsgd_f_with_the_same_seed_share_poisson_batches():
    """Different noise levels, noise units and feature transforms (DPSGD-F: a norm and a
    private mean) draw the same Poisson batches from the same key; another key does not."""
    layout = dict(batch_size=10, steps=12)
    base = TrainConfig(LOGISTIC, None, extensions=(AffineFeatures(), CoordinateNoise()))
    # One pytree structure for all (identity transform where none), so one compilation.
    plain = {"feature_scale": 1.0, "feature_shift": np.zeros(3, np.float32), "stddev": 0.0}

    def private(z, clip):
        return DPPlan.create(
            "poisson", N, l2_clip_norm=clip, noise_multiplier=z, delta=1e-5, **layout
        )

    variants = [
        (Hyper(0.5, extra=plain), private(1.0, 1.0)),
        (Hyper(0.1, extra=plain), private(4.0, 0.3)),
        # An absolute noise std (a nominal mechanism's, CoordinateNoise's) in a non-private plan.
        (Hyper(0.5, extra={**plain, "stddev": 2.0}), DPPlan.non_private("poisson", N, **layout)),
        (
            Hyper(
                0.5,
                extra={
                    **plain,
                    "feature_scale": 0.5,
                    "feature_shift": np.array([0.1, -0.2, 0.3], np.float32),
                },
            ),
            private(1.0, 1.0),
        ),
    ]
    runs = [
        train(dataclasses.replace(base, hyper=h, plan=p), LOGISTIC.init(None), (X, Y), KEY)
        for h, p in variants
    ]
    sizes = [np.asarray(m["batch_size"]) for _, m in runs]
    assert sizes[0].std() > 0  # the sizes vary, so equal sequences identify the batches
    for other in sizes[1:]:
        np.testing.assert_array_equal(sizes[0], other)
    assert not np.allclose(runs[0][0]["w"], runs[3][0]["w"])  # the transform took effect
    hyper, plan = variants[0]
    _, other_key = train(
        dataclasses.replace(base, hyper=hyper, plan=plan),
        LOGISTIC.init(None),
        (X, Y),
        jax.random.PRNGKey(99),
    )
    assert not np.array_equal(sizes[0], np.asarray(other_key["batch_size"]))


# one object: one compilation per config
ONE_HOT_MODEL = models.linear_regression(30, fit_intercept=False)


def _one_hot_hyper(feature_scale=1.0, stddev=0.0):
    """One pytree structure for every one-hot run (so one compilation per sampler); the noise
    only reaches a zero-scaled leaf, so w moves exactly on the batch's records. A zero scale has
    no place in a private plan (its noise would not cover w), so these runs' plans are
    non-private and a noise level is CoordinateNoise's nominal std."""
    return Hyper(
        0.01,
        extra={"feature_scale": feature_scale, "noise_scales": {"w": 0.0}, "stddev": stddev},
    )


def _one_hot_batches(sampling_name, steps, batch_size, seed, hyper, l2_clip_norm=math.inf):
    """Indices each step touched: record i is e_i (no intercept, y = 1, no noise on w), so step
    t changes exactly the weights of the records in its batch."""
    n, model = 30, ONE_HOT_MODEL
    plan = DPPlan.non_private(
        sampling_name, n, batch_size=batch_size, steps=steps, l2_clip_norm=l2_clip_norm
    )
    cfg = TrainConfig(
        model, hyper, plan, track_params=True, extensions=(AffineFeatures(), CoordinateNoise())
    )
    _, metrics = train(
        cfg,
        model.init(None),
        (np.eye(n, dtype=np.float32), np.ones(n, np.float32)),
        jax.random.PRNGKey(seed),
    )
    w = np.concatenate([np.zeros((1, n)), np.asarray(metrics["params"]["w"])[:, :, 0]])
    return [np.nonzero(np.diff(w, axis=0)[t])[0] for t in range(steps)], n


@pytest.mark.parametrize("sampling_name", ["shuffle", "without_replacement"])
def test_fixed_size_samplers_share_batches_across_noise_and_transforms(sampling_name):
    """Same key, same batches, whatever the noise level, clip bound or feature scale (the realised
    sizes are constant here, so the batches are read off one-hot data); another key differs."""
    hyper = _one_hot_hyper
    variants = [
        (hyper(), math.inf),
        (hyper(feature_scale=0.5), math.inf),
        (hyper(stddev=3.0), 1.0),
    ]
    touched = [_one_hot_batches(sampling_name, 5, 7, 2, h, clip)[0] for h, clip in variants]
    for other in touched[1:]:
        for a, b in zip(touched[0], other):
            np.testing.assert_array_equal(a, b)
    assert all(len(t) == 7 for t in touched[0][:4])  # shuffle: 30 = 4·7 + 2
    another = _one_hot_batches(sampling_name, 5, 7, 3, hyper())[0]
    assert any(not np.array_equal(a, b) for a, b in zip(touched[0], another))


def test_without_replacement_batches_come_from_the_batch_stream():
    """Each step's batch is B distinct records, exactly the draw of the "batch" stream (so the
    noise, drawn from the "noise" stream, cannot be correlated with it)."""
    steps, b, seed = 5, 7, 11
    touched, n = _one_hot_batches("without_replacement", steps, b, seed, _one_hot_hyper())
    k_batch = streams.stream(jax.random.PRNGKey(seed), streams.BATCH)
    seen = set()
    for t in range(steps):
        expected = np.asarray(
            sampling.without_replacement_batch(jax.random.fold_in(k_batch, t), n, b)
        )
        assert len(set(expected.tolist())) == b  # distinct
        np.testing.assert_array_equal(touched[t], np.sort(expected))
        seen.add(tuple(touched[t]))
    assert len(seen) == steps  # a fresh draw every step


def test_without_replacement_noise_is_independent_of_the_batch_stream():
    """Zero data gradients (x = 0) leave only the noise: it has the configured std and is
    uncorrelated with noise drawn from the batch stream's step keys (which it would equal if
    the two streams were the same)."""
    n, b, steps, d, seed, z = 16, 4, 3, 1000, 5, 1.0
    model = models.linear_regression(d, fit_intercept=False)
    # dp-accounting bounds sampling without replacement (a replace-one guarantee) by RDP only.
    plan = DPPlan.create(
        "without_replacement",
        n,
        batch_size=b,
        steps=steps,
        l2_clip_norm=1.0,
        noise_multiplier=z,
        delta=1e-5,
        options=AccountingOptions(accountant="rdp", neighboring_relation="replace_one"),
    )
    cfg = TrainConfig(model, Hyper(1.0), plan, track_params=True)
    _, metrics = train(
        cfg,
        model.init(None),
        (np.zeros((n, d), np.float32), np.zeros(n, np.float32)),
        jax.random.PRNGKey(seed),
    )
    iterates = np.concatenate(
        [np.zeros((1, d)), np.asarray(metrics["params"]["w"], np.float64)[:, :, 0]]
    )
    added = -np.diff(iterates, axis=0) * b  # noise on the sum
    np.testing.assert_array_equal(metrics["batch_size"], b)
    k_batch = streams.stream(jax.random.PRNGKey(seed), streams.BATCH)
    k_noise = streams.stream(jax.random.PRNGKey(seed), streams.NOISE)
    params = {"w": jnp.zeros((d, 1))}
    std = noise.leaf_stddevs(z, 1.0, None, params)
    for t in range(steps):
        assert 0.9 < np.std(added[t]) < 1.1
        from_batch = np.asarray(
            noise.gaussian_noise(jax.random.fold_in(k_batch, t), params, std)["w"]
        )[:, 0]
        from_noise = np.asarray(
            noise.gaussian_noise(jax.random.fold_in(k_noise, t), params, std)["w"]
        )[:, 0]
        assert abs(np.corrcoef(added[t], from_batch)[0, 1]) < 0.15
        # Power: the noise stream's draw is the noise added (correlation 1).
        assert np.corrcoef(added[t], from_noise)[0, 1] > 0.999
