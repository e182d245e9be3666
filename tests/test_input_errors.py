"""Inputs a careless user passes (a name or a factory for an optimizer, integer parameters,
parameters of another shape than the data) fail before anything is compiled, with an error that
says what is wrong, on every route: ``fit``, ``train`` and a user's own loop of ``dp_step``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpprep import models, optimizers
from dpprep.algorithms import Hyper, TrainConfig, fit, train
from dpprep.plan import DPPlan
from dpprep.step import dp_step

N, D = 40, 3
KEY = jax.random.key(0)
MODEL = models.logistic_regression(D)


def _data():
    x = np.random.default_rng(0).normal(size=(N, D)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.float32)


def _run_args():
    return MODEL.init(None), _data(), KEY


def _fit(params0, **kwargs):
    return fit(
        MODEL, params0, _data(), KEY, target_epsilon=1.0, delta=1e-5, l2_clip_norm=1.0,
        learning_rate=0.5, batch_size=10, steps=2, **kwargs,
    )  # fmt: skip


def _loop_step(params):
    """One dp_step of a user's own loop on 3-feature data."""
    plan = DPPlan.non_private("poisson", N, batch_size=10, steps=2)  # no accounting: fast
    x, y = _data()
    loss = lambda p, batch: jnp.mean((batch["x"] @ p["w"] - batch["y"]) ** 2)  # noqa: E731
    tx = plan.optimizer(optax.sgd(0.1), key=KEY)
    data = {"x": jnp.asarray(x), "y": jnp.asarray(y)}
    return dp_step(params, tx.init(params), data, grad_fn=plan.clipped_grad(loss), tx=tx)


def test_an_optimizer_is_a_transformation_or_a_known_name():
    # a name is the named optimizer (it used to fail as "'str' object has no attribute 'init'")
    config = TrainConfig(MODEL, Hyper(0.5), optimizer="adam")
    assert config.optimizer == optimizers.optimizer("adam")
    with pytest.raises(ValueError, match="optax optimizer that takes a learning_rate"):
        TrainConfig(MODEL, Hyper(0.5), optimizer="nonsense")
    # a factory, or any non-transformation, is a TypeError that says what is accepted; fit says
    # so before calibrating its noise
    with pytest.raises(TypeError, match=r"optax.adam\(1.0\).*not the factory"):
        _fit(MODEL.init(None), optimizer=optax.adam)
    with pytest.raises(TypeError, match="GradientTransformation .* or the name"):
        TrainConfig(MODEL, Hyper(0.5), optimizer=1.0)
    plan = DPPlan.non_private("poisson", N, batch_size=10, steps=2)
    params, _ = train(TrainConfig(MODEL, Hyper(0.5), plan, optimizer="adam"), *_run_args())
    assert np.all(np.isfinite(np.asarray(params["w"])))


def test_integer_params_are_refused_on_every_route():
    int_params = jax.tree_util.tree_map(lambda a: a.astype(jnp.int32), MODEL.init(None))
    # fit used to return the integer zeros unchanged (the GLM fast path), dp_step failed in grad
    with pytest.raises(TypeError, match=r"params0\['b'\] has dtype int32"):
        _fit(int_params)
    plan = DPPlan.non_private("poisson", N, batch_size=10, steps=2)
    with pytest.raises(TypeError, match="parameters must be floating point"):
        train(TrainConfig(MODEL, Hyper(0.5), plan), int_params, _data(), KEY)
    with pytest.raises(TypeError, match=r"params\['w'\] has dtype int32"):
        _loop_step({"w": jnp.zeros(D, jnp.int32)})


def test_dp_step_names_the_shapes_of_params_that_do_not_fit_the_data():
    with pytest.raises(ValueError, match=r"params' shapes \{'w': \(4,\)\}, one example's shapes"):
        _loop_step({"w": jnp.zeros(D + 1)})
    # under jax.jit too (checked at trace time)
    with pytest.raises(ValueError, match=r"\(4,\).*dot_general"):
        jax.jit(_loop_step)({"w": jnp.zeros(D + 1)})
    params, _, _ = _loop_step({"w": jnp.zeros(D)})
    assert params["w"].shape == (D,)
