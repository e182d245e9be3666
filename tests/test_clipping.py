"""Clipping: every clipped gradient within C, fast path == vmap path == a plain Python loop."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpprep import clipping, features, models
from dpprep.algorithms import _primitives

B, D, K = 9, 5, 3
GLMS = {
    "linear": lambda: models.linear_regression(D),
    "linear_noint": lambda: models.linear_regression(D, fit_intercept=False),
    "linear_ridge": lambda: models.linear_regression(D, ridge=0.5),
    "logistic": lambda: models.logistic_regression(D),
    "softmax": lambda: models.softmax_regression(D, K),
    "softmax_noint": lambda: models.softmax_regression(D, K, fit_intercept=False),
}
MODELS = {name: make() for name, make in GLMS.items()}


def _problem(name: str, seed: int, x_scale: float, w_scale: float):
    model = MODELS[name]
    rng = np.random.default_rng(seed)
    x = (x_scale * rng.normal(size=(B, D))).astype(np.float32)
    if name.startswith("softmax"):
        y = rng.integers(0, K, size=B)
    elif name == "logistic":
        y = (rng.random(B) < 0.5).astype(np.float32)
    else:
        y = rng.normal(size=B).astype(np.float32)
    params = jax.tree_util.tree_map(
        lambda p: jnp.asarray(w_scale * rng.normal(size=p.shape), jnp.float32), model.init(None)
    )
    return model, params, jnp.asarray(x), jnp.asarray(y)


@functools.lru_cache(maxsize=None)
def _example_grad(model):
    return jax.jit(jax.grad(lambda p, xi, yi: model.per_example_loss(p, xi[None], yi[None])[0]))


def _loop_reference(model, params, x, y, l2_clip_norm, mask=None):
    """Straightforward per-example loop: grad, clip, sum."""
    total = jax.tree_util.tree_map(jnp.zeros_like, params)
    grad_fn = _example_grad(model)
    for i in range(x.shape[0]):
        if mask is not None and mask[i] == 0:
            continue
        g = grad_fn(params, x[i], y[i])
        norm = math.sqrt(sum(float(jnp.sum(leaf**2)) for leaf in jax.tree_util.tree_leaves(g)))
        factor = min(1.0, l2_clip_norm / norm) if norm > 0 else 1.0
        total = jax.tree_util.tree_map(lambda a, b: a + factor * b, total, g)
    return total


def _clipped_sum(model, params, x, y, l2_clip_norm, mask=None, method="auto"):
    """The clipped gradient sum of a model's batch and the per-example norms before clipping."""
    out = clipping.clipped_grad(model, l2_clip_norm=l2_clip_norm, method=method)(
        params, (x, y), mask=mask
    )
    return out.grad, out.norms


def _assert_trees_close(a, b, rtol, atol=0.0):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=atol)


def _contributions(model, params, x, y, l2_clip_norm, method):
    """Each example's actual float32 contribution to the library's clipped sum: the sum with a
    one-hot mask selecting that example alone (leading axis: examples)."""
    return jax.vmap(lambda m: _clipped_sum(model, params, x, y, l2_clip_norm, m, method=method)[0])(
        jnp.eye(x.shape[0])
    )


def _norms64(contributions) -> np.ndarray:
    """Global norms (all leaves, bias included) of float32 contributions, computed in float64 so
    that the check itself adds no float32 rounding."""
    leaves = [np.asarray(leaf, np.float64) for leaf in jax.tree_util.tree_leaves(contributions)]
    return np.sqrt(sum(np.sum(leaf.reshape(leaf.shape[0], -1) ** 2, axis=1) for leaf in leaves))


def _bound(l2_clip_norm: float) -> float:
    """The bound the library clips to: the float32 value of C."""
    return float(np.float32(l2_clip_norm))


def _compare(model, params, x, y, l2_clip_norm):
    """(fast sum, vmap sum, fast norms, vmap norms, per-example contribution norms of both
    paths)."""
    fast, fast_norms = _clipped_sum(model, params, x, y, l2_clip_norm, method="fast")
    slow, slow_norms = _clipped_sum(model, params, x, y, l2_clip_norm, method="vmap")
    contributions = [
        _contributions(model, params, x, y, l2_clip_norm, method) for method in ("fast", "vmap")
    ]
    return fast, slow, fast_norms, slow_norms, contributions


COMPARE = {name: jax.jit(functools.partial(_compare, model)) for name, model in MODELS.items()}


@pytest.mark.backend_precision
@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(GLMS)),
    seed=st.integers(0, 2**31 - 1),
    x_scale=st.floats(0.01, 30.0),
    w_scale=st.floats(0.0, 3.0),
    l2_clip_norm=st.floats(1e-3, 100.0),
)
# a saturated sigmoid
@example(name="logistic", seed=242, x_scale=22.0, w_scale=1.5, l2_clip_norm=0.25)
def test_clipped_norms_bounded_and_paths_agree(name, seed, x_scale, w_scale, l2_clip_norm):
    _, params, x, y = _problem(name, seed, x_scale, w_scale)
    fast, slow, fast_norms, slow_norms, contributions = COMPARE[name](params, x, y, l2_clip_norm)
    # Norms agree to 1e-5 relative to the larger of the norm and ||(x_i, 1)|| (the norm a unit
    # residual would give): a residual near 0 is a difference of O(1) terms in float32.
    x_norms = jnp.sqrt(jnp.sum(x * x, axis=1) + ("b" in params))
    assert bool(
        jnp.all(jnp.abs(fast_norms - slow_norms) <= 1e-5 * jnp.maximum(slow_norms, x_norms))
    )
    # The sums agree to 1e-5 relative to the size of their terms, plus the float32 error of a
    # bounded link's residual: the fast path's σ(z) − y (or softmax − one-hot, |r| ≤ 1) and
    # autodiff's softplus/log-sum-exp gradient each come within a few ulps of 1 (< 2⁻²⁰) of the
    # exact residual, so a saturated example (r ~ 1e-5, unclipped) may differ by 2⁻²⁰·|x_ij| per
    # entry between the paths (e.g. seed 242: 4.8e-7 in r, 1.6e-5 in w).
    scale = max(1e-30, float(jnp.sum(jnp.minimum(fast_norms, l2_clip_norm))))
    bounded_link = not name.startswith("linear")
    rounding = (
        2.0**-20 * float(jnp.sum(jnp.maximum(jnp.max(jnp.abs(x), axis=1), 1.0)))
        if bounded_link
        else 0.0
    )
    for u, v in zip(jax.tree_util.tree_leaves(fast), jax.tree_util.tree_leaves(slow)):
        assert float(jnp.max(jnp.abs(u - v))) <= 1e-5 * scale + rounding
    # Every example's contribution to the clipped sum, by either path, has norm <= C: exactly, in
    # float64 arithmetic on the float32 contributions (no tolerance).
    for path in contributions:
        norms = _norms64(path)
        assert norms.shape == (B,)
        assert float(np.max(norms)) <= _bound(l2_clip_norm)


def _pairwise32(a: np.ndarray) -> np.ndarray:
    """The pairwise tree of :func:`clipping.pairwise_row_sum`, in numpy float32."""
    a = np.asarray(a, np.float32)
    width = 1 << clipping.pairwise_depth(a.shape[1])
    a = np.pad(a, ((0, 0), (0, width - a.shape[1])))
    while a.shape[1] > 1:
        half = a.shape[1] // 2
        a = (a[:, :half] + a[:, half:]).astype(np.float32)
    return a[:, 0]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000, 4097])
def test_norms_are_summed_by_the_pairwise_tree_the_pad_assumes(size):
    """The pad's error bound holds for a pairwise sum: the library sums by that tree, bit for bit,
    and the global norm contains no reduction whose order XLA chooses (a ``jnp.sum`` there would
    need the much larger pad of a sequential sum: 1.66 at 11M parameters)."""
    rng = np.random.default_rng(size)
    a = (rng.standard_cauchy(size=(3, size)) * 1e3).astype(np.float32)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(clipping.pairwise_row_sum)(jnp.asarray(a))), _pairwise32(a)
    )
    assert clipping.pairwise_depth(size) == math.ceil(math.log2(size))
    tree = {
        "a": jnp.asarray(a),
        "b": jnp.asarray(a[:, : max(1, size // 3)]),
        "c": jnp.asarray(a[:, :1]),
    }
    used = _primitives(jax.make_jaxpr(clipping._global_norms)(tree).jaxpr)
    assert "add" in used and "sqrt" in used
    assert not used & {"reduce_sum", "dot_general", "cumsum", "reduce_precision"}, used
    # Against float64: the squared norm is within the bound the pad charges (XLA may fuse a square
    # into the addition after it, an FMA, which only removes a rounding).
    exact = np.sqrt(
        sum(np.sum(np.asarray(leaf, np.float64) ** 2, axis=1) for leaf in tree.values())
    )
    got = np.asarray(jax.jit(clipping._global_norms)(tree), np.float64)
    pad = clipping.rounding_pad(clipping.norm_roundings([leaf.shape for leaf in tree.values()]))
    assert np.all(got * pad >= exact) and np.all(exact * pad >= got)


@pytest.mark.parametrize("parameters", [26_000, 1_000_000, 11_000_000])
def test_clip_bound_holds_and_the_pad_stays_small_as_models_grow(parameters):
    """At 26k, 1M and 11M parameters every example's float32 contribution is at most C (float64
    norms, no tolerance), and a clipped example keeps its signal: the pad is at most 1 + 1e-5, so
    the contribution is at least C/(1 + 1e-5) (a sequential sum's pad would be 1.66 at 11M)."""
    leaves = {"conv": parameters // 2, "dense": parameters - parameters // 2 - 10, "bias": 10}
    rng = np.random.default_rng(parameters)
    batch = {
        name: jnp.asarray((rng.standard_cauchy(size=(3, size)) * 0.01).astype(np.float32))
        for name, size in leaves.items()
    }
    params = {name: jnp.zeros((size,), jnp.float32) for name, size in leaves.items()}
    # A loss whose per-example gradient is exactly the example: no rounding before the clipping.
    loss = lambda p, b: sum(jnp.sum(p[k] * b[k][0]) for k in p)  # noqa: E731
    roundings = clipping.norm_roundings([(1, size) for size in leaves.values()])
    assert clipping.rounding_pad(roundings) <= 1 + 1e-5 < clipping.rounding_pad(parameters)
    clip = 0.37
    grad_fn = jax.jit(clipping.clipped_grad(loss, l2_clip_norm=clip))
    exact = np.sqrt(sum(np.sum(np.asarray(b, np.float64) ** 2, axis=1) for b in batch.values()))
    assert np.all(exact > clip)  # every example is clipped
    for i in range(3):
        out = grad_fn(params, batch, mask=jnp.asarray(np.eye(3)[i], jnp.float32))
        norm = math.sqrt(
            sum(
                float(np.sum(np.asarray(g, np.float64) ** 2))
                for g in jax.tree_util.tree_leaves(out.grad)
            )
        )
        assert _bound(clip) / (1 + 1e-5) <= norm <= _bound(clip)


@pytest.mark.parametrize("name", ["linear", "logistic", "softmax", "softmax_noint"])
def test_both_paths_match_python_loop_with_mask(name):
    model, params, x, y = _problem(name, 7, 3.0, 1.0)
    mask = jnp.asarray([1, 0, 1, 1, 0, 1, 1, 1, 0], jnp.float32)
    expected = _loop_reference(model, params, x, y, 0.7, np.asarray(mask))
    for method in ("fast", "vmap"):
        got, _ = _clipped_sum(model, params, x, y, 0.7, mask, method=method)
        _assert_trees_close(got, expected, rtol=1e-5, atol=1e-6)


def test_masks_are_0_or_1():
    """A weight of 2 would let an example contribute 2·C: a concrete mask must be 0/1 (either
    path), and a traced one is clamped to [0, 1]."""
    model, params, x, y = _problem("logistic", 7, 3.0, 1.0)
    heavy = jnp.asarray([1, 0, 2, 1, 0, 1, 1, 1, 0], jnp.float32)
    for method in ("fast", "vmap"):
        with pytest.raises(ValueError, match="mask must hold 0"):
            _clipped_sum(model, params, x, y, 0.7, heavy, method=method)
        traced, _ = jax.jit(
            lambda m, method=method: _clipped_sum(model, params, x, y, 0.7, m, method=method)
        )(heavy)
        ones, _ = _clipped_sum(model, params, x, y, 0.7, jnp.minimum(heavy, 1.0), method=method)
        _assert_trees_close(traced, ones, rtol=1e-6, atol=1e-7)


def test_mlp_vmap_path_matches_loop_and_auto_picks_it():
    model = models.mlp(D, 6, K, activation="softplus")
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(B, D)), jnp.float32)
    y = jnp.asarray(rng.integers(0, K, size=B))
    params = model.init(jax.random.PRNGKey(1))
    expected = _loop_reference(model, params, x, y, 0.05)
    got, norms = _clipped_sum(model, params, x, y, 0.05)
    _assert_trees_close(got, expected, rtol=1e-5, atol=1e-7)
    assert norms.shape == (B,)
    with pytest.raises(ValueError, match="fast clipping path"):
        clipping.clipped_grad(model, l2_clip_norm=1.0, method="fast")


def test_infinite_clip_norm_is_the_plain_gradient_sum():
    model, params, x, y = _problem("softmax", 11, 5.0, 1.0)
    got, _ = _clipped_sum(model, params, x, y, jnp.inf)
    plain = jax.grad(lambda p: jnp.sum(model.per_example_loss(p, x, y)))(params)
    _assert_trees_close(got, plain, rtol=1e-5, atol=1e-6)


def test_zero_gradients_do_not_produce_nans():
    model = MODELS["linear"]
    params = model.init(None)
    x = jnp.zeros((3, D))
    got, norms = _clipped_sum(model, params, x, jnp.zeros(3), 1.0)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(got))
    np.testing.assert_array_equal(norms, 0.0)


def test_bad_method():
    model, params, x, y = _problem("linear", 0, 1.0, 1.0)
    with pytest.raises(ValueError, match="method"):
        clipping.clipped_grad(model, l2_clip_norm=1.0, method="loop")


# ------------------------------------------------------------------------------------------------
# Affine feature transforms (the engine extension dpprep.features.AffineFeatures): its fast path
# trains on scale ⊙ x − shift without forming it.


def _transformed_sum(
    model, params, x, y, clip, mask=None, *, method="auto", feature_scale=None, feature_shift=None
):
    """The clipped sum a run with AffineFeatures computes (the core's without a transform)."""
    values = {"feature_scale": feature_scale, "feature_shift": feature_shift}
    grad_fn = features.AffineFeatures().clipped_grad(
        model, values, l2_clip_norm=clip, method=method
    )
    if grad_fn is None:
        return _clipped_sum(model, params, x, y, clip, mask, method=method)
    out = grad_fn(params, (x, y), mask=mask)
    return out.grad, out.norms


TRANSFORMS = {
    "scalar_scale_shift": (0.37, np.array([0.5, -1.0, 0.25, 2.0, -0.75], np.float32)),
    "vector_scale_shift": (
        np.array([0.5, 2.0, 1.0, 0.1, 3.0], np.float32),
        np.array([0.3, -0.2, 1.5, 0.0, -2.0], np.float32),
    ),
    "vector_scale_only": (np.array([0.5, 2.0, 1.0, 0.1, 3.0], np.float32), None),
    "shift_only": (None, np.array([1.0, -1.0, 0.5, 0.0, 2.0], np.float32)),
}


def _materialised(x, scale, shift):
    out = np.asarray(x, np.float64)
    if scale is not None:
        out = out * np.asarray(scale, np.float64)
    if shift is not None:
        out = out - np.asarray(shift, np.float64)
    return jnp.asarray(out, jnp.float32)


@pytest.mark.parametrize(
    "name,transform",
    [
        *[
            (name, transform)
            for name in ("linear", "linear_noint", "logistic", "softmax")
            for transform in ("scalar_scale_shift", "vector_scale_shift")
        ],
        (
            "softmax_noint",
            "shift_only",
        ),  # a shift on a model without intercept: a bias in the logits only
        ("logistic", "vector_scale_only"),
    ],
)
def test_fast_path_transform_equals_materialised_vmap_and_loop(name, transform):
    scale, shift = TRANSFORMS[transform]
    model, params, x, y = _problem(name, 5, 2.0, 0.7)
    mask = jnp.asarray([1, 1, 0, 1, 1, 1, 0, 1, 1], jnp.float32)
    clip = 0.8
    fast, fast_norms = _transformed_sum(
        model, params, x, y, clip, mask, method="fast", feature_scale=scale, feature_shift=shift
    )
    xt = _materialised(x, scale, shift)
    slow, slow_norms = _clipped_sum(model, params, xt, y, clip, mask, method="vmap")
    via_kwargs, kw_norms = _transformed_sum(
        model, params, x, y, clip, mask, method="vmap", feature_scale=scale, feature_shift=shift
    )
    loop = _loop_reference(model, params, xt, y, clip, np.asarray(mask))
    assert set(fast) == set(params)  # a shift adds no "b" to the gradient of a model without one
    np.testing.assert_allclose(fast_norms, slow_norms, rtol=1e-5)
    np.testing.assert_allclose(kw_norms, slow_norms, rtol=1e-5)
    for other in (slow, via_kwargs, loop):
        _assert_trees_close(fast, other, rtol=1e-5, atol=1e-5)
    # Power: the untransformed features give a different sum.
    plain, _ = _clipped_sum(model, params, x, y, clip, mask, method="fast")
    assert not np.allclose(plain["w"], fast["w"], rtol=1e-3)


def test_mlp_vmap_path_applies_the_transform():
    model = models.mlp(D, 6, K)
    rng = np.random.default_rng(8)
    x = jnp.asarray(rng.normal(size=(B, D)), jnp.float32)
    y = jnp.asarray(rng.integers(0, K, size=B))
    params = model.init(jax.random.PRNGKey(2))
    scale, shift = TRANSFORMS["vector_scale_shift"]
    got, norms = _transformed_sum(
        model, params, x, y, 0.05, feature_scale=scale, feature_shift=shift
    )
    expected = _loop_reference(model, params, _materialised(x, scale, shift), y, 0.05)
    _assert_trees_close(got, expected, rtol=1e-5, atol=1e-7)
    plain, _ = _clipped_sum(model, params, x, y, 0.05)
    assert not np.allclose(plain["w1"], got["w1"], rtol=1e-3)


@pytest.mark.parametrize("name", ["linear_noint", "logistic", "softmax"])
def test_apply_and_loss_transformed_equal_materialised(name):
    model, params, x, y = _problem(name, 6, 3.0, 1.0)
    mlp = models.mlp(D, 4, K)
    mlp_params = mlp.init(jax.random.PRNGKey(0))
    for transform in ("scalar_scale_shift", "vector_scale_shift", "shift_only"):
        scale, shift = TRANSFORMS[transform]
        xt = _materialised(x, scale, shift)
        np.testing.assert_allclose(
            features.apply_transformed(model, params, x, scale, shift),
            model.apply(params, xt),
            rtol=1e-5,
            atol=1e-5,
        )
        np.testing.assert_allclose(
            features.per_example_loss_transformed(model, params, x, y, scale, shift),
            model.per_example_loss(params, xt, y),
            rtol=1e-5,
            atol=1e-5,
        )
        np.testing.assert_allclose(
            features.apply_transformed(mlp, mlp_params, x, scale, shift),
            mlp.apply(mlp_params, xt),
            rtol=1e-5,
            atol=1e-6,
        )
    np.testing.assert_array_equal(
        features.apply_transformed(model, params, x), model.apply(params, x)
    )


@functools.partial(jax.jit, static_argnums=0)
def _transformed_contributions(name, params, x, y, l2_clip_norm, scale, shift):
    model = MODELS[name]
    return jax.vmap(
        lambda m: _transformed_sum(
            model,
            params,
            x,
            y,
            l2_clip_norm,
            m,
            method="fast",
            feature_scale=scale,
            feature_shift=shift,
        )[0]
    )(jnp.eye(x.shape[0]))


@pytest.mark.backend_precision
@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["linear", "linear_noint", "logistic", "softmax", "softmax_noint"]),
    seed=st.integers(0, 2**31 - 1),
    x_scale=st.floats(0.01, 30.0),
    l2_clip_norm=st.floats(1e-3, 100.0),
    shift_size=st.floats(0.0, 10.0),
    near=st.sampled_from([None, 0.0, 1e-4, 1e-2]),
    feature_norm=st.sampled_from([1.0, 100.0, 1000.0]),
)
@example(
    name="softmax",
    seed=0,
    x_scale=1.0,
    l2_clip_norm=1.0,
    shift_size=0.0,
    near=1e-2,
    feature_norm=1000.0,
)
def test_transformed_clipped_contributions_are_bounded(
    name, seed, x_scale, l2_clip_norm, shift_size, near, feature_norm
):
    """Every example's contribution to the fast path's clipped sum (with a vector scale and a
    shift) has global norm <= C, bias included, exactly (float64 norms of the float32
    contributions); ``near``: the shift is within that distance of the first transformed row (as
    DPSGD-F's private mean can be), where the norm's expansion cancels; ``feature_norm``: large
    scales as DPSGD-F's C_F (at 1000 the contributions reached 1.0009·C before the rounding pad)."""
    _, params, x, y = _problem(name, seed, x_scale, 1.0)
    rng = np.random.default_rng(seed)
    scale = jnp.asarray(feature_norm * rng.uniform(0.0, 3.0, size=D), jnp.float32)
    if near is None:
        shift = jnp.asarray(feature_norm * shift_size * rng.normal(size=D), jnp.float32)
    else:
        shift = scale * x[0] + jnp.asarray(near * rng.normal(size=D), jnp.float32)
    contributions = _transformed_contributions(name, params, x, y, l2_clip_norm, scale, shift)
    assert float(np.max(_norms64(contributions))) <= _bound(l2_clip_norm)


# ------------------------------------------------------------------------------------------------
# Overflow-safe norms (issue: "the fast clipping path returns NaN parameters for features around
# 1e19 (the vmap path is fine)"): squares of such features overflow float32.


@pytest.mark.parametrize("magnitude", [1e19, 1e30])
@pytest.mark.parametrize("name", ["logistic", "softmax"])
def test_huge_features_give_finite_norms_and_sums(name, magnitude):
    """Some logits saturate (residual exactly 0, where inf·0 used to give NaN), others do not;
    the fast path's norms and clipped sum are finite and match the vmap path relatively."""
    model, params, x, y = _problem(name, 12, 1.0, 1.0)
    x = x * magnitude
    # Weights so small that a few logits are O(1) and the rest saturate.
    params = jax.tree_util.tree_map(lambda p: p / magnitude, params)
    fast, fast_norms = _clipped_sum(model, params, x, y, 1.0, method="fast")
    slow, slow_norms = _clipped_sum(model, params, x, y, 1.0, method="vmap")
    assert bool(jnp.all(jnp.isfinite(fast_norms))) and bool(jnp.all(jnp.isfinite(slow_norms)))
    assert float(jnp.max(fast_norms)) > 1e-3 * magnitude  # the norms really are huge
    np.testing.assert_allclose(fast_norms, slow_norms, rtol=1e-5)
    for u, v in zip(jax.tree_util.tree_leaves(fast), jax.tree_util.tree_leaves(slow)):
        assert bool(jnp.all(jnp.isfinite(u)))
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-5 * B)  # the sum's terms have norm <= 1


def test_huge_features_with_a_saturated_residual_are_finite():
    """The issue's failure in isolation: rows around 1e19 whose residual is exactly 0."""
    model = MODELS["logistic"]
    x = jnp.full((4, D), 1e19, jnp.float32) * jnp.asarray([[1.0], [-1.0], [2.0], [0.5]])
    y = jnp.asarray([1.0, 0.0, 1.0, 0.0])  # logits ±∞-ish: rows 0, 1, 2 fit exactly, row 3 does not
    params = {"w": jnp.full((D, 1), 1.0, jnp.float32), "b": jnp.zeros(1)}
    got, norms = _clipped_sum(model, params, x, y, 1.0, method="fast")
    assert bool(jnp.all(jnp.isfinite(norms)))
    np.testing.assert_array_equal(norms[:3], 0.0)
    np.testing.assert_allclose(norms[3], 0.5e19 * math.sqrt(D) * 1.0, rtol=1e-5)  # residual 1
    for leaf in jax.tree_util.tree_leaves(got):
        assert bool(jnp.all(jnp.isfinite(leaf)))
    # Row 3 alone, clipped to norm 1: gradient (x_3, 1)·1 / ||(x_3, 1)||.
    np.testing.assert_allclose(got["w"][:, 0], np.full(D, 1 / math.sqrt(D)), rtol=1e-5)


@pytest.mark.backend_precision
@pytest.mark.parametrize("name", ["linear_noint", "softmax_noint", "linear", "logistic"])
def test_rows_near_the_shift_are_still_clipped(name):
    """Records whose transformed features are small (at distances 1e-4 … 1 of the shift, as
    rows near DPSGD-F's private mean are) but whose raw features are large, with large
    residuals: ||s ⊙ x − μ||² = ||s ⊙ x||² − 2(s ⊙ x)·μ + ||μ||² cancels in float32, and an
    underestimated norm (it came out as 0 for some rows) left such records unclipped. The fast
    path's feature norms are upper bounds of the exact ones (equal far from the shift) and
    every contribution is <= C."""
    model, params, x, y = _problem(name, 0, 30.0, 1.0)
    if name.startswith("linear"):
        y = y + 1e4  # huge residuals
    rng = np.random.default_rng(0)
    scale = jnp.asarray(np.linspace(0.5, 3.0, D), jnp.float32)
    shift = scale * x[0]
    distances = np.logspace(-4, 0, B)
    x = x[0] + jnp.asarray(distances[:, None] * rng.normal(size=(B, D)), jnp.float32)
    bias = "b" in params
    norms = np.asarray(features.transformed_feature_norms(x, scale, shift, bias), np.float64)
    exact = np.asarray(x, np.float64) * np.asarray(scale, np.float64) - np.asarray(
        shift, np.float64
    )
    exact = np.sqrt(np.sum(exact**2, axis=1) + bias)
    assert np.all(norms >= exact * (1 - 1e-6)), norms / exact
    # At distance 1 (raw norm ~100) the rounding allowance over-clips by < 0.2 %.
    np.testing.assert_allclose(norms[-1], exact[-1], rtol=2e-3)
    clip = 1e-3
    contributions = _transformed_contributions(name, params, x, y, clip, scale, shift)
    assert float(np.max(_norms64(contributions))) <= _bound(clip)


@pytest.mark.parametrize("magnitude", [1e19, 1e30])
@pytest.mark.parametrize("transform", [False, True])
def test_norms_of_huge_features_are_finite_and_correct(magnitude, transform):
    # float32 squares overflow above ~1.8e19, so the plain sum of squares of these rows is inf
    # (1e19: 5 squares of ~1e38 sum past the float32 maximum; 1e30: every square): the norms must
    # come from the scaled fallback, in a batch that mixes them with ordinary rows.
    model = MODELS["softmax"]
    rng = np.random.default_rng(5)
    x = rng.normal(size=(B, D)) * np.where(np.arange(B) % 2 == 0, magnitude, 1.0)[:, None]
    x[1, 0] = 3.0 * magnitude  # one huge entry in an otherwise ordinary row
    y = rng.integers(0, K, size=B)
    # w = 0 and a random bias: finite logits (the bias), so the residuals are exact and O(1).
    params = {
        "w": jnp.zeros((D, K), jnp.float32),
        "b": jnp.asarray(rng.normal(size=K), jnp.float32),
    }
    scale = rng.uniform(0.5, 2.0, size=D) if transform else None
    shift = magnitude * rng.normal(size=D) if transform else None
    x32 = jnp.asarray(x, jnp.float32)
    as32 = lambda a: None if a is None else jnp.asarray(a, jnp.float32)  # noqa: E731
    # float64 reference: ||x'_i ⊗ r_i||² + ||r_i||² = (||x'_i||² + 1)·||r_i||², x' = scale ⊙ x −
    # shift
    x_ref = np.asarray(x32, np.float64) * (
        1.0 if scale is None else np.asarray(as32(scale), np.float64)
    )
    x_ref = x_ref - (0.0 if shift is None else np.asarray(as32(shift), np.float64))
    logits = np.asarray(params["b"], np.float64)
    r = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum() - np.eye(K)[y]
    expected = np.sqrt(np.sum(x_ref**2, axis=1) + 1.0) * np.linalg.norm(r, axis=1)
    with np.errstate(over="ignore"):
        # the plain sum overflows
        assert not np.all(np.isfinite(np.sum(np.asarray(x32) ** 2, axis=1)))
    sums = {}
    for method in ("fast", "vmap"):
        got, norms = _transformed_sum(
            model,
            params,
            x32,
            jnp.asarray(y),
            1.0,
            method=method,
            feature_scale=as32(scale),
            feature_shift=as32(shift),
        )
        assert bool(jnp.all(jnp.isfinite(norms))), (method, norms)
        np.testing.assert_allclose(np.asarray(norms, np.float64), expected, rtol=1e-5)
        assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(got))
        sums[method] = got
    # Each contribution is clipped to norm <= 1, so the sums are O(B) and must agree.
    _assert_trees_close(sums["fast"], sums["vmap"], rtol=0.0, atol=1e-5 * B)


# ------------------------------------------------------------------------------------------------
# Microbatching: the same clipped sum, m per-example gradients in memory at a time.


def _dropout_loss(p, b, key):
    h = jnp.tanh(b["x"] @ p["w1"])
    h = jnp.where(jax.random.bernoulli(key, 0.8, h.shape), h / 0.8, 0.0)
    out = jnp.mean((h @ p["w2"] - b["y"]) ** 2)
    return out, {"out": out}


def _mlp_problem(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = {
        "w1": jnp.asarray(rng.normal(size=(5, 16)), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(16,)), jnp.float32),
    }
    b = {
        "x": jnp.asarray(rng.normal(size=(rows, 5)), jnp.float32),
        "y": jnp.asarray(rng.normal(size=(rows,)), jnp.float32),
    }
    return p, b


@pytest.mark.parametrize("m", [1, 4, 8, 36, 37, 64])
def test_microbatches_give_the_unbatched_clipped_sum(m):
    """Per-example keys, aux, a 0/1 mask and a batch that is not a multiple of m: the sum, the norms
    of every computed slot and the aux equal the unbatched ones (up to float32 summation order)."""
    p, b = _mlp_problem(37)
    mask = jnp.asarray((np.random.default_rng(1).random(37) < 0.7).astype(np.float32))
    key = jax.random.key(3)
    make = lambda size: clipping.clipped_grad(  # noqa: E731
        _dropout_loss,
        l2_clip_norm=0.5,
        has_aux=True,
        prng_argnum=2,
        microbatch_size=size,
    )
    ref = make(None)(p, b, key, mask=mask)
    got = jax.jit(lambda p, b, k, mk: make(m)(p, b, k, mask=mk))(p, b, key, mask)
    _assert_trees_close(got.grad, ref.grad, rtol=1e-6, atol=1e-6)
    # A microbatch with a real example is computed whole; one of padding only is skipped (zeros).
    computed = np.repeat(
        (
            np.asarray(mask).reshape(-1, 1)
            if m == 1
            else np.add.reduceat(np.asarray(mask), np.arange(0, 37, m)) > 0
        ),
        m,
    )[:37].astype(bool)
    np.testing.assert_allclose(
        np.asarray(got.norms)[computed], np.asarray(ref.norms)[computed], rtol=1e-5
    )
    np.testing.assert_array_equal(np.asarray(got.norms)[~computed], 0.0)
    np.testing.assert_allclose(
        np.asarray(got.aux["out"])[computed], np.asarray(ref.aux["out"])[computed], rtol=1e-5
    )


def test_microbatches_of_padding_only_are_skipped_not_computed():
    """Poisson batches are padded to a fixed shape; a microbatch holding only padded slots must
    cost nothing. Here the padded rows are NaN: computed (as the unbatched path does) their norms
    are NaN (and nan_safe keeps them out of the sum); skipped, their norms are the zeros of a
    slot never computed. Either way the sum is that of the 8 real rows and no real example was
    non-finite."""
    p, b = _mlp_problem(32)
    b = {k: v.at[8:].set(jnp.nan) for k, v in b.items()}
    mask = jnp.asarray([1.0] * 8 + [0.0] * 24)
    loss = lambda p, b: _dropout_loss(p, b, jax.random.key(0))[0]  # noqa: E731
    whole = clipping.clipped_grad(loss, l2_clip_norm=0.5)(p, b, mask=mask)
    assert bool(jnp.all(jnp.isnan(whole.norms[8:])))
    got = jax.jit(
        lambda p, b, mk: clipping.clipped_grad(loss, l2_clip_norm=0.5, microbatch_size=8)(
            p, b, mask=mk
        )
    )(p, b, mask)
    np.testing.assert_array_equal(np.asarray(got.norms[8:]), 0.0)
    real = clipping.clipped_grad(loss, l2_clip_norm=0.5)(p, {k: v[:8] for k, v in b.items()})
    _assert_trees_close(got.grad, real.grad, rtol=1e-6, atol=1e-7)
    _assert_trees_close(whole.grad, real.grad, rtol=1e-6, atol=1e-7)
    assert int(got.nonfinite) == int(whole.nonfinite) == 0


def test_microbatching_bounds_the_memory_of_per_example_gradients():
    """The compiled step's temporary memory holds m per-example gradients, not B: a 100k-parameter
    MLP at B = 512 (per-example gradients alone: 205 MB) with microbatches of 32 on the vmap
    path; the taps path holds none (4.0 MB measured, against 208 MB)."""
    rng = np.random.default_rng(0)
    p = {
        "w1": jnp.asarray(rng.normal(size=(784, 128)) * 0.05, jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(128, 10)) * 0.05, jnp.float32),
    }
    b = {
        "x": jnp.asarray(rng.normal(size=(512, 784)), jnp.float32),
        "y": jnp.asarray(rng.integers(0, 10, 512)),
    }
    loss = lambda p, b: (  # noqa: E731
        -jnp.mean(jax.nn.log_softmax(jnp.tanh(b["x"] @ p["w1"]) @ p["w2"])[0, b["y"][0]])
    )
    temp = {}
    for method, m in (("vmap", None), ("vmap", 32), ("auto", None)):
        fn = jax.jit(
            lambda p, b, m=m, method=method: (
                clipping.clipped_grad(loss, l2_clip_norm=1.0, microbatch_size=m, method=method)(
                    p, b
                ).grad
            )
        )
        temp[method, m] = fn.lower(p, b).compile().memory_analysis().temp_size_in_bytes
    per_example = 512 * (784 * 128 + 128 * 10) * 4
    assert temp["vmap", None] >= per_example and temp["vmap", 32] <= per_example / 8, temp
    # The layer taps ("auto" here: dense layers) form no per-example gradient at all.
    assert temp["auto", None] <= per_example / 8, temp


def test_microbatch_size_is_checked():
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="microbatch_size"):
            clipping.clipped_grad(
                lambda p, b: jnp.sum(p * b), l2_clip_norm=1.0, microbatch_size=bad
            )


# ------------------------------------------------------------------------------------------------
# Non-finite gradients contribute exactly zero (nan_safe; tests/test_nonfinite.py runs each path)


def test_clip_factors_are_zero_for_non_finite_norms():
    norms = jnp.array([0.5, 4.0, jnp.nan, jnp.inf, 0.0])
    np.testing.assert_array_equal(
        np.asarray(clipping.clip_factors(norms, 1.0, None)), [1.0, 0.25, 0.0, 0.0, 1.0]
    )
    mask = jnp.array([1.0, 0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(
        np.asarray(clipping.clip_factors(norms, 1.0, mask)), [1.0, 0.0, 0.0, 0.0, 1.0]
    )
    np.testing.assert_array_equal(np.asarray(clipping.nonfinite_count(norms, None)), 2)
    np.testing.assert_array_equal(np.asarray(clipping.nonfinite_count(norms, mask)), 1)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 13),
    bad=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.sampled_from([0, 1, 2]))),
    chunk=st.sampled_from([1, 3, 7, 16, 2**18]),
)
def test_weighted_row_sum_leaves_out_non_finite_rows_in_any_chunking(rows, bad, chunk):
    """Without all rows finite the sum runs over chunks of NAN_SAFE_CHUNK elements (the last one
    ending at the last row): any chunk size, any set of NaN / inf / −inf entries, gives the sum of
    the finite rows; with all rows finite, bitwise the plain product."""
    rng = np.random.default_rng(rows)
    g = {"a": rng.normal(size=(rows, 2, 2)).astype(np.float32)}
    g["b"] = rng.normal(size=(rows, 3)).astype(np.float32)
    scale = rng.uniform(0.1, 1.0, rows).astype(np.float32)
    for row, col, kind in bad:
        if row < rows:
            leaf, index = ("a", np.unravel_index(col % 4, (2, 2))) if col < 4 else ("b", col - 4)
            g[leaf][(row, *np.atleast_1d(index))] = [np.nan, np.inf, -np.inf][kind]
    finite = np.array(
        [all(np.all(np.isfinite(leaf[i])) for leaf in g.values()) for i in range(rows)]
    )
    want = {
        k: np.tensordot(
            scale * finite, np.where(finite.reshape((-1,) + (1,) * (v.ndim - 1)), v, 0.0), axes=1
        )
        for k, v in g.items()
    }
    old = clipping.NAN_SAFE_CHUNK
    clipping.NAN_SAFE_CHUNK = chunk
    try:
        got = jax.jit(clipping._weighted_row_sum)(
            jnp.asarray(scale), jax.tree_util.tree_map(jnp.asarray, g), jnp.asarray(finite)
        )
    finally:
        clipping.NAN_SAFE_CHUNK = old
    for k in g:
        np.testing.assert_allclose(np.asarray(got[k]), want[k], rtol=1e-5, atol=1e-6)
    if finite.all():
        plain = {k: jnp.tensordot(jnp.asarray(scale), jnp.asarray(v), axes=1) for k, v in g.items()}
        for k in g:
            np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(plain[k]))


def test_the_nan_guard_adds_no_memory_and_no_pass_over_the_batch():
    """The guard's zeroing runs in a cond branch, over chunks of NAN_SAFE_CHUNK elements: the
    compiled clipped sum holds no second copy of the per-example gradients (XLA allocates a
    branch's buffers up front; a zeroed copy of the whole batch here adds ~60 MB) and, on finite
    data, computes the plain product (bitwise)."""
    rng = np.random.default_rng(0)
    p = {
        "w1": jnp.asarray(rng.normal(size=(784, 128)) * 0.05, jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(128, 10)) * 0.05, jnp.float32),
    }
    b = {
        "x": jnp.asarray(rng.normal(size=(512, 784)), jnp.float32),
        "y": jnp.asarray(rng.integers(0, 10, 512)),
    }
    loss = lambda p, b: (  # noqa: E731
        -jnp.mean(jax.nn.log_softmax(jnp.tanh(b["x"] @ p["w1"]) @ p["w2"])[0, b["y"][0]])
    )
    mask = jnp.ones(512)

    def compiled():
        fn = jax.jit(lambda p, b, m: clipping.clipped_grad(loss, l2_clip_norm=1.0)(p, b, mask=m))
        return fn, fn.lower(p, b, mask).compile().memory_analysis().temp_size_in_bytes

    guarded, guarded_temp = compiled()
    original = clipping.nan_safe
    clipping.nan_safe = lambda finite, contract, rows, contract_zeroed=None: contract(rows)
    try:
        plain, plain_temp = compiled()
    finally:
        clipping.nan_safe = original
    assert guarded_temp <= plain_temp + 4 * clipping.NAN_SAFE_CHUNK + 2**16, (
        guarded_temp,
        plain_temp,
    )
    for got, want in zip(
        jax.tree_util.tree_leaves(guarded(p, b, mask).grad),
        jax.tree_util.tree_leaves(plain(p, b, mask).grad),
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# --- prng_argnum counts the loss's positional arguments, as jax_privacy and JAX do ---------------


def _keyed_loss(params, batch, state, key):
    keep = jax.random.bernoulli(key, 0.5, batch["x"].shape)  # dropout on the inputs
    prediction = jnp.where(keep, batch["x"], 0.0) @ params["w"] * state
    return jnp.mean((prediction - batch["y"]) ** 2)


def _keyed_problem():
    rng = np.random.default_rng(0)
    batch = {
        "x": jnp.asarray(rng.normal(size=(12, 5)), jnp.float32),
        "y": jnp.asarray(rng.normal(size=12), jnp.float32),
    }
    return {"w": jnp.ones(5)}, batch, jnp.float32(2.0), jax.random.key(7)


def test_prng_argnum_is_numbered_as_jax_privacy_numbers_it():
    from jax_privacy import clipping as jp_clipping

    params, batch, state, key = _keyed_problem()
    ours = clipping.clipped_grad(_keyed_loss, l2_clip_norm=0.5, prng_argnum=3)
    theirs = jp_clipping.clipped_grad(_keyed_loss, l2_clip_norm=0.5, prng_argnum=3)
    # One key per example, split alike: the same dropout masks, so the same clipped sum.
    np.testing.assert_allclose(
        ours(params, batch, state, key).grad["w"],
        theirs(params, batch, state, key)["w"],
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("old", [0, 1])
def test_prng_argnum_at_the_params_or_the_batch_is_refused_saying_how_it_counts(old):
    where = ("the params", "the batch")[old]
    with pytest.raises(ValueError, match=f"prng_argnum={old} points at {where}.*prng_argnum=2"):
        clipping.clipped_grad(_keyed_loss, l2_clip_norm=1.0, prng_argnum=old)


def test_prng_argnum_at_an_argument_that_is_not_a_key_is_refused_before_compiling():
    params, batch, state, key = _keyed_problem()
    # loss(params, batch, state, key): prng_argnum=2 is the state (the old numbering's key).
    grad_fn = clipping.clipped_grad(_keyed_loss, l2_clip_norm=1.0, prng_argnum=2)
    with pytest.raises(ValueError, match="prng_argnum=2 .* is not a PRNG key: got float32"):
        jax.jit(grad_fn)(params, batch, state, key)
    raw = clipping.clipped_grad(_keyed_loss, l2_clip_norm=1.0, prng_argnum=3)
    out = raw(params, batch, state, jax.random.PRNGKey(7))  # a raw uint32[2] key is a key too
    assert np.isfinite(np.asarray(out.grad["w"])).all()


def _batch_contractions(jaxpr, size: int) -> list:
    """The dot_general equations of ``jaxpr`` (and every jaxpr nested in it) that contract an axis
    of length ``size``: with ``size`` the batch size and no feature of that length, the products
    that sum over the examples."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            if any(lhs[axis] == size for axis in contract):
                found.append(eqn)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found += _batch_contractions(inner, size)
    return found


@pytest.mark.parametrize(
    "path", ["vmap_mlp", "vmap_microbatches", "fast_softmax", "fast_logistic", "transformed"]
)
def test_clipped_sums_run_at_full_precision_whatever_the_matmul_precision(path):
    """On a GPU, JAX's default float32 matmul is TF32: an H200 summed one softmax example's
    clipped contribution to 1.00063·C (tests/test_clipping.py's bound tests failed there). Every
    product over the examples that forms a clipped sum must ask for HIGHEST itself, whatever the
    context asks (here bfloat16, the lowest); CPUs ignore the precision, so the jaxpr is checked."""
    b, d, k = 7, 5, 3
    x = jnp.asarray(np.random.default_rng(0).normal(size=(b, d)), jnp.float32)
    y = jnp.zeros(b, jnp.int32)
    mask = jnp.ones(b)
    if path.startswith("vmap"):
        model = models.mlp(d, 4, k)
        grad_fn = clipping.clipped_grad(
            model, l2_clip_norm=1.0, method="vmap", microbatch_size=2 if "micro" in path else None
        )
        fn = lambda p: grad_fn(p, (x, y), mask=mask).grad  # noqa: E731
        size = 2 if "micro" in path else b
    elif path == "transformed":
        model = models.softmax_regression(d, k)
        fn = lambda p: features._clipped_sum_fast(  # noqa: E731
            model, p, x, y, 1.0, mask, 2.0, jnp.ones(d)
        )[0]
        size = b
    else:
        model = (
            models.softmax_regression(d, k)
            if path == "fast_softmax"
            else models.logistic_regression(d)
        )
        y = y if path == "fast_softmax" else y.astype(jnp.float32)
        grad_fn = clipping.clipped_grad(model, l2_clip_norm=1.0, method="fast")
        fn = lambda p: grad_fn(p, (x, y), mask=mask).grad  # noqa: E731
        size = b
    params = model.init(jax.random.key(0))
    with jax.default_matmul_precision("bfloat16"):
        jaxpr = jax.make_jaxpr(fn)(params).jaxpr
    sums = _batch_contractions(jaxpr, size)
    assert sums, "no product over the examples found: the test no longer sees the clipped sum"
    highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    for eqn in sums:
        assert eqn.params["precision"] == highest, (path, eqn)
