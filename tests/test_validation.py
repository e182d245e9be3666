"""The data checks every driver runs (:mod:`dpprep.validation`): a JAX array is scanned once per
array, however many calls it is passed to, and refusing what the checks refuse is not weakened by
that (a numpy array, which can change between calls, is scanned at every call)."""

from __future__ import annotations

import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import models, validation
from dpprep.algorithms import Hyper, TrainConfig, check_inputs, train
from dpprep.plan import DPPlan

N, D = 40, 3


@pytest.fixture
def scans(monkeypatch):
    """Counts the full-size reductions the checks run on a device array of shape (N, D)."""
    count = {"n": 0}
    original = jnp.max

    def counting_max(a, *args, **kwargs):
        if np.shape(a) == (N, D):
            count["n"] += 1
        return original(a, *args, **kwargs)

    monkeypatch.setattr(jnp, "max", counting_max)
    return count


def _config() -> TrainConfig:
    plan = DPPlan.create(
        "poisson", N, l2_clip_norm=1.0, delta=1e-5, noise_multiplier=1.0, batch_size=10, steps=3
    )
    return TrainConfig(plan=plan, hyper=Hyper(0.5), model=models.logistic_regression(D))


def _data(rng_seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(rng_seed)
    return rng.normal(size=(N, D)).astype(np.float32), rng.integers(0, 2, N)


def test_a_jax_array_is_scanned_once_over_many_train_calls(scans):
    x, y = _data()
    config = _config()
    params0 = config.model.init(None)
    xj = jnp.asarray(x)
    first, _ = train(config, params0, (xj, y), jax.random.key(0))
    assert scans["n"] == 1
    for seed in range(1, 4):
        train(config, params0, (xj, y), jax.random.key(seed))
    assert scans["n"] == 1, "a JAX data set was rescanned by a later call"
    # the same run as with the numpy data it came from
    again, _ = train(config, params0, (x, y), jax.random.key(0))
    for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_check_inputs_keeps_a_jax_array_on_its_device():
    xj = jnp.ones((N, D))
    assert check_inputs(xj) is xj
    leaves = check_inputs({"a": xj, "ids": jnp.zeros(N, jnp.int32)})
    assert leaves["a"] is xj
    assert isinstance(check_inputs(np.ones((N, D))), np.ndarray)


def test_a_numpy_array_changed_between_calls_is_refused():
    x, y = _data()
    config = _config()
    params0 = config.model.init(None)
    train(config, params0, (x, y), jax.random.key(0))
    x[7, 1] = np.nan  # the same array object, written to after a passing call
    with pytest.raises(ValueError, match="x contains 1 non-finite"):
        train(config, params0, (x, y), jax.random.key(0))
    wide = x.astype(np.float64)
    check_inputs(wide[:5])
    wide[2, 0] = 1e39
    with pytest.raises(ValueError, match="beyond float32's range"):
        check_inputs(wide[:5])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_jax_array_derived_from_a_checked_one_is_checked_again(bad):
    x, _ = _data()
    xj = jnp.asarray(x)
    check_inputs(xj)
    with pytest.raises(ValueError, match="x contains 1 non-finite"):
        check_inputs(xj.at[3, 2].set(bad))
    with pytest.raises(ValueError, match="x contains 1 non-finite"):
        check_inputs(jnp.where((jnp.arange(N)[:, None] == 5) & (jnp.arange(D) == 0), bad, xj))


def test_a_verdict_is_forgotten_with_its_array():
    xj = jnp.asarray(_data()[0])
    validation.check_finite_values(xj, "x")
    key = id(xj)
    assert validation._EXTREMES[key][0]() is xj
    del xj
    gc.collect()
    assert key not in validation._EXTREMES


def test_a_refused_jax_array_is_refused_at_every_call():
    xj = jnp.asarray(_data()[0]).at[0, 0].set(jnp.nan)
    for _ in range(2):
        with pytest.raises(ValueError, match="non-finite"):
            validation.check_finite_values(xj, "x")


def test_complex_and_integer_values():
    with pytest.raises(ValueError, match="z contains 1 non-finite"):
        validation.check_finite_values(jnp.array([1 + 1j, complex(np.inf, 0)]), "z")
    with pytest.raises(ValueError, match="z contains 1 non-finite"):
        validation.check_finite_array(np.array([1 + 1j, complex(0, np.nan)]), "z")
    ints = jnp.arange(5)
    assert validation.check_finite_values(ints, "i") is ints
    with pytest.raises(ValueError, match="must be numeric"):
        validation.check_finite_values(jnp.ones(3, jnp.bfloat16), "b")


def test_a_tracer_is_not_treated_as_a_data_set():
    @jax.jit
    def inside(a):
        return validation.check_finite_values(a, "a")

    with pytest.raises(jax.errors.TracerArrayConversionError):
        inside(jnp.ones(3))


def test_a_jax_array_aliasing_numpy_memory_written_after_its_check_still_cannot_leak():
    """``jax.device_put(x, may_alias=True)`` (or ``jnp.from_dlpack``) of an aligned numpy array
    shares its memory: a value written there after the check is not seen by the (once per array)
    check. What the guarantee rests on is not the check: a non-finite example contributes nothing
    (clipping.nan_safe), and train says so."""
    buffer = np.empty(N * D * 4 + 64, np.uint8)
    offset = (-buffer.ctypes.data) % 64
    x = buffer[offset : offset + N * D * 4].view(np.float32).reshape(N, D)
    x[:], y = _data()
    xj = jax.device_put(x, may_alias=True)
    plan = DPPlan.create("full", N, l2_clip_norm=1.0, delta=1e-5, noise_multiplier=1.0, steps=2)
    config = TrainConfig(plan=plan, hyper=Hyper(0.5), model=models.logistic_regression(D))
    params0 = config.model.init(None)
    train(config, params0, (xj, y), jax.random.key(0))
    x[4, 0] = np.nan
    if not np.isnan(np.asarray(xj)[4, 0]):
        pytest.skip("this backend copied the array: nothing aliases")
    with pytest.warns(RuntimeWarning, match="were not finite"):
        params, metrics = train(config, params0, (xj, y), jax.random.key(0))
    assert int(np.sum(metrics["nonfinite"])) == 2  # the row, once per step
    assert all(bool(jnp.all(jnp.isfinite(p))) for p in jax.tree_util.tree_leaves(params))
