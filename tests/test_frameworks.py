"""Bring your own model: flax.nnx, flax.linen, equinox and (init, apply) train through `train` and
the sweeps, with inputs of any shape; dropout makes a model stochastic (each example of each step
its own key, evaluation deterministic); bad models (batch statistics, equinox state) are refused
before compilation."""

from __future__ import annotations

import dataclasses
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from flax import nnx

from dpprep import algorithms, frameworks, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.plan import DPPlan

DELTA = 1e-5
# These small runs are private in name only (ε in the tens to hundreds at δ = 1e-5): the slack of
# a Poisson pad that may overflow would leave nothing of δ, so their pads hold every row (the
# plan pads to n; no overflow to charge).
OVERFLOW = 1e-30


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


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_nnx_cnn_on_images_trains_privately_and_writes_back():
    x, y = _images()
    module = SmallCNN(nnx.Rngs(0))
    model = frameworks.from_flax_nnx(module, loss="softmax_cross_entropy")
    assert not model.stochastic  # no random stream held: a deterministic model
    before = _accuracy(model, model.init(None), x, y)
    plan = DPPlan.create(
        "poisson",
        len(x),
        batch_size=32,
        steps=40,
        l2_clip_norm=1.0,
        noise_multiplier=0.5,
        delta=DELTA,
        max_overflow_prob=OVERFLOW,
    )
    config = TrainConfig(model, Hyper(1.0), plan)
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
    assert not model.stochastic
    params0 = model.init(jax.random.key(1))
    config = TrainConfig(
        model,
        Hyper(0.5),
        DPPlan.non_private("shuffle", len(x), batch_size=32, epochs=5, l2_clip_norm=1.0),
    )
    params, _ = train(config, params0, (x, y), jax.random.key(0))
    assert _accuracy(model, params, x, y) >= 0.95
    result = sweeps.sweep_points(
        config,
        params0,
        (x, y),
        jax.random.split(jax.random.key(0), 2),
        {"learning_rate": [0.0, 0.5]},
        eval_data=(x, y),
    )
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
    assert not model.stochastic
    plan = DPPlan.create(
        "poisson",
        len(x),
        batch_size=30,
        epochs=20,
        l2_clip_norm=1.0,
        noise_multiplier=0.3,
        delta=DELTA,
        max_overflow_prob=OVERFLOW,
    )
    config = TrainConfig(model, Hyper(0.5), plan)
    params, _ = train(config, model.init(None), (x, y), jax.random.key(0))
    assert _accuracy(model, params, x, y) >= 0.9
    trained = eqx.combine(params, eqx.partition(module, eqx.is_inexact_array)[1])
    assert trained(jnp.asarray(x[0])).shape == (1,)


def test_init_apply_pair_with_a_custom_loss():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(50, 2, 3)).astype(np.float32)  # examples of shape (2, 3)
    y = x.sum(axis=(1, 2)).astype(np.float32)
    model = frameworks.from_init_apply(
        lambda key: {"w": jnp.zeros((2, 3))},
        lambda p, xb: jnp.einsum("bij,ij->b", xb, p["w"]),
        loss=lambda out, yb: jnp.abs(out - yb),
        task="regression",
    )
    config = TrainConfig(
        model, Hyper(0.05), DPPlan.non_private("full", len(x), steps=200, l2_clip_norm=10.0)
    )
    params, _ = train(config, model.init(None), (x, y), jax.random.key(0))
    np.testing.assert_allclose(params["w"], np.ones((2, 3)), atol=0.1)


def test_bad_models_are_refused_before_compiling():
    x, y = _images()
    eqx_model = frameworks.from_equinox(
        eqx.nn.MLP(36, 2, 4, 1, key=jax.random.key(0)), loss="softmax_cross_entropy"
    )
    plan = DPPlan.create(
        "poisson",
        len(x),
        batch_size=16,
        steps=2,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=DELTA,
    )
    config = TrainConfig(eqx_model, Hyper(0.1), plan)
    with pytest.raises(ValueError, match=r"cannot be applied to examples of shape \(6, 6, 1\)"):
        train(config, eqx_model.init(None), (x, y), jax.random.key(0))
    not_per_example = frameworks.from_init_apply(
        lambda key: {"w": jnp.zeros((36, 2))},
        lambda p, xb: xb.reshape(xb.shape[0], -1) @ p["w"],
        loss=lambda out, yb: out,
    )  # (b, 2): not one scalar per example
    config = TrainConfig(not_per_example, Hyper(0.1), plan)
    with pytest.raises(ValueError, match="one scalar per example"):
        train(config, not_per_example.init(None), (x, y), jax.random.key(0))
    with pytest.raises(ValueError, match="loss must be one of"):
        frameworks.from_init_apply(lambda k: {}, lambda p, xb: xb, loss="hinge")
    with pytest.raises(ValueError, match="leading example axis"):
        train(config, not_per_example.init(None), (np.zeros(96, np.float32), y), jax.random.key(0))


# ------------------------------------------------------------------------------------------------
# Dropout: stochastic models (each example of each step its own key; evaluation deterministic)

D, HIDDEN, RATE = 4, 16, 0.5


class NnxDropoutNet(nnx.Module):
    """hidden → relu → dropout → out (the out kernel starts at zero: the logits do not depend on
    the dropout mask at θ0, so each example's gradient is linear in its own mask)."""

    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(D, HIDDEN, rngs=rngs)
        self.drop = nnx.Dropout(RATE, rngs=rngs)
        self.out = nnx.Linear(HIDDEN, 2, kernel_init=nnx.initializers.zeros_init(), rngs=rngs)

    def __call__(self, x):
        return self.out(self.drop(nnx.relu(self.hidden(x))))


class LinenDropoutNet(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        h = nn.relu(nn.Dense(HIDDEN, name="hidden")(x))
        h = nn.Dropout(RATE, deterministic=not train)(h)
        return nn.Dense(2, kernel_init=nn.initializers.zeros, name="out")(h)


class EqxDropoutNet(eqx.Module):
    hidden: eqx.nn.Linear
    drop: eqx.nn.Dropout
    out: eqx.nn.Linear

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.hidden = eqx.nn.Linear(D, HIDDEN, key=k1)
        self.drop = eqx.nn.Dropout(RATE)
        out = eqx.nn.Linear(HIDDEN, 2, key=k2)
        self.out = eqx.tree_at(lambda layer: layer.weight, out, jnp.zeros_like(out.weight))

    def __call__(self, x, *, key=None):
        return self.out(self.drop(jax.nn.relu(self.hidden(x)), key=key))


def _dropout_model(framework):
    """The adapter's model, its θ0, and the network's inference-mode forward written out by hand
    from the parameters (dropout off: what evaluation must compute)."""
    relu = jax.nn.relu
    if framework == "nnx":
        model = frameworks.from_flax_nnx(NnxDropoutNet(nnx.Rngs(0)), loss="softmax_cross_entropy")

        def forward(p, x):
            h = relu(x @ p["hidden"]["kernel"][...] + p["hidden"]["bias"][...])
            return h @ p["out"]["kernel"][...] + p["out"]["bias"][...]

        return model, model.init(None), forward
    if framework == "linen":
        model = frameworks.from_flax_linen(
            LinenDropoutNet(),
            np.zeros((2, D), np.float32),
            loss="softmax_cross_entropy",
            rngs=("dropout",),
            train_kwarg="train",
        )

        def forward(p, x):
            h = relu(x @ p["hidden"]["kernel"] + p["hidden"]["bias"])
            return h @ p["out"]["kernel"] + p["out"]["bias"]

        return model, model.init(jax.random.key(0)), forward
    model = frameworks.from_equinox(EqxDropoutNet(jax.random.key(0)), loss="softmax_cross_entropy")

    def forward(p, x):
        h = relu(x @ p.hidden.weight.T + p.hidden.bias)
        return h @ p.out.weight.T + p.out.bias

    return model, model.init(None), forward


FRAMEWORKS = ["nnx", "linen", "equinox"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dropout_gives_each_example_its_own_key(framework):
    """n copies of one example, one full-batch step at lr 1 (non-private, clipped far above the
    norms): the step is the mean of the examples' gradients. With the out kernel at zero each
    gradient is the dropout-free one times that example's mask / (1 − rate), so its ratio to the
    dropout-free gradient is, per hidden unit, the share of examples that kept it / (1 − rate):
    within a few 1/√n of 1 when every example draws its own mask, 0 or 2 when they share one, and
    exactly 1 when dropout is off while training. Only the model stream is random in this run."""
    model, params0, _ = _dropout_model(framework)
    assert model.stochastic
    n = 2000
    x, y = np.ones((n, D), np.float32), np.zeros(n, np.int32)
    config = TrainConfig(
        model, Hyper(1.0), DPPlan.non_private("full", n, steps=1, l2_clip_norm=100.0)
    )
    params, _ = train(config, params0, (x, y), jax.random.key(0))
    expected = jax.grad(
        lambda p: jnp.mean(model.per_example_loss(p, jnp.asarray(x), jnp.asarray(y)))
    )(params0)
    moved = [
        np.ravel(np.asarray(a, np.float64) - np.asarray(b, np.float64))
        for a, b in zip(jax.tree_util.tree_leaves(params0), jax.tree_util.tree_leaves(params))
    ]
    grads = [np.ravel(np.asarray(g, np.float64)) for g in jax.tree_util.tree_leaves(expected)]
    moved, grads = np.concatenate(moved), np.concatenate(grads)
    live = np.abs(grads) > 1e-6  # the out layer's entries of the active hidden units, and its bias
    assert live.sum() >= 6
    # the hidden layer gets no gradient at a zero out kernel
    np.testing.assert_array_equal(moved[~live], 0.0)
    ratio = moved[live] / grads[live]
    # sd 1/sqrt(n) = 0.022: per-example masks averaged
    assert np.all(np.abs(ratio - 1.0) < 0.15), ratio
    assert np.any(np.abs(ratio - 1.0) > 1e-3), ratio  # dropout was on while training
    # Same key, same run; another key, other masks (the batches and the noise are not random here).
    again, _ = train(config, params0, (x, y), jax.random.key(0))
    other, _ = train(config, params0, (x, y), jax.random.key(1))
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not all(
        np.array_equal(np.asarray(a), np.asarray(c))
        for a, c in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(other))
    )


def _separable(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int32)


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dropout_model_trains_privately_through_train_and_the_sweeps(framework):
    """A private run learns a separable task; a sweep's point is the same run (same per-example
    keys); evaluation runs in inference mode: deterministic, and the hand-written dropout-free
    forward (while a keyed forward does drop units)."""
    model, params0, forward = _dropout_model(framework)
    x, y = _separable()
    x_test, y_test = _separable(seed=1)
    before = _accuracy(model, params0, x_test, y_test)
    plan = DPPlan.create(
        "poisson",
        len(x),
        batch_size=64,
        steps=60,
        l2_clip_norm=1.0,
        noise_multiplier=0.5,
        delta=DELTA,
        max_overflow_prob=OVERFLOW,
    )
    config = TrainConfig(model, Hyper(1.0), plan)
    keys = jax.random.split(jax.random.key(3), 2)
    params, metrics = train(config, params0, (x, y), keys[0])
    assert metrics["epsilon"] == plan.epsilon
    after = _accuracy(model, params, x_test, y_test)
    assert after >= 0.9 and after > before + 0.3, (before, after)

    result = sweeps.sweep_points(
        config, params0, (x, y), keys, {"learning_rate": [0.0, 1.0]}, eval_data=(x_test, y_test)
    )
    acc = np.asarray(result.evaluation["accuracy"])
    assert acc.shape == (2, 2) and np.all(acc[:, 1] >= 0.9) and np.all(acc[:, 0] == before)
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(result.params)):
        np.testing.assert_allclose(np.asarray(b)[0, 1], np.asarray(a), rtol=1e-5, atol=1e-6)
    # the same model, up to float32 summation order
    assert abs(acc[0, 1] - after) <= 1 / len(y_test)

    first = sweeps.evaluate(model, params, jnp.asarray(x_test), jnp.asarray(y_test))
    second = sweeps.evaluate(model, params, jnp.asarray(x_test), jnp.asarray(y_test))
    assert {k: float(v) for k, v in first.items()} == {k: float(v) for k, v in second.items()}
    logits = np.asarray(forward(params, jnp.asarray(x_test)))
    np.testing.assert_allclose(
        np.asarray(model.apply(params, jnp.asarray(x_test))), logits, rtol=1e-5, atol=1e-5
    )
    assert float(first["accuracy"]) == pytest.approx(
        float(np.mean(np.argmax(logits, axis=1) == y_test))
    )
    keyed = np.asarray(model.apply(params, jnp.asarray(x_test), key=jax.random.key(0)))
    assert not np.allclose(keyed, logits, atol=1e-3)  # with a key, units are dropped


def test_linen_dropout_needs_its_rngs_and_training_flag_together():
    with pytest.raises(ValueError, match="together"):
        frameworks.from_flax_linen(
            LinenDropoutNet(),
            np.zeros((2, D), np.float32),
            loss="softmax_cross_entropy",
            rngs=("dropout",),
        )


# ------------------------------------------------------------------------------------------------
# State that mixes examples: refused by every adapter


class EqxWithBatchNorm(eqx.Module):
    linear: eqx.nn.Linear
    norm: eqx.nn.BatchNorm

    def __init__(self, key):
        self.linear = eqx.nn.Linear(D, 2, key=key)
        self.norm = eqx.nn.BatchNorm(2, axis_name="batch")

    def __call__(self, x, state):
        return self.norm(self.linear(x), state)


class EqxWithStateIndex(eqx.Module):
    linear: eqx.nn.Linear
    count: eqx.nn.StateIndex

    def __init__(self, key):
        self.linear = eqx.nn.Linear(D, 2, key=key)
        self.count = eqx.nn.StateIndex(jnp.zeros(()))

    def __call__(self, x, state):
        return self.linear(x), state.set(self.count, state.get(self.count) + 1)


@pytest.mark.parametrize(
    "module, name", [(EqxWithBatchNorm, "BatchNorm"), (EqxWithStateIndex, "StateIndex")]
)
def test_equinox_state_is_refused(module, name):
    with pytest.raises(ValueError, match=rf"holds state \({name}\)"):
        frameworks.from_equinox(module(jax.random.key(0)), loss="softmax_cross_entropy")
    # Nested inside a larger model too.
    with pytest.raises(ValueError, match=name):
        frameworks.from_equinox(
            [eqx.nn.Linear(D, D, key=jax.random.key(1)), module(jax.random.key(0))],
            loss="softmax_cross_entropy",
        )


def test_equinox_stateless_normalisation_is_accepted():
    """The refusal is about state, not normalisation: LayerNorm (per example) trains."""
    model = frameworks.from_equinox(
        eqx.nn.Sequential([eqx.nn.Linear(D, 2, key=jax.random.key(0)), eqx.nn.LayerNorm(2)]),
        loss="softmax_cross_entropy",
    )
    assert not model.stochastic
    x, y = _separable()
    config = TrainConfig(
        model, Hyper(0.5), DPPlan.non_private("full", len(x), steps=5, l2_clip_norm=1.0)
    )
    params, _ = train(config, model.init(None), (x, y), jax.random.key(0))
    assert all(np.all(np.isfinite(np.asarray(leaf))) for leaf in jax.tree_util.tree_leaves(params))


class NnxWithBatchNorm(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.linear = nnx.Linear(D, 2, rngs=rngs)
        self.norm = nnx.BatchNorm(2, rngs=rngs)

    def __call__(self, x):
        return self.norm(self.linear(x))


def test_nnx_module_with_batch_statistics_is_refused():
    with pytest.raises(ValueError, match="BatchStat"):
        frameworks.from_flax_nnx(NnxWithBatchNorm(nnx.Rngs(0)), loss="softmax_cross_entropy")


# ------------------------------------------------------------------------------------------------
# Convolutional models run in host calls of a few straight-line steps (XLA:CPU's loop bodies take
# slower convolution layouts): the same run as one scan, in train and in the sweeps.


@pytest.mark.slow  # a CNN trained three times
def test_a_cnn_run_is_cut_into_calls_and_stays_the_same_run():
    x, y = _images(n=96)
    model = frameworks.from_flax_nnx(SmallCNN(nnx.Rngs(0)), loss="softmax_cross_entropy")
    params0 = model.init(None)
    assert algorithms.convolves(model, params0, x)
    plan = DPPlan.create(
        "poisson",
        len(x),
        batch_size=16,
        steps=5,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=DELTA,
        max_overflow_prob=OVERFLOW,
    )
    config = TrainConfig(model, Hyper(0.5), plan, track_clip_fraction=True)
    assert algorithms.steps_per_call(config, params0, x) == algorithms.CONV_STEPS_PER_CALL
    key = jax.random.key(4)
    params, metrics = train(config, params0, (x, y), key)
    # The host loop donates its own state between calls, never the caller's θ0.
    assert not any(leaf.is_deleted() for leaf in jax.tree_util.tree_leaves(params0))
    ref, ref_metrics = train(dataclasses.replace(config, steps_per_call=None), params0, (x, y), key)
    np.testing.assert_array_equal(metrics["batch_size"], ref_metrics["batch_size"])
    np.testing.assert_allclose(metrics["clip_fraction"], ref_metrics["clip_fraction"])
    for a, b in zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(params), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)

    # A sweep on this CPU runs the same runs one by one; batched, they are the same runs too.
    keys = jnp.stack([key, jax.random.key(5)])
    one_by_one = sweeps.sweep_points(
        config, params0, (x, y), keys, {"learning_rate": [0.1, 0.5]}, eval_data=(x, y)
    )
    assert not sweeps.vmaps_runs(config) or jax.default_backend() != "cpu"
    for a, b in zip(
        jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(one_by_one.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(b)[0, 1], np.asarray(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(one_by_one.metrics["batch_size"][0, 1], metrics["batch_size"])
    batched = sweeps._compiled(
        algorithms.static_config(config),
        plan.execution,
        ("learning_rate",),
        True,
        True,
        None,
        False,
        algorithms.CONV_STEPS_PER_CALL,
        True,
    )
    values = algorithms.traced(config)
    out = batched(
        algorithms.with_values(values, {"learning_rate": None}),
        params0,
        jnp.asarray(x),
        jnp.asarray(y),
        keys,
        (np.array([0.1, 0.5], np.float32),),
        jnp.asarray(x),
        jnp.asarray(y),
    )
    for a, b in zip(
        jax.tree_util.tree_leaves(one_by_one.params), jax.tree_util.tree_leaves(out[0]), strict=True
    ):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    for name in ("loss", "accuracy"):
        np.testing.assert_allclose(
            np.asarray(out[2][name]), one_by_one.evaluation[name], rtol=1e-5, atol=1e-6
        )
