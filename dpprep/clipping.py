"""Per-example gradient clipping: ``Σ_i mask_i · g_i · min(1, C/||g_i||)``.

Two paths that agree (tested to 1e-5 relative):

- **fast** (GLMs, ``model.has_fast_path``): a GLM's per-example gradient is the outer product
  ``x_i ⊗ r_i`` (plus ``r_i`` for the bias), whose norm is ``sqrt(||x_i||² + 1)·||r_i||``; the
  clipped sum is then one matrix product ``Xᵀ(s ⊙ R)``. No per-example gradient is materialised,
  so the cost is that of a non-private gradient.
- **vmap** (any model): ``vmap(grad)`` materialises the ``(b, ...)`` per-example gradients.

**Feature transforms.** ``feature_scale`` / ``feature_shift`` train on ``x' = scale ⊙ x − shift``
(e.g. DPSGD-F's norm C_F and private mean). The fast path never forms ``x'``: the logits use
:func:`dpprep.models.glm_params_for_raw_features`, ``||x'_i||² = ||scale ⊙ x_i||² −
2 (scale ⊙ x_i)·shift + ||shift||²`` and the weight gradient is
``diag(scale)·Xᵀ(c ⊙ R) − shift ⊗ 1ᵀ(c ⊙ R)``: rank-1 corrections to the plain products, so a
vmap over per-model transforms shares one batch and one matrix product. The vmap path forms ``x'``.
With a shift the fast path's norms carry the expansion's rounding bound (:func:`_feature_norms`),
so they are upper bounds: equal to the vmap path's to ~``d·1e-7`` relative, and never below the
true norm for rows close to the shift, where the expansion cancels.

Norms are overflow-safe at the cost of a plain sum of squares: each row's squared norm is
computed directly, and only a row where that overflowed (float32 squares overflow above ~1.8e19)
takes the value computed on the row times ``2⁻¹⁰⁰`` (an exact power-of-two scale: no division, no
rounding), rescaled by ``2¹⁰⁰``; so features up to ~1e30 give finite, accurate norms
(:func:`_safe_norms`). ``clip_norm`` may be a traced scalar (so sweeps can vmap over it) and may
be ``inf`` (no clipping). The regulariser is not part of the clipped sum.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from dpprep.models import Array, Model, Params, affine_features, glm_params_for_raw_features, per_example_loss_transformed

METHODS = ("auto", "fast", "vmap", "none")


def check_method(method: str, name: str = "method") -> str:
    """The one check of a clipping method name (also used by the learners before compiling)."""
    if method not in METHODS:
        raise ValueError(f"{name} must be one of {METHODS}, got {method!r}")
    return method


def _scales(norms: Array, clip_norm: Array, mask: Array | None) -> Array:
    # min(1, C/||g||) written so that ||g|| = 0 and C = inf both give 1 without NaNs.
    scale = jnp.minimum(1.0, clip_norm / jnp.maximum(norms, 1e-30))
    return scale if mask is None else scale * mask


def per_example_grads(model: Model, params: Params, x: Array, y: Array) -> Params:
    """Per-example gradients (leading batch axis on every leaf), via ``vmap(grad)``."""

    def single_loss(p, xi, yi):
        return model.per_example_loss(p, xi[None], yi[None])[0]

    return jax.vmap(jax.grad(single_loss), in_axes=(None, 0, 0))(params, x, y)


# Overflow fallback of the row norms: a row whose plain sum of squares is not finite takes the
# sum over ``2⁻¹⁰⁰ × row`` (exact: a power of two, no division) with the root scaled back by
# ``2¹⁰⁰``. Squares of entries below ~1e11 underflow there, which is below float32 rounding in a
# row that overflowed (its norm is above ~1.8e19). The fallback sits behind a ``lax.cond`` on
# "some row overflowed", so an unbatched run (``train``) only pays for the plain sum; under
# ``vmap`` with a batched batch (sweeps over seeds) the cond becomes a select and both sums run.
_DOWN = 2.0 ** -100
_UP = 2.0 ** 100


def _safe_norms(sq_norms: Callable[[float], Array]) -> Array:
    """``sqrt(sq_norms(1))`` per row, falling back to ``2¹⁰⁰·sqrt(sq_norms(2⁻¹⁰⁰))`` on the rows
    where the plain squared norm overflowed; ``sq_norms(c)`` is the squared norm of ``c × row``."""
    root = lambda sq: jnp.sqrt(jnp.maximum(sq, 0.0))
    plain = sq_norms(1.0)

    def fallback(plain: Array) -> Array:
        return jnp.where(jnp.isfinite(plain), root(plain), _UP * root(sq_norms(_DOWN)))

    return jax.lax.cond(jnp.all(jnp.isfinite(plain)), root, fallback, plain)


def _global_norms(tree: Params) -> Array:
    """Per-example global L2 norms over every leaf (leading batch axis), overflow-safe."""
    leaves = [g.reshape(g.shape[0], -1) for g in jax.tree_util.tree_leaves(tree)]
    return _safe_norms(lambda c: sum(jnp.sum(jnp.square(c * g), axis=1) for g in leaves))


def clipped_grad_sum_vmap(
    model: Model, params: Params, x: Array, y: Array, clip_norm: Array, mask: Array | None = None,
    feature_scale: Array | None = None, feature_shift: Array | None = None,
) -> tuple[Params, Array]:
    """General path. Returns (clipped gradient sum, per-example norms before clipping)."""
    grads = per_example_grads(model, params, affine_features(x, feature_scale, feature_shift), y)
    norms = _global_norms(grads)
    scale = _scales(norms, clip_norm, mask)
    summed = jax.tree_util.tree_map(lambda g: jnp.tensordot(scale, g, axes=1), grads)
    return summed, norms


def _feature_norms(x: Array, scale: Array | None, shift: Array | None, bias: bool) -> Array:
    """``sqrt(||scale ⊙ x_i − shift||² + bias)`` per row, from the raw rows, overflow-safe.

    Without a transform: one plain pass over the batch (:func:`_safe_norms`). With one (a value
    per model in a sweep): :func:`_transformed_feature_norms`, whose per-row scaling depends on
    the batch alone, so a vmap over models shares it. (``_safe_norms``' ``lax.cond`` would become
    a select under that vmap and broadcast the batch to every model.)"""
    if scale is None and shift is None:
        return _safe_norms(lambda c: jnp.sum(jnp.square(c * x), axis=1) + (c * c if bias else 0.0))
    return _transformed_feature_norms(x, scale, shift, bias)


def _transformed_feature_norms(x: Array, scale: Array | None, shift: Array | None, bias: bool) -> Array:
    """``sqrt(||scale ⊙ x_i − shift||² + bias)`` per row, from the raw rows, with every term
    divided by ``max(m_i, M)²`` (``m_i = max(1, max_j |x_ij|)``, ``M = max(1, max_j |shift_j|)``)
    so that squares cannot overflow.

    With a shift the expansion cancels for rows close to the shift (e.g. DPSGD-F's private mean),
    where its float32 result could fall far below the true norm, so that such a row would not be
    clipped. The rounding bound of the expansion is added, so the result is never below the true
    norm (it over-clips rows near the shift by at most about ``(d + 8)·2⁻²³`` of the terms'
    size); the products run at full float32 precision so that the bound holds on every backend."""
    highest = jax.lax.Precision.HIGHEST
    # Per-row scale m (from the batch alone: shared by every model of a sweep) and, with a shift,
    # per-model scale M of the shift; every term is divided by R² = max(m, M)² before summing.
    m = jnp.maximum(jnp.max(jnp.abs(x), axis=1), 1.0)
    u = x / m[:, None]
    if scale is None:
        sq = jnp.sum(u * u, axis=1)
    else:
        s = jnp.asarray(scale, jnp.float32)
        sq = jnp.sum(u * u, axis=1) * s * s if s.ndim == 0 else jnp.matmul(u * u, s * s, precision=highest)
    if shift is None:
        r = m
        sq = sq + (1.0 / (m * m) if bias else 0.0)
    else:
        mu = jnp.asarray(shift, jnp.float32)
        big = jnp.maximum(jnp.max(jnp.abs(mu)), 1.0)
        w = mu / big
        v = w if scale is None else w * jnp.asarray(scale, jnp.float32)
        r = jnp.maximum(m, big)
        a, b = m / r, big / r
        mu_sq = jnp.sum(w * w) * b * b
        x_sq = sq * a * a
        cross = 2.0 * a * b * jnp.matmul(u, v, precision=highest)
        size = x_sq + 2.0 * a * b * jnp.matmul(jnp.abs(u), jnp.abs(v), precision=highest) + mu_sq
        sq = x_sq - cross + mu_sq + (x.shape[1] + 8) * 2.0**-23 * size + (1.0 / (r * r) if bias else 0.0)
    return r * jnp.sqrt(jnp.maximum(sq, 0.0))


def clipped_grad_sum_fast(
    model: Model, params: Params, x: Array, y: Array, clip_norm: Array, mask: Array | None = None,
    feature_scale: Array | None = None, feature_shift: Array | None = None,
) -> tuple[Params, Array]:
    """GLM path: norms as products of norms, the clipped sum as one matrix product (plus rank-1
    corrections for a feature transform)."""
    if not model.has_fast_path:
        raise ValueError(f"model {model.name!r} has no fast clipping path; use the vmap path")
    raw = (params if feature_scale is None and feature_shift is None
           else glm_params_for_raw_features(params, feature_scale, feature_shift))
    residual = model.residual(raw, x, y)  # (b, k)
    r_norm = jnp.linalg.norm(residual, axis=1)
    norms = _feature_norms(x, feature_scale, feature_shift, "b" in params) * r_norm
    weighted = residual * _scales(norms, clip_norm, mask)[:, None]
    w_grad = x.T @ weighted
    column_sum = jnp.sum(weighted, axis=0)
    if feature_scale is not None:
        s = jnp.asarray(feature_scale, jnp.float32)
        w_grad = w_grad * (s if s.ndim == 0 else s[:, None])
    if feature_shift is not None:
        w_grad = w_grad - jnp.asarray(feature_shift, jnp.float32)[:, None] * column_sum[None, :]
    summed = {"w": w_grad}
    if "b" in params:
        summed["b"] = column_sum
    return summed, norms


def grad_sum_unclipped(
    model: Model, params: Params, x: Array, y: Array, mask: Array | None = None,
    feature_scale: Array | None = None, feature_shift: Array | None = None,
) -> tuple[Params, Array]:
    """``method="none"``: the plain gradient of the (masked) loss sum, without per-example
    gradients (for unclipped runs of any model, e.g. CorrDP-SGD's networks). Norms are NaN: they
    are not computed."""

    def total(p):
        losses = per_example_loss_transformed(model, p, x, y, feature_scale, feature_shift)
        return jnp.sum(losses if mask is None else losses * mask)

    return jax.grad(total)(params), jnp.full((x.shape[0],), jnp.nan, jnp.float32)


def clipped_grad_sum(
    model: Model,
    params: Params,
    x: Array,
    y: Array,
    clip_norm: Array,
    mask: Array | None = None,
    *,
    method: str = "auto",
    feature_scale: Array | None = None,
    feature_shift: Array | None = None,
) -> tuple[Params, Array]:
    """Sum of clipped per-example gradients and the per-example norms (before clipping).

    Args:
      model, params: the model and its parameters.
      x, y: a batch (possibly padded); ``mask`` (0/1 floats, shape ``(b,)``) marks real examples.
      clip_norm: the bound C (> 0, may be ``inf``).
      method: "auto" (fast path when the model has one), "fast", "vmap" or "none" (no
        per-example clipping at all: ``clip_norm`` is ignored and must be ``inf``, which the
        learners check on the host; norms are NaN).
      feature_scale, feature_shift: train on ``scale ⊙ x − shift`` (module docstring).
    """
    check_method(method)
    if method == "none":
        return grad_sum_unclipped(model, params, x, y, mask, feature_scale, feature_shift)
    use_fast = method == "fast" or (method == "auto" and model.has_fast_path)
    fn = clipped_grad_sum_fast if use_fast else clipped_grad_sum_vmap
    return fn(model, params, x, y, jnp.asarray(clip_norm, jnp.float32), mask, feature_scale, feature_shift)
