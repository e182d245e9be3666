"""Per-example gradient clipping: ``Σ_i mask_i · g_i · min(1, C/||g_i||)``.

Two paths that agree (tested to 1e-5 relative):

- **fast** (GLMs, ``model.has_fast_path``): a GLM's per-example gradient is the outer product
  ``x_i ⊗ r_i`` (plus ``r_i`` for the bias), whose norm is ``sqrt(||x_i||² + 1)·||r_i||``; the
  clipped sum is then one matrix product ``Xᵀ(s ⊙ R)``. No per-example gradient is materialised,
  so the cost is that of a non-private gradient.
- **vmap** (any model): ``vmap(grad)`` materialises the ``(b, ...)`` per-example gradients.

``clip_norm`` may be a traced scalar (so sweeps can vmap over it) and may be ``inf`` (no clipping,
as in the CorrDP experiments). The regulariser is not part of the clipped sum.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpprep.models import Array, Model, Params

METHODS = ("auto", "fast", "vmap")


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


def clipped_grad_sum_vmap(
    model: Model, params: Params, x: Array, y: Array, clip_norm: Array, mask: Array | None = None
) -> tuple[Params, Array]:
    """General path. Returns (clipped gradient sum, per-example norms before clipping)."""
    grads = per_example_grads(model, params, x, y)
    squares = [jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree_util.tree_leaves(grads)]
    norms = jnp.sqrt(sum(squares))
    scale = _scales(norms, clip_norm, mask)
    summed = jax.tree_util.tree_map(lambda g: jnp.tensordot(scale, g, axes=1), grads)
    return summed, norms


def clipped_grad_sum_fast(
    model: Model, params: Params, x: Array, y: Array, clip_norm: Array, mask: Array | None = None
) -> tuple[Params, Array]:
    """GLM path: norms as products of norms, the clipped sum as one matrix product."""
    if not model.has_fast_path:
        raise ValueError(f"model {model.name!r} has no fast clipping path; use the vmap path")
    residual = model.residual(params, x, y)  # (b, k)
    x_sq = jnp.sum(x * x, axis=1) + (1.0 if "b" in params else 0.0)
    norms = jnp.sqrt(x_sq) * jnp.linalg.norm(residual, axis=1)
    weighted = residual * _scales(norms, clip_norm, mask)[:, None]
    summed = {"w": x.T @ weighted}
    if "b" in params:
        summed["b"] = jnp.sum(weighted, axis=0)
    return summed, norms


def clipped_grad_sum(
    model: Model,
    params: Params,
    x: Array,
    y: Array,
    clip_norm: Array,
    mask: Array | None = None,
    *,
    method: str = "auto",
) -> tuple[Params, Array]:
    """Sum of clipped per-example gradients and the per-example norms (before clipping).

    Args:
      model, params: the model and its parameters.
      x, y: a batch (possibly padded); ``mask`` (0/1 floats, shape ``(b,)``) marks real examples.
      clip_norm: the bound C (> 0, may be ``inf``).
      method: "auto" (fast path when the model has one), "fast" or "vmap".
    """
    check_method(method)
    use_fast = method == "fast" or (method == "auto" and model.has_fast_path)
    fn = clipped_grad_sum_fast if use_fast else clipped_grad_sum_vmap
    return fn(model, params, x, y, jnp.asarray(clip_norm, jnp.float32), mask)
