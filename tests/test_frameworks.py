"""Bring your own model: flax.nnx, flax.linen, equinox and (init, apply) train through `train` and
the sweeps, with inputs of any shape; bad models are refused before compilation."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from flax import nnx

from dpprep import frameworks, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train


def _images(n=96, seed=0):
    """Two classes of 6×6×1 images: a bright left half or a bright right half (plus noise)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = 0.3 * rng.normal(size=(n, 6, 6, 1))
    x[y == 0, :, :3] += 1.0
    x[y == 1, :, 3:] += 1.0
    return x.astype(np.float32), y


class SmallCNN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.conv = nnx.Conv(1, 4, (3, 3), rngs=rngs)
        self.out = nnx.Linear(4 * 6 * 6, 2, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.conv(x))
        return self.out(h.reshape(h.shape[0], -1))


def _accuracy(model, params, x, y):
    return float(sweeps.evaluate(model, params, jnp.asarray(x), jnp.asarray(y))["accuracy"])


def test_nnx_cnn_on_images_trains_privately_and_writes_back():
    x, y = _images()
    module = SmallCNN(nnx.Rngs(0))
    model = frameworks.from_flax_nnx(module, loss="softmax_cross_entropy")
    before = _accuracy(model, model.init(None), x, y)
    config = TrainConfig(model, Hyper(1.0, 0.5, 1.0), sampling="poisson", batch_size=32, steps=40)
    params, metrics = train(config, model.init(None), (x, y), jax.random.key(0))
    after = _accuracy(model, params, x, y)
    assert after >= 0.9 > before or after >= 0.95, (before, after)
    nnx.update(module, params)  # the result is the module's own State
    np.testing.assert_allclose(module.out.kernel[...], params["out"]["kernel"][...])


class Dense(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x.reshape(x.shape[0], -1))


def test_linen_module_trains_and_sweeps():
    x, y = _images()
    model = frameworks.from_flax_linen(Dense(), x, loss="softmax_cross_entropy")
    params0 = model.init(jax.random.key(1))
    config = TrainConfig(model, Hyper(0.5, 0.0, 1.0), sampling="shuffle", batch_size=32, epochs=5)
    params, _ = train(config, params0, (x, y), jax.random.key(0))
    assert _accuracy(model, params, x, y) >= 0.95
    result = sweeps.sweep_points(config, params0, (x, y), jax.random.split(jax.random.key(0), 2),
                                 {"learning_rate": [0.0, 0.5]}, eval_data=(x, y))
    acc = np.asarray(result.evaluation["accuracy"])
    assert acc.shape == (2, 2) and np.all(acc[:, 1] >= 0.95) and np.all(acc[:, 1] > acc[:, 0])


class WithBatchNorm(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.BatchNorm(use_running_average=False)(nn.Dense(2)(x.reshape(x.shape[0], -1)))


def test_linen_module_with_batch_statistics_is_refused():
    x, _ = _images()
    with pytest.raises(ValueError, match="batch_stats"):
        frameworks.from_flax_linen(WithBatchNorm(), x, loss="softmax_cross_entropy")


def test_equinox_model_with_out_by_in_weights_trains():
    """The layout `algorithms` once refused ("x has 6 features but the params expect 8")."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    module = eqx.nn.MLP(6, 1, 8, 1, key=jax.random.key(2))
    assert module.layers[0].weight.shape == (8, 6)  # out × in
    model = frameworks.from_equinox(module, loss="sigmoid_binary_cross_entropy")
    config = TrainConfig(model, Hyper(0.5, 0.3, 1.0), sampling="poisson", batch_size=30, epochs=20)
    params, _ = train(config, model.init(None), (x, y), jax.random.key(0))
    assert _accuracy(model, params, x, y) >= 0.9
    trained = eqx.combine(params, eqx.partition(module, eqx.is_inexact_array)[1])
    assert trained(jnp.asarray(x[0])).shape == (1,)


def test_init_apply_pair_with_a_custom_loss():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(50, 2, 3)).astype(np.float32)  # examples of shape (2, 3)
    y = x.sum(axis=(1, 2)).astype(np.float32)
    model = frameworks.from_init_apply(
        lambda key: {"w": jnp.zeros((2, 3))}, lambda p, xb: jnp.einsum("bij,ij->b", xb, p["w"]),
        loss=lambda out, yb: jnp.abs(out - yb), task="regression")
    config = TrainConfig(model, Hyper(0.05, 0.0, 10.0), sampling="full", steps=200)
    params, _ = train(config, model.init(None), (x, y), jax.random.key(0))
    np.testing.assert_allclose(params["w"], np.ones((2, 3)), atol=0.1)


def test_bad_models_are_refused_before_compiling():
    x, y = _images()
    eqx_model = frameworks.from_equinox(eqx.nn.MLP(36, 2, 4, 1, key=jax.random.key(0)),
                                        loss="softmax_cross_entropy")
    config = TrainConfig(eqx_model, Hyper(0.1, 1.0, 1.0), sampling="poisson", batch_size=16, steps=2)
    with pytest.raises(ValueError, match=r"cannot be applied to examples of shape \(6, 6, 1\)"):
        train(config, eqx_model.init(None), (x, y), jax.random.key(0))
    not_per_example = frameworks.from_init_apply(
        lambda key: {"w": jnp.zeros((36, 2))}, lambda p, xb: xb.reshape(xb.shape[0], -1) @ p["w"],
        loss=lambda out, yb: out)  # (b, 2): not one scalar per example
    config = TrainConfig(not_per_example, Hyper(0.1, 1.0, 1.0), sampling="poisson", batch_size=16, steps=2)
    with pytest.raises(ValueError, match="one scalar per example"):
        train(config, not_per_example.init(None), (x, y), jax.random.key(0))
    with pytest.raises(ValueError, match="loss must be one of"):
        frameworks.from_init_apply(lambda k: {}, lambda p, xb: xb, loss="hinge")
    with pytest.raises(ValueError, match="leading example axis"):
        train(config, not_per_example.init(None), (np.zeros(96, np.float32), y), jax.random.key(0))
