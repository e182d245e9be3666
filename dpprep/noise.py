"""Gaussian noise for the private learners, with an optional per-leaf / per-coordinate scale.

**Convention.** The learners add noise to the *sum* of clipped per-example gradients, then divide
by a fixed normaliser ``N`` (the expected batch size ``q·n`` for Poisson sampling, ``B`` for
fixed-size batches, ``n`` for full batch, 1 for one record per step). Coordinate ``j`` of
parameter leaf ``ℓ`` gets noise of standard deviation

    std_ℓ,j = (noise_multiplier · clip_norm + noise_std) · scale_ℓ,j   on the sum (·/N on the mean).

``noise_multiplier`` (z) is relative to the clip norm, the unit the accountants use; it needs a
finite ``clip_norm``, and z > 0 with ``clip_norm = inf`` is refused (it has no unit: a sweep over
the clip norm must not change what z means). ``noise_std`` is an absolute std, for unclipped runs
(e.g. CorrDP-SGD, :mod:`dpprep.corrdp`). ``scales`` is a pytree matching the parameters whose
leaves are scalars or arrays broadcastable to the leaf; ``None`` means isotropic (every scale 1),
the usual DP-SGD ``N(0, z²C²I)``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.models import Array, Params
from dpprep.validation import check_finite_array

Scales = Any  # None, or a pytree matching the params with scalar / broadcastable array leaves


def isotropic_scales(params: Params) -> Params:
    """Scale 1 on every leaf (the explicit form of ``scales=None``)."""
    return jax.tree_util.tree_map(lambda _: jnp.float32(1.0), params)


def check_scales(params: Params, scales: Scales, name: str = "noise_scales") -> Scales:
    """Host-side check: same tree structure as ``params``, finite, >= 0, broadcastable per leaf."""
    if scales is None:
        return None
    p_leaves, p_def = jax.tree_util.tree_flatten(params)
    s_leaves, s_def = jax.tree_util.tree_flatten(scales)
    if p_def != s_def:
        raise ValueError(f"{name} must have the same tree structure as the params: {s_def} vs {p_def}")
    for p, s in zip(p_leaves, s_leaves):
        arr = check_finite_array(s, name)
        if np.any(arr < 0):
            raise ValueError(f"{name} must be >= 0, got a minimum of {arr.min()}")
        try:
            out = np.broadcast_shapes(arr.shape, np.shape(p))
        except ValueError:
            out = None
        if out != np.shape(p):
            raise ValueError(f"{name} leaf of shape {arr.shape} does not broadcast to {np.shape(p)}")
    return scales


def check_noise(noise_multiplier: Any, noise_std: Any, clip_norm: Any) -> None:
    """Host-side check of the noise level (grid values allowed): z and the absolute std finite and
    >= 0, not both > 0 at one point, and z > 0 only with a finite clip norm."""
    z = np.asarray(noise_multiplier, np.float64)
    s = np.asarray(noise_std, np.float64)
    c = np.asarray(clip_norm, np.float64)
    for name, v in (("noise_multiplier", z), ("noise_std", s)):
        if np.any(~np.isfinite(v)) or np.any(v < 0):
            raise ValueError(f"{name} must be finite and >= 0, got {v.tolist()!r}")
    if np.any(np.broadcast_to(z > 0, np.broadcast_shapes(z.shape, s.shape)) & (s > 0)):
        raise ValueError("give noise_multiplier (relative to clip_norm) or noise_std (absolute), not both")
    if np.any(np.broadcast_to(z > 0, np.broadcast_shapes(z.shape, c.shape)) & ~np.isfinite(c)):
        raise ValueError("noise_multiplier > 0 needs a finite clip_norm (it is the noise std in units of "
                         "the clip norm); for an unclipped run give the absolute noise_std instead")


def noise_std(noise_multiplier: Array, noise_std_abs: Array, clip_norm: Array, scales: Scales,
              params: Params) -> Params:
    """Per-leaf standard deviation of the noise on the gradient *sum* (see module docstring)."""
    z = jnp.asarray(noise_multiplier, jnp.float32)
    # z·C with z = 0 and C = inf must be 0, not NaN (z > 0 with C = inf is refused on the host).
    relative = jnp.where(z > 0, z * jnp.asarray(clip_norm, jnp.float32), 0.0)
    base = relative + jnp.asarray(noise_std_abs, jnp.float32)
    if scales is None:
        scales = isotropic_scales(params)
    return jax.tree_util.tree_map(lambda p, s: base * jnp.asarray(s, jnp.float32), params, scales)


def gaussian_noise(key: Array, params: Params, std: Params) -> Params:
    """Independent ``N(0, std²)`` per coordinate, one key per leaf (``std`` broadcasts per leaf)."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    stds = treedef.flatten_up_to(std)
    keys = jax.random.split(key, len(leaves))
    noise = [s * jax.random.normal(k, jnp.shape(p), jnp.float32) for k, p, s in zip(keys, leaves, stds)]
    return jax.tree_util.tree_unflatten(treedef, noise)


def add_noise(key: Array, grad_sum: Params, noise_multiplier: Array, noise_std_abs: Array,
              clip_norm: Array, scales: Scales = None) -> Params:
    """``grad_sum + N(0, ((z·C + noise_std)·scale)²)`` per coordinate."""
    std = noise_std(noise_multiplier, noise_std_abs, clip_norm, scales, grad_sum)
    noise = gaussian_noise(key, grad_sum, std)
    return jax.tree_util.tree_map(jnp.add, grad_sum, noise)
