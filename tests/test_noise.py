"""Noise: the std added in a training step is noise_multiplier·C·scale/N (KS tests with power
checks), per-coordinate scales are respected, and the scales are validated."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpprep import algorithms, corrdp, models, noise, sampling, streams, sweeps
from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.plan import DPPlan

D, K, N = 400, 10, 8
# one object, so runs of one hyper structure share a compilation
_MODEL = models.softmax_regression(D, K)


def _noise_of_one_step(noise_multiplier, l2_clip_norm, scales=None, seed=0, stddev=0.0):
    """The noise a full-batch step adds to the mean gradient, isolated by differencing the run
    with the same key and noise 0 (identical batches and clipping)."""
    model = _MODEL
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D)).astype(np.float32)
    y = rng.integers(0, K, size=N)
    key = jax.random.PRNGKey(seed)

    def run(on):
        # Per-coordinate scales and an absolute std are CorrDP's privatizer, an engine extension (a
        # nominal mechanism: its runs are non-private plans); without them the core's.
        nominal = scales is not None or stddev != 0
        extra = {"noise_scales": scales, "stddev": stddev * on} if nominal else None
        if on and noise_multiplier > 0:
            plan = DPPlan.create(
                "full",
                N,
                steps=1,
                l2_clip_norm=l2_clip_norm,
                noise_multiplier=noise_multiplier,
                delta=1e-5,
            )
        else:
            plan = DPPlan.non_private("full", N, steps=1, l2_clip_norm=l2_clip_norm)
        cfg = algorithms.TrainConfig(
            model,
            algorithms.Hyper(1.0, extra=extra),
            plan,
            extensions=(CoordinateNoise(),) if nominal else (),
        )
        return algorithms.train(cfg, model.init(key), (x, y), key)[0]

    noisy, clean = run(1.0), run(0.0)
    # SGD at learning rate 1: params = -(mean grad + noise/N); so noise/N = clean - noisy.
    return jax.tree_util.tree_map(lambda a, b: np.asarray(b - a, np.float64), noisy, clean)


def test_step_noise_has_the_configured_std():
    z, clip = 1.7, 0.3
    delta = _noise_of_one_step(z, clip)
    std_on_mean = z * clip / N
    sample = np.concatenate([delta["w"].ravel(), delta["b"].ravel()])
    assert stats.kstest(sample / std_on_mean, "norm").pvalue > 1e-3
    # The test has power: a std off by 2/3 or 3/2 is rejected.
    assert stats.kstest(sample / (std_on_mean * 2 / 3), "norm").pvalue < 1e-6
    assert stats.kstest(sample / (std_on_mean * 3 / 2), "norm").pvalue < 1e-6


def test_unclipped_runs_take_an_absolute_std_and_per_leaf_scales():
    std = 2.0
    delta = _noise_of_one_step(0.0, math.inf, scales={"w": 0.5, "b": 0.0}, seed=1, stddev=std)
    np.testing.assert_array_equal(delta["b"], 0.0)
    assert stats.kstest(delta["w"].ravel() / (std * 0.5 / N), "norm").pvalue > 1e-3
    assert stats.kstest(delta["w"].ravel() / (std * 0.5 / N * 1.5), "norm").pvalue < 1e-6


def test_per_coordinate_scales():
    params = {"w": jnp.zeros((3, 20000)), "b": jnp.zeros((20000,))}
    scales = corrdp.feature_scales(params, [0.0, 1.0, 2.5], "w")
    std = noise.leaf_stddevs(1.5, 0.4, scales, params)
    out = noise.gaussian_noise(jax.random.PRNGKey(0), params, std)
    w = np.asarray(out["w"], np.float64)
    np.testing.assert_array_equal(w[0], 0.0)
    for row, s in ((1, 1.0), (2, 2.5)):
        assert stats.kstest(w[row] / (1.5 * 0.4 * s), "norm").pvalue > 1e-3
        assert stats.kstest(w[row] / (1.5 * 0.4 * s * 1.5), "norm").pvalue < 1e-6
    assert stats.kstest(np.asarray(out["b"], np.float64) / 0.6, "norm").pvalue > 1e-3


def test_noise_is_independent_across_leaves_and_keys():
    params = {"a": jnp.zeros(5000), "b": jnp.zeros(5000)}
    std = noise.leaf_stddevs(1.0, 1.0, None, params)
    one = noise.gaussian_noise(jax.random.PRNGKey(0), params, std)
    two = noise.gaussian_noise(jax.random.PRNGKey(1), params, std)
    assert abs(np.corrcoef(one["a"], one["b"])[0, 1]) < 0.06
    assert abs(np.corrcoef(one["a"], two["a"])[0, 1]) < 0.06


def test_scale_validation():
    params = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
    assert noise.check_scales(params, None) is None
    noise.check_scales(params, {"w": np.ones((3, 1)), "b": 2.0})
    with pytest.raises(ValueError, match="tree structure"):
        noise.check_scales(params, {"w": 1.0})
    with pytest.raises(ValueError, match=">= 0"):
        noise.check_scales(params, {"w": -1.0, "b": 1.0})
    with pytest.raises(ValueError, match="broadcast"):
        noise.check_scales(params, {"w": np.ones(3), "b": 1.0})
    with pytest.raises(ValueError, match="non-finite"):
        noise.check_scales(params, {"w": np.inf, "b": 1.0})
    with pytest.raises(ValueError, match="rows"):
        corrdp.feature_scales(params, [1.0, 2.0], "w")
    with pytest.raises(ValueError, match="leaf"):
        corrdp.feature_scales(params, [1.0, 2.0, 3.0], "w1")


def _zero_gradient_noise(
    sampling, steps, noise_multiplier, l2_clip_norm, d, n, seed, batch_size=None
):
    """The noise each step adds to the clipped-gradient *sum*, recovered from consecutive iterates
    of plain SGD at learning rate 1 on x = 0 (linear model, no intercept: every data gradient is
    0), so θ_t − θ_{t−1} = −noise_t / N. Returns (noise (steps, d), metrics)."""
    model = models.linear_regression(d, fit_intercept=False)
    x, y = np.zeros((n, d), np.float32), np.zeros(n, np.float32)
    plan = DPPlan.create(
        sampling,
        n,
        batch_size=batch_size,
        steps=steps,
        l2_clip_norm=l2_clip_norm,
        noise_multiplier=noise_multiplier,
        delta=1e-5,
    )
    cfg = algorithms.TrainConfig(model, algorithms.Hyper(1.0), plan, track_params=True)
    _, metrics = algorithms.train(cfg, model.init(None), (x, y), jax.random.PRNGKey(seed))
    iterates = np.concatenate(
        [np.zeros((1, d)), np.asarray(metrics["params"]["w"], np.float64)[:, :, 0]]
    )
    normalize_by = n if sampling == "full" else batch_size
    return -np.diff(iterates, axis=0) * normalize_by, metrics


def test_noise_is_fresh_at_every_step():
    """Each step's noise has the configured std and is uncorrelated with every other step's."""
    steps, z, clip, d = 6, 1.3, 0.5, 2000
    noise_per_step, _ = _zero_gradient_noise("full", steps, z, clip, d, n=4, seed=3)
    for t in range(steps):
        assert stats.kstest(noise_per_step[t] / (z * clip), "norm").pvalue > 1e-3, f"step {t}"
    corr = np.corrcoef(noise_per_step)  # (steps, steps); off-diagonal sd ≈ 1/sqrt(d) = 0.022
    off_diagonal = corr[~np.eye(steps, dtype=bool)]
    assert np.max(np.abs(off_diagonal)) < 0.1, np.round(corr, 3)


def test_noise_and_batch_sampling_use_different_streams():
    """In a Poisson run the noise is not drawn from the key that selects the batches: the batch
    sizes confirm which key is the sampling stream, and the noise that key would give is
    uncorrelated with the noise added."""
    n, b, steps, d, seed = 16, 4, 3, 1000, 5
    noise_per_step, metrics = _zero_gradient_noise(
        "poisson", steps, 1.0, 1.0, d, n, seed, batch_size=b
    )
    k_sample = streams.stream(jax.random.PRNGKey(seed), streams.BATCH)
    pad = sampling.poisson_pad_size(n, b / n, steps)
    params = {"w": jnp.zeros((d, 1))}
    for t in range(steps):
        step_key = jax.random.fold_in(k_sample, t)
        assert int(sampling.poisson_batch(step_key, n, b / n, pad)[2]) == int(
            metrics["batch_size"][t]
        )
        from_sampling_key = noise.gaussian_noise(
            step_key, params, noise.leaf_stddevs(1.0, 1.0, None, params)
        )
        r = np.corrcoef(noise_per_step[t], np.asarray(from_sampling_key["w"])[:, 0])[0, 1]
        assert abs(r) < 0.15, f"step {t}: correlation {r:.3f} with the sampling stream's noise"


# ------------------------------------------------------------------------------------------------
# Noise units: z is relative to a finite clip norm (a private plan's); stddev is absolute (a
# nominal mechanism's, CoordinateNoise's, in a non-private plan).

_X, _Y = np.random.default_rng(2).normal(size=(16, 3)).astype(np.float32), np.arange(16) % 2
_LOGISTIC = models.logistic_regression(3)


@pytest.fixture
def no_compile(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("compiled before validating")

    monkeypatch.setattr(algorithms, "_run_jit", fail)
    monkeypatch.setattr(sweeps, "_compiled", fail)


def _plan(**change):
    options = dict(batch_size=4, steps=3, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
    options.update(change)
    return DPPlan.create("poisson", 16, **options)


def _plain_plan(l2_clip_norm=math.inf):
    return DPPlan.non_private("poisson", 16, batch_size=4, steps=3, l2_clip_norm=l2_clip_norm)


def _config(plan, stddev=None):
    extra = None if stddev is None else {"stddev": stddev}
    return algorithms.TrainConfig(
        _LOGISTIC, algorithms.Hyper(0.1, extra=extra), plan, extensions=(CoordinateNoise(),)
    )


def test_a_multiplier_needs_a_finite_clip_norm():
    with pytest.raises(TypeError, match="l2_clip_norm"):  # no default bound any more
        DPPlan.create("poisson", 16, batch_size=4, steps=3, noise_multiplier=1.0, delta=1e-5)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="l2_clip_norm must be a finite number > 0"):
        _plan(l2_clip_norm=math.inf)


@pytest.mark.parametrize(
    "make_plan,stddev,match",
    [
        (_plan, 0.5, "stddev .* has no unit in a private plan"),  # z > 0 and an absolute std
        (_plain_plan, -0.5, "stddev must be finite and >= 0"),
        (_plain_plan, math.inf, "stddev must be finite"),
    ],
)
def test_noise_units_are_checked_before_compiling_in_train(no_compile, make_plan, stddev, match):
    with pytest.raises(ValueError, match=match):
        algorithms.train(
            _config(make_plan(), stddev), _LOGISTIC.init(None), (_X, _Y), jax.random.PRNGKey(0)
        )


def test_noise_units_are_checked_per_point_in_sweeps(no_compile):
    """A sweep over the clip norm [1, inf] at z > 0 is refused (z has no unit at C = inf), as is
    z > 0 with stddev > 0 at one point, and z = 0 at a point of a private plan (or z > 0 in a
    non-private one); a private plan's points with z and C finite, and a non-private plan's nominal
    stds at any clip norm, are fine."""
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    params0 = _LOGISTIC.init(None)
    z_config = _config(_plan())
    with pytest.raises(ValueError, match="l2_clip_norm must be finite"):
        sweeps.sweep_points(z_config, params0, (_X, _Y), keys, {"l2_clip_norm": [1.0, math.inf]})
    with pytest.raises(ValueError, match="l2_clip_norm must be finite"):
        sweeps.sweep(z_config, params0, (_X, _Y), keys, l2_clip_norm=[1.0, math.inf])
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        sweeps.sweep_points(z_config, params0, (_X, _Y), keys, {"noise_multiplier": [1.0, 0.0]})
    plain = _config(_plain_plan(l2_clip_norm=1.0))
    with pytest.raises(ValueError, match="a non-private plan takes no noise_multiplier"):
        sweeps.sweep_points(
            plain,
            params0,
            (_X, _Y),
            keys,
            {"noise_multiplier": [1.0, 0.0], "stddev": [0.5, 0.5]},
        )
    # z > 0, a swept stddev
    with pytest.raises(ValueError, match="stddev .* has no unit in a private plan"):
        sweeps.sweep_points(z_config, params0, (_X, _Y), keys, {"stddev": [0.0, 0.5]})
    # Valid (checked without compiling): z and C per point in the private plan, each accounted ...
    private = {"noise_multiplier": np.array([1.0, 2.0]), "l2_clip_norm": np.array([1.0, 0.5])}
    charged = algorithms.check_hyper(
        algorithms.with_values(algorithms.traced(z_config), private),
        params0,
        plan=z_config.plan,
        swept=tuple(private),
        extensions=z_config.extensions,
    )
    np.testing.assert_array_equal(charged["noise_multiplier"], [1.0, 2.0])
    # ... and nominal stds at any clip norm in the non-private one (which accounts nothing).
    nominal = {"stddev": np.array([0.0, 0.5]), "l2_clip_norm": np.array([1.0, math.inf])}
    assert (
        algorithms.check_hyper(
            algorithms.with_values(algorithms.traced(plain), nominal),
            params0,
            plan=plain.plan,
            swept=tuple(nominal),
            extensions=plain.extensions,
        )
        == {}
    )


def test_absolute_noise_std_without_clipping_has_the_configured_std():
    std = 3.0
    delta = _noise_of_one_step(0.0, math.inf, seed=4, stddev=std)
    sample = np.concatenate([delta["w"].ravel(), delta["b"].ravel()])
    assert stats.kstest(sample / (std / N), "norm").pvalue > 1e-3
    assert stats.kstest(sample / (std / N * 2 / 3), "norm").pvalue < 1e-6
    assert stats.kstest(sample / (std / N * 3 / 2), "norm").pvalue < 1e-6


def test_absolute_noise_std_ignores_a_finite_clip_norm():
    """stddev is absolute: with C = 0.2 the std on the mean is std/N, not std·C/N."""
    std, clip = 3.0, 0.2
    delta = _noise_of_one_step(0.0, clip, seed=5, stddev=std)
    sample = np.concatenate([delta["w"].ravel(), delta["b"].ravel()])
    assert stats.kstest(sample / (std / N), "norm").pvalue > 1e-3
    assert stats.kstest(sample / (std * clip / N), "norm").pvalue < 1e-6
