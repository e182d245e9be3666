"""Layer taps (:mod:`dpprep.taps`): the clipped sum without a backward pass per example equals the
``vmap`` path's on every layer kind a tap covers, keeps every example's contribution at most ``C``
in float32, leaves non-finite examples out, and hands any use it does not cover to ``vmap``."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from dpprep import clipping, frameworks, models, taps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from nets import ResNet18, TanhCNN  # noqa: E402


def _both(loss, params, batch, *args, clip=0.05, **kwargs):
    """``(taps, vmap)`` clipped gradients of the same loss and batch."""
    return [
        jax.jit(
            lambda p, b, *a, m=method: clipping.clipped_grad(
                loss, l2_clip_norm=clip, method=m, **kwargs
            )(p, b, *a)
        )(params, batch, *args)
        for method in ("taps", "vmap")
    ]


def _close(a, b, rtol=2e-5):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        scale = float(jnp.max(jnp.abs(v))) + 1e-30
        assert float(jnp.max(jnp.abs(u - v))) <= rtol * scale, (u.shape, scale)


def _kinds(loss, params, example, *args):
    def example_loss(p, e, *a):
        return loss(p, jax.tree_util.tree_map(lambda v: v[None], e), *a), None

    return sorted(t.kind for t in taps.analyse(example_loss, params, example, *args).taps)


def _conv_loss(numbers, strides, padding, dilation):
    def loss(p, batch):
        out = jax.lax.conv_general_dilated(
            batch["x"],
            p["w"],
            strides,
            padding,
            rhs_dilation=dilation,
            dimension_numbers=numbers,
        )
        out = jnp.tanh(out + p["b"])
        return jnp.sum(out * batch["r"])

    return loss


@pytest.mark.parametrize(
    "numbers, strides, padding, dilation",
    [
        (("NHWC", "HWIO", "NHWC"), (2, 2), ((3, 3), (3, 3)), (1, 1)),
        (("NCHW", "OIHW", "NCHW"), (1, 2), ((1, 0), (0, 2)), (2, 1)),
        (("NHWC", "OHWI", "NCHW"), (3, 1), "SAME", (1, 1)),
    ],
)
def test_convolutions_in_any_layout_give_the_vmap_sum(numbers, strides, padding, dilation):
    rng = np.random.default_rng(0)
    lhs, rhs, out = numbers
    shape = {"N": 5, "H": 11, "W": 9, "C": 3}
    x = rng.normal(size=[shape[c] for c in lhs]).astype(np.float32)
    kernel = {"O": 4, "I": 3, "H": 3, "W": 2}
    w = rng.normal(size=[kernel[c] for c in rhs]).astype(np.float32)
    out_shape = jax.eval_shape(
        lambda x, w: jax.lax.conv_general_dilated(
            x, w, strides, padding, rhs_dilation=dilation, dimension_numbers=numbers
        ),
        x,
        w,
    ).shape
    bias_shape = [1] * len(out_shape)
    bias_shape[out.index("C")] = 4
    params = {"w": jnp.asarray(w), "b": jnp.asarray(rng.normal(size=bias_shape), jnp.float32)}
    batch = {"x": jnp.asarray(x), "r": jnp.asarray(rng.normal(size=out_shape), jnp.float32)}
    if lhs[0] != "N" or out[0] != "N":
        pytest.skip("examples are the leading axis")
    loss = _conv_loss(numbers, strides, padding, dilation)
    assert _kinds(loss, params, {k: v[0] for k, v in batch.items()}) == ["conv", "vjp"]
    tapped, plain = _both(loss, params, batch)
    _close(tapped.grad, plain.grad)
    np.testing.assert_allclose(tapped.norms, plain.norms, rtol=2e-6)


def _cnn():
    model = frameworks.from_flax_nnx(TanhCNN(nnx.Rngs(0)), loss="softmax_cross_entropy")
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.random((6, 28, 28, 1)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 10, 6))
    return model, model.init(None), x, y


def test_the_tanh_cnn_gives_the_vmap_sum_with_masks_and_microbatches():
    """Dense (ghost) and convolution taps together, through a flax.nnx model: the same clipped
    sum and norms as ``vmap``, with a mask, and in microbatches."""
    model, params, x, y = _cnn()
    mask = jnp.asarray([1, 0, 1, 1, 1, 0], jnp.float32)
    out = {}
    for method in ("taps", "vmap"):
        for m in (None, 4):
            fn = clipping.clipped_grad(model, l2_clip_norm=0.3, method=method, microbatch_size=m)
            out[method, m] = jax.jit(lambda p, x, y, fn=fn: fn(p, (x, y), mask=mask))(params, x, y)
    for key in out:
        _close(out[key].grad, out["vmap", None].grad)
        np.testing.assert_allclose(out[key].norms, out["vmap", None].norms, rtol=2e-6)
    loss = clipping._model_loss(model)
    assert _kinds(loss, params, (x[0], y[0])) == ["conv", "conv", "dense", "dense"] + ["vjp"] * 4


def test_auto_takes_the_taps_where_they_apply():
    """``auto`` (every driver's default) runs the taps on the CNN: its jaxpr has no per-example
    kernel gradient in the shape ``vmap`` forms (the dense kernels' (b, 512, 32))."""
    model, params, x, y = _cnn()

    def shapes(method):
        fn = clipping.clipped_grad(model, l2_clip_norm=1.0, method=method)
        jaxpr = jax.make_jaxpr(lambda p: fn(p, (x, y)).grad)(params)
        return {tuple(v.aval.shape) for e in jaxpr.jaxpr.eqns for v in e.outvars}

    assert (6, 512, 32) in shapes("vmap")
    assert (6, 512, 32) not in shapes("auto")


def test_group_normalised_resnet_and_dropout_keys_give_the_vmap_sum():
    """Normalisation scales and biases (``mul``/``add`` taps), a residual network, and a loss with
    a per-example PRNG key (dropout)."""
    model = frameworks.from_flax_nnx(ResNet18(nnx.Rngs(0), width=4), loss="softmax_cross_entropy")
    params = model.init(None)
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.normal(size=(3, 8, 8, 3)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 10, 3))
    tapped, plain = (
        jax.jit(lambda p, m=m: clipping.clipped_grad(model, l2_clip_norm=0.5, method=m)(p, (x, y)))(
            params
        )
        for m in ("taps", "vmap")
    )
    _close(tapped.grad, plain.grad, rtol=1e-4)
    np.testing.assert_allclose(tapped.norms, plain.norms, rtol=1e-5)

    def dropout_loss(p, batch, key):
        keep = jax.random.bernoulli(key, 0.7, batch["x"].shape)
        h = jnp.tanh(jnp.where(keep, batch["x"], 0.0) @ p["w"] + p["b"])
        return jnp.sum((h @ p["v"] - batch["y"]) ** 2)

    params = {
        "w": jnp.asarray(rng.normal(size=(7, 5)), jnp.float32),
        "b": jnp.zeros(5),
        "v": jnp.asarray(rng.normal(size=(5, 2)), jnp.float32),
    }
    batch = {
        "x": jnp.asarray(rng.normal(size=(9, 7)), jnp.float32),
        "y": jnp.asarray(rng.normal(size=(9, 2)), jnp.float32),
    }
    tapped, plain = _both(dropout_loss, params, batch, jax.random.key(3), prng_argnum=2)
    _close(tapped.grad, plain.grad)


def test_shared_weights_and_sequences_are_materialised_not_ghosted():
    """A leaf used twice (tied weights) has one gradient, the sum of its uses': no ghost norm
    (which would take the norms of the uses apart); a dense layer over a sequence (several rows
    per example) neither. Both equal the vmap sum."""
    rng = np.random.default_rng(4)
    params = {"w": jnp.asarray(rng.normal(size=(4, 4)), jnp.float32)}

    def tied(p, batch):
        return jnp.sum(jnp.tanh(jnp.tanh(batch @ p["w"]) @ p["w"]))

    def sequence(p, batch):  # batch: (1, T, 4)
        return jnp.sum(jnp.tanh(batch @ p["w"]) ** 2)

    for loss, batch in [
        (tied, jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)),
        (sequence, jnp.asarray(rng.normal(size=(6, 3, 4)), jnp.float32)),
    ]:
        assert "dense" not in _kinds(loss, params, batch[0])
        tapped, plain = _both(loss, params, batch)
        _close(tapped.grad, plain.grad)


def test_a_half_precision_dense_layer_is_not_ghosted():
    """A bfloat16 product would round ``a_i`` and ``s_i·δ_i`` far beyond the float32 pad of the
    dense taps' norms: such a layer's per-example gradients are materialised (the norm is then of
    exactly what is summed, as on the vmap path)."""
    params = {"w": jnp.ones((5, 3), jnp.bfloat16)}
    batch = jnp.ones((4, 5), jnp.bfloat16)

    def loss(p, b):
        return jnp.sum(jnp.tanh(b @ p["w"]).astype(jnp.float32))

    assert _kinds(loss, params, batch[0]) == ["vjp"]
    assert _kinds(loss, {"w": params["w"].astype(jnp.float32)}, batch[0].astype(jnp.float32)) == [
        "dense"
    ]


def test_a_use_no_tap_covers_goes_to_vmap_and_taps_refuses_it_before_compiling():
    """Two parameters multiplied, a parameter through a custom derivative, a parameter returned:
    ``auto`` falls back to ``vmap`` (the same sum); ``method="taps"`` says why, at trace time."""
    rng = np.random.default_rng(5)
    params = {
        "w": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32),
        "s": jnp.asarray(1.5, jnp.float32),
    }
    batch = jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)
    losses = {
        "product": lambda p, b: jnp.sum(jnp.tanh(b @ (p["w"] * p["s"]))),
        "custom": lambda p, b: jnp.sum(jax.nn.relu(b @ p["w"]) + jax.nn.relu(p["s"])),
    }
    for loss in losses.values():
        plain = clipping.clipped_grad(loss, l2_clip_norm=0.1, method="vmap")(params, batch)
        auto = clipping.clipped_grad(loss, l2_clip_norm=0.1)(params, batch)
        _close(auto.grad, plain.grad)
        with pytest.raises(ValueError, match="method='taps': a parameter enters"):
            jax.eval_shape(
                lambda p: clipping.clipped_grad(loss, l2_clip_norm=0.1, method="taps")(p, batch),
                params,
            )
    with pytest.raises(ValueError, match="is for a Model"):
        clipping.clipped_grad(losses["product"], l2_clip_norm=0.1, method="fast")


def test_a_non_finite_example_contributes_zero_and_the_rest_is_unchanged():
    """A NaN feature, an inf feature, a NaN label: each such example counts zero on the taps path
    (dense taps included: ``aᵀ(s ⊙ δ)`` would carry ``0 · NaN`` into every entry), and the sum is
    that of the finite examples alone."""
    model, params, x, y = _cnn()
    fn = jax.jit(
        lambda p, x, y, m: clipping.clipped_grad(model, l2_clip_norm=0.3, method="taps")(
            p, (x, y), mask=m
        )
    )
    mlp = models.mlp(6, 5, 3)
    mparams = mlp.init(jax.random.key(0))
    mx = jnp.asarray(np.random.default_rng(6).normal(size=(6, 6)), jnp.float32)
    my = jnp.asarray([0, 1, 2, 0, 1, 2])
    mfn = jax.jit(
        lambda p, x, y, m: clipping.clipped_grad(mlp, l2_clip_norm=0.3, method="taps")(
            p, (x, y), mask=m
        )
    )
    for f, p, xs, ys in [(fn, params, x, y), (mfn, mparams, mx, my)]:
        for bad in (np.nan, np.inf):
            broken = xs.at[2].set(bad)
            out = f(p, broken, ys, jnp.ones(6))
            keep = jnp.asarray([1, 1, 0, 1, 1, 1], jnp.float32)
            clean = f(p, xs, ys, keep)
            _close(out.grad, clean.grad, rtol=1e-6)
            assert int(out.nonfinite) == 1


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    scale=st.floats(1e-3, 1e4),
    clip=st.floats(1e-4, 10.0),
)
def test_every_contribution_is_at_most_c_in_float32(seed, scale, clip):
    """Each example's float32 contribution (the sum with a one-hot mask), normed in float64 with
    no tolerance, is at most C — through dense taps (norm as a product of two norms, sum as one
    product) and convolution taps alike."""
    rng = np.random.default_rng(seed)
    mlp = models.mlp(13, 7, 3)
    params = jax.tree_util.tree_map(lambda a: a * 3.0, mlp.init(jax.random.key(seed % 1000)))
    x = jnp.asarray(rng.standard_cauchy(size=(5, 13)) * scale, jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 5))
    fn = jax.jit(
        jax.vmap(
            lambda m: (
                clipping.clipped_grad(mlp, l2_clip_norm=clip, method="taps")(
                    params, (x, y), mask=m
                ).grad
            )
        )
    )
    contributions = fn(jnp.eye(5))
    leaves = [np.asarray(v, np.float64) for v in jax.tree_util.tree_leaves(contributions)]
    norms = np.sqrt(sum(np.sum(v.reshape(5, -1) ** 2, axis=1) for v in leaves))
    assert float(np.max(norms)) <= float(np.float32(clip))


def test_a_batch_mixing_model_cannot_mix_examples_through_the_taps():
    """The taps run one example at a time under ``vmap``: a model that normalises over its batch
    axis sees one example, as on the ``vmap`` path, so one record cannot move another's gradient
    (an attack on ``Σ`` over a batched forward pass, which a tap over the whole batch would
    allow)."""
    rng = np.random.default_rng(7)
    params = {"w": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)}

    def batchnorm_loss(p, batch):
        h = batch @ p["w"]
        h = (h - h.mean(axis=0)) / (h.std(axis=0) + 1e-3)
        return jnp.sum(jnp.tanh(h) ** 2 + h)

    batch = jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    tapped, plain = _both(batchnorm_loss, params, batch, clip=10.0)
    _close(tapped.grad, plain.grad)
    moved = batch.at[0].multiply(100.0)
    rest = jnp.asarray([0, 1, 1, 1, 1], jnp.float32)
    grad_fn = clipping.clipped_grad(batchnorm_loss, l2_clip_norm=10.0, method="taps")

    def one(b):
        return grad_fn(params, b, mask=rest).grad

    _close(one(batch), one(moved), rtol=1e-6)


def test_the_audits_norm_bugs_reach_the_taps_path():
    """The audit plants its global-norm bugs in ``clipping._global_norms``; the taps path takes its
    global norm over the leaves there too (a column per leaf holding that leaf's norm), so the
    planted bug reaches what users run: a norm over the first two leaves only misses the third."""
    from dpprep import auditing
    from experiments.audit.inject import inject

    model = auditing.multi_leaf_linear_loss_model(((0, 1), (2,), (3,)))
    params = model.init(None)
    x = jnp.asarray([[3.0, 0.0, 0.0, 4.0], [0.0, 1.0, 0.0, 0.0]])
    y = jnp.ones(2)

    def norms(method):
        return np.asarray(
            clipping.clipped_grad(model, l2_clip_norm=1.0, method=method)(params, (x, y)).norms
        )

    np.testing.assert_allclose(norms("auto"), [5.0, 1.0], rtol=1e-6)
    with inject("leaves_after_two_unnormed"):
        np.testing.assert_allclose(norms("auto"), [3.0, 1.0], rtol=1e-6)
        np.testing.assert_allclose(norms("vmap"), [3.0, 1.0], rtol=1e-6)
