"""The model-agnostic core: clipped_grad over any loss and batch pytree, the Gaussian privatizer as
an optax transformation, and dp_step — in a user's own loop and as what `train` scans."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpprep import models, sampling
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.clipping import ClippedGrad, clipped_grad
from dpprep.noise import PrivatizerState, gaussian_privatizer
from dpprep.plan import DPPlan
from dpprep.step import dp_step


def _linear_loss(params, batch):
    return jnp.mean((batch["x"] @ params["w"] + params["b"] - batch["y"]) ** 2)


def _batch(seed=0, b=7, d=4, scale=3.0):
    rng = np.random.default_rng(seed)
    return {
        "x": jnp.asarray(scale * rng.normal(size=(b, d)), jnp.float32),
        "y": jnp.asarray(rng.normal(size=b), jnp.float32),
    }


def _params(d=4):
    return {"w": jnp.linspace(-1.0, 1.0, d), "b": jnp.float32(0.3)}


def _reference(loss, params, batch, clip, mask=None):
    """A plain Python loop: each example's gradient, clipped, summed."""
    b = batch["x"].shape[0]
    total = jax.tree_util.tree_map(jnp.zeros_like, params)
    for i in range(b):
        if mask is not None and mask[i] == 0:
            continue
        example = jax.tree_util.tree_map(lambda a: a[i : i + 1], batch)
        g = jax.grad(loss)(params, example)
        norm = math.sqrt(sum(float(jnp.sum(leaf**2)) for leaf in jax.tree_util.tree_leaves(g)))
        factor = min(1.0, clip / norm) if norm > 0 else 1.0
        total = jax.tree_util.tree_map(lambda a, g_: a + factor * g_, total, g)
    return total


@pytest.mark.parametrize("clip", [0.5, 5.0, math.inf])
def test_clipped_grad_matches_a_python_loop_on_a_dict_batch(clip):
    params, batch = _params(), _batch()
    mask = jnp.asarray([1, 1, 0, 1, 1, 1, 0], jnp.float32)
    out = jax.jit(lambda p, bt, m: clipped_grad(_linear_loss, l2_clip_norm=clip)(p, bt, mask=m))(
        params, batch, mask
    )
    want = _reference(_linear_loss, params, batch, clip, np.asarray(mask))
    for got, ref in zip(jax.tree_util.tree_leaves(out.grad), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)
    assert out.norms.shape == (7,) and out.aux is None


def test_clipped_grad_has_aux_returns_per_example_aux():
    def loss(params, batch):
        value = _linear_loss(params, batch)
        return value, {"loss": value, "pred": batch["x"] @ params["w"]}

    out = clipped_grad(loss, l2_clip_norm=1.0, has_aux=True)(_params(), _batch())
    assert out.aux["loss"].shape == (7,) and out.aux["pred"].shape == (7, 1)
    batch = _batch()
    np.testing.assert_allclose(
        out.aux["loss"][2],
        _linear_loss(_params(), jax.tree_util.tree_map(lambda a: a[2:3], batch)),
        rtol=1e-6,
    )


def test_clipped_grad_splits_the_key_per_example_and_passes_state_through():
    def loss(params, batch, key, state):
        keep = jax.random.bernoulli(key, 0.5, batch["x"].shape)  # dropout on the inputs
        return (
            jnp.mean(
                (jnp.where(keep, batch["x"], 0.0) @ params["w"] * state["gain"] - batch["y"]) ** 2
            ),
            keep,
        )

    batch = _batch(b=16)
    grad_fn = clipped_grad(loss, l2_clip_norm=1.0, has_aux=True, prng_argnum=2)
    out = grad_fn({"w": jnp.ones(4)}, batch, jax.random.key(1), {"gain": jnp.float32(2.0)})
    masks = np.asarray(out.aux).reshape(16, 4)
    assert len({tuple(m) for m in masks}) > 8  # one key per example: the dropout masks differ
    again = grad_fn({"w": jnp.ones(4)}, batch, jax.random.key(1), {"gain": jnp.float32(2.0)})
    np.testing.assert_array_equal(out.aux, again.aux)  # and are reproducible from the key
    with pytest.raises(ValueError, match="prng_argnum=4 .* got only 3 positional"):
        clipped_grad(loss, l2_clip_norm=1.0, prng_argnum=4)(
            {"w": jnp.ones(4)}, batch, jax.random.key(1)
        )


@pytest.mark.parametrize("name", ["linear", "logistic", "softmax"])
def test_clipped_grad_equals_the_glm_fast_path(name):
    d, k = 5, 3
    model = {
        "linear": models.linear_regression(d),
        "logistic": models.logistic_regression(d),
        "softmax": models.softmax_regression(d, k),
    }[name]
    rng = np.random.default_rng(4)
    x = jnp.asarray(4 * rng.normal(size=(11, d)), jnp.float32)
    y = {
        "linear": rng.normal(size=11),
        "logistic": (rng.random(11) < 0.5) * 1.0,
        "softmax": rng.integers(0, k, 11),
    }[name]
    y = jnp.asarray(y, jnp.int32 if name == "softmax" else jnp.float32)
    params = jax.tree_util.tree_map(
        lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), model.init(None)
    )
    loss = lambda p, batch: model.per_example_loss(p, batch[0], batch[1])[0]  # noqa: E731
    general = clipped_grad(loss, l2_clip_norm=0.7)(params, (x, y))
    fast = clipped_grad(model, l2_clip_norm=0.7, method="fast")(params, (x, y))
    # Saturated sigmoids: the residual σ(z) − y and autodiff's softplus gradient differ by float32
    # rounding of σ (~1e-7 absolute), times ||x_i|| ≈ 10: an absolute tolerance, not a relative one.
    np.testing.assert_allclose(general.norms, fast.norms, rtol=1e-5, atol=1e-5)
    for a, b in zip(jax.tree_util.tree_leaves(general.grad), jax.tree_util.tree_leaves(fast.grad)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1e-3, 1.0, 1e3, 1e6]),
    clip=st.sampled_from([1e-3, 0.1, 1.0, 37.0]),
)
def test_clipped_grad_never_exceeds_the_bound_in_float32(seed, scale, clip):
    """Every example's clipped contribution has norm ≤ C (float32), at any gradient scale."""
    batch = _batch(seed, b=6, scale=scale)
    params = _params()
    # The sum of one example's clipped gradient: a batch of one, so the bound is on each example.
    for i in range(6):
        one = jax.tree_util.tree_map(lambda a: a[i : i + 1], batch)
        out = clipped_grad(_linear_loss, l2_clip_norm=clip)(params, one)
        norm = float(
            jnp.sqrt(
                sum(
                    jnp.sum(g.astype(jnp.float32) ** 2) for g in jax.tree_util.tree_leaves(out.grad)
                )
            )
        )
        assert norm <= clip * (1 + 2**-20), (norm, clip)


def test_clipped_grad_refuses_bad_input_before_compiling():
    params = _params()
    with pytest.raises(ValueError, match="disagree on the example axis"):
        clipped_grad(_linear_loss, l2_clip_norm=1.0)(
            params, {"x": jnp.ones((5, 4)), "y": jnp.ones(6)}
        )
    per_row = lambda p, batch: (batch["x"] @ p["w"] - batch["y"]) ** 2  # noqa: E731  (shape (1,))
    with pytest.raises(ValueError, match="scalar per example"):
        clipped_grad(per_row, l2_clip_norm=1.0)(params, _batch())
    with pytest.raises(ValueError, match="l2_clip_norm is required"):
        clipped_grad(_linear_loss, l2_clip_norm=None)
    with pytest.raises(ValueError, match="l2_clip_norm must be > 0"):
        clipped_grad(_linear_loss, l2_clip_norm=0.0)
    with pytest.raises(ValueError, match="mask must have shape"):
        clipped_grad(_linear_loss, l2_clip_norm=1.0)(params, _batch(), mask=jnp.ones(3))
    # A weight of 2 would let one example contribute 2·C: concrete masks are 0/1.
    with pytest.raises(ValueError, match="mask must hold 0"):
        clipped_grad(_linear_loss, l2_clip_norm=1.0)(
            params, _batch(), mask=jnp.asarray([1, 1, 2, 1, 1, 1, 1.0])
        )
    with pytest.raises(ValueError, match="is empty"):
        clipped_grad(_linear_loss, l2_clip_norm=1.0)(
            params, {"x": jnp.ones((0, 4)), "y": jnp.ones(0)}
        )


def test_privatizer_adds_noise_of_std_z_c_over_n_and_counts_steps():
    tx = gaussian_privatizer(
        key=jax.random.key(0), l2_clip_norm=2.0, noise_multiplier=1.5, normalize_by=4.0
    )
    params = {"w": jnp.zeros(20_000)}
    state = tx.init(params)
    assert isinstance(state, PrivatizerState) and int(state.count) == 0
    first, state = tx.update({"w": jnp.full(20_000, 8.0)}, state, params)
    second, state = tx.update({"w": jnp.full(20_000, 8.0)}, state, params)
    assert int(state.count) == 2
    for out in (first, second):
        noise = np.asarray(out["w"]) - 2.0  # mean 8/4
        assert abs(noise.mean()) < 5 * 0.75 / math.sqrt(20_000)
        assert abs(noise.std() / 0.75 - 1) < 0.03  # std z·C/N = 1.5·2/4
    assert not np.allclose(first["w"], second["w"])  # a fresh draw per step


def test_privatizer_per_coordinate_scales_and_chain():
    scales = {"a": jnp.float32(0.25), "b": jnp.float32(1.0)}
    tx = optax.chain(
        gaussian_privatizer(
            key=jax.random.key(2), l2_clip_norm=1.0, noise_multiplier=1.0, scales=scales
        ),
        optax.sgd(1.0),
    )
    params = {"a": jnp.zeros(20_000), "b": jnp.zeros(20_000)}
    updates, _ = tx.update({"a": jnp.ones(20_000), "b": jnp.ones(20_000)}, tx.init(params), params)
    for leaf, scale in (("a", 0.25), ("b", 1.0)):
        noise = np.asarray(updates[leaf]) + 1.0  # sgd(1) of the sum 1 + noise
        assert abs(noise.mean()) < 5 * scale / math.sqrt(20_000)
        assert abs(noise.std() / scale - 1) < 0.03  # std z·C·scale
    # A zero scale would release that leaf without noise: refused.
    with pytest.raises(ValueError, match="scales must be finite and > 0"):
        gaussian_privatizer(
            key=jax.random.key(2),
            l2_clip_norm=1.0,
            noise_multiplier=1.0,
            scales={"a": jnp.float32(0.0), "b": jnp.float32(1.0)},
        )


def test_privatizer_refuses_noise_without_a_clipping_bound():
    """A privatizer adds z·C with a finite C and z > 0, or it is not one: no bound, no noise, no
    absolute std (a nominal mechanism is an extension's, in a non-private plan)."""
    key = jax.random.key(0)
    with pytest.raises(TypeError, match="l2_clip_norm"):
        gaussian_privatizer(key=key, noise_multiplier=1.0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="l2_clip_norm must be finite and > 0"):
        gaussian_privatizer(key=key, noise_multiplier=1.0, l2_clip_norm=math.inf)
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        gaussian_privatizer(key=key, noise_multiplier=0.0, l2_clip_norm=1.0)
    with pytest.raises(TypeError, match="stddev"):
        gaussian_privatizer(key=key, noise_multiplier=1.0, l2_clip_norm=1.0, stddev=0.1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="normalize_by"):
        gaussian_privatizer(key=key, l2_clip_norm=1.0, noise_multiplier=1.0, normalize_by=0.0)
    with pytest.raises(TypeError, match="key must be a PRNG key"):
        gaussian_privatizer(key=0, l2_clip_norm=1.0, noise_multiplier=1.0)


@pytest.mark.parametrize("sampling_name,batch_size", [("full", None), ("poisson", 10)])
def test_a_users_own_loop_of_dp_step_reproduces_train(sampling_name, batch_size):
    """`train` is a thin driver: DP-SGD written by hand with the plan's pieces (its clipped
    gradient, its optimizer keyed by the run key, its batches) gives train's params."""
    model = models.mlp(4, 6, 3)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(40, 4)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 40), jnp.int32)
    params0 = model.init(jax.random.key(5))
    key, steps, clip, z, lr = jax.random.key(9), 6, 0.8, 1.3, 0.4
    plan = DPPlan.create(
        sampling_name,
        40,
        batch_size=batch_size,
        steps=steps,
        l2_clip_norm=clip,
        noise_multiplier=z,
        delta=1e-5,
    )
    want, _ = train(TrainConfig(model, Hyper(lr), plan), params0, (x, y), key)

    loss = lambda p, batch: model.per_example_loss(p, batch[0], batch[1])[0]  # noqa: E731
    grad_fn = plan.clipped_grad(loss)
    tx = plan.optimizer(optax.sgd(lr), key=key)
    # it draws step t's batch
    step = jax.jit(lambda p, s: dp_step(p, s, (x, y), grad_fn=grad_fn, tx=tx))
    params, state = params0, tx.init(params0)
    for _ in range(steps):
        params, state, out = step(params, state)
    assert isinstance(out, ClippedGrad) and out.norms.shape == (plan.pad,)
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # every step the plan charges was taken, and no more may be
    assert plan.spent(state) == plan.epsilon
    with pytest.raises(ValueError, match="all of them were taken"):
        dp_step(params, state, (x, y), grad_fn=grad_fn, tx=tx)


def test_a_users_poisson_loop_with_the_registered_sampler():
    """The same sampler `train` uses, called from a user's loop: its plan accounts the loop."""
    from dpprep.plan import ExecutionPlan

    plan = ExecutionPlan.create("poisson", 200, batch_size=20, steps=5)
    idx, mask, size, overflow = sampling.get("poisson").select(
        jax.random.key(0), plan, jnp.int32(0), None
    )
    assert idx.shape == (plan.pad,) and mask.shape == (plan.pad,) and int(size) == int(mask.sum())
    batch = _batch(b=200)
    batch = jax.tree_util.tree_map(lambda a: a[idx], batch)
    out = clipped_grad(_linear_loss, l2_clip_norm=1.0)(_params(), batch, mask=mask)
    assert float(jnp.sum(out.norms * 0 + mask)) == float(size)
    assert 0 < plan.epsilon(1.0, 1e-5) < plan.epsilon(0.7, 1e-5)
