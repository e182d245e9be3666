"""Gaussian noise for the private learners, with an optional per-leaf / per-coordinate scale.

**Convention.** The learners add noise to the *sum* of clipped per-example gradients, then divide
by a fixed normaliser ``N`` (the expected batch size ``q·n`` for Poisson sampling, ``B`` for
shuffled batches, ``n`` for full batch, 1 for one record per step). Coordinate ``j`` of parameter
leaf ``ℓ`` gets noise of standard deviation

    std_ℓ,j = noise_multiplier · C̄ · scale_ℓ,j      on the sum   (so  ·/N  on the mean gradient),

where ``C̄ = clip_norm`` if it is finite and ``C̄ = 1`` when ``clip_norm = inf`` (no clipping, no
gradient bound to express the noise in). ``scales`` is a pytree matching the parameters whose
leaves are scalars or arrays broadcastable to the leaf; ``None`` means isotropic (every scale 1),
the usual DP-SGD ``N(0, z²C²I)``.

**CorrDP-SGD (Wang et al., Algorithm 1 / §5.1).** It adds ``b_i ~ N(0, σ_i²)`` to the *averaged*
gradient, unclipped. With ``clip_norm = inf`` and normaliser ``N``, choose a base level ``σ`` and
set ``noise_multiplier = σ·N`` (:func:`multiplier_for_mean_std`) and ``scale_i = σ_i/σ``. The
paper's variance *factors* (``TV~(i)``, or ``max{TV(i), m_s²/m²}``) multiply ``σ²``, so the scale
is their square root; :func:`feature_scales` builds the pytree for per-input-feature factors on
the rows of a ``(d, k)`` weight leaf (GLM ``"w"`` or the MLP's first layer ``"w1"``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.models import Array, Params
from dpprep.validation import check_finite_array, check_positive

Scales = Any  # None, or a pytree matching the params with scalar / broadcastable array leaves


def unit_of(clip_norm: Array) -> Array:
    """``C̄``: the clip norm when finite, else 1."""
    clip_norm = jnp.asarray(clip_norm, jnp.float32)
    return jnp.where(jnp.isfinite(clip_norm), clip_norm, 1.0)


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


def noise_std(noise_multiplier: Array, clip_norm: Array, scales: Scales, params: Params) -> Params:
    """Per-leaf standard deviation of the noise on the gradient *sum* (see module docstring)."""
    base = jnp.asarray(noise_multiplier, jnp.float32) * unit_of(clip_norm)
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


def add_noise(
    key: Array, grad_sum: Params, noise_multiplier: Array, clip_norm: Array, scales: Scales = None
) -> Params:
    """``grad_sum + N(0, (z·C̄·scale)²)`` per coordinate."""
    std = noise_std(noise_multiplier, clip_norm, scales, grad_sum)
    noise = gaussian_noise(key, grad_sum, std)
    return jax.tree_util.tree_map(jnp.add, grad_sum, noise)


def multiplier_for_mean_std(std_on_mean: float, normaliser: float, clip_norm: float = float("inf")) -> float:
    """Noise multiplier giving std ``std_on_mean`` on the averaged gradient: ``std·N/C̄``."""
    std_on_mean = check_positive(std_on_mean, "std_on_mean", allow_zero=True)
    normaliser = check_positive(normaliser, "normaliser")
    clip = float(clip_norm)
    if not clip > 0:
        raise ValueError(f"clip_norm must be > 0 (inf allowed), got {clip_norm!r}")
    return std_on_mean * normaliser / (clip if np.isfinite(clip) else 1.0)


def feature_scales(params: Params, row_scales: Any, leaf: str) -> Params:
    """Scales that are ``row_scales[j]`` on row ``j`` of ``params[leaf]`` (shape ``(d, k)``) and 1
    elsewhere. Row ``j`` holds the weights of input feature ``j`` (GLM ``"w"``, MLP ``"w1"``).
    Pass standard-deviation factors (square roots of variance factors such as CorrDP's TV~)."""
    if leaf not in params:
        raise ValueError(f"leaf {leaf!r} not in params (leaves: {sorted(params)})")
    rows = check_finite_array(row_scales, "row_scales", ndim=1)
    if rows.shape[0] != params[leaf].shape[0]:
        raise ValueError(
            f"row_scales has {rows.shape[0]} entries, params[{leaf!r}] has {params[leaf].shape[0]} rows")
    if np.any(rows < 0):
        raise ValueError("row_scales must be >= 0")
    scales = isotropic_scales(params)
    scales[leaf] = jnp.asarray(rows, jnp.float32)[:, None]
    return scales
