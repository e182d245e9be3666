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

:func:`gaussian_privatizer` is this noise as an optax ``GradientTransformation`` (its state holds
the noise key and the step count), so a private update composes with any optimizer in
``optax.chain``, in the spirit of jax_privacy's noise addition:

>>> import jax, jax.numpy as jnp, optax
>>> tx = optax.chain(gaussian_privatizer(key=jax.random.key(0), l2_clip_norm=1.0,
...                                      noise_multiplier=1.0, normalize_by=100.0),
...                  optax.sgd(0.1))
>>> params = {"w": jnp.zeros(3)}
>>> state = tx.init(params)
>>> updates, state = tx.update({"w": jnp.ones(3)}, state, params)   # a clipped gradient sum
>>> updates["w"].shape, int(state[0].count)
((3,), 1)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

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
    if p_def != s_def:  # type: ignore[operator]  # jax's PyTreeDef stub
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
    stds = treedef.flatten_up_to(std)  # type: ignore[attr-defined]  # jax's PyTreeDef stub
    keys = jax.random.split(key, len(leaves))
    noise = [s * jax.random.normal(k, jnp.shape(p), jnp.float32) for k, p, s in zip(keys, leaves, stds)]
    return jax.tree_util.tree_unflatten(treedef, noise)


def add_noise(key: Array, grad_sum: Params, noise_multiplier: Array, noise_std_abs: Array,
              clip_norm: Array, scales: Scales = None) -> Params:
    """``grad_sum + N(0, ((z·C + noise_std)·scale)²)`` per coordinate."""
    std = noise_std(noise_multiplier, noise_std_abs, clip_norm, scales, grad_sum)
    noise = gaussian_noise(key, grad_sum, std)
    return jax.tree_util.tree_map(jnp.add, grad_sum, noise)


class PrivatizerState(NamedTuple):
    """State of :func:`gaussian_privatizer`: the noise key and the number of updates so far
    (step ``t`` draws its noise from ``fold_in(key, t)``)."""

    key: Array
    count: Array  # type: ignore[assignment]  # optax's state field name; shadows tuple.count


def _concrete(value: Any) -> np.ndarray | None:
    """``value`` as float64 numpy, or None when it is traced (checked on the host only)."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(value)):
        return None
    return np.asarray(value, np.float64)


def gaussian_privatizer(
    *,
    key: Array,
    l2_clip_norm: Any = None,
    noise_multiplier: Any = 0.0,
    stddev: Any = 0.0,
    scales: Scales = None,
    normalize_by: Any = 1.0,
) -> optax.GradientTransformation:
    """The Gaussian mechanism on a clipped gradient sum, as an optax transformation.

    ``update(grad_sum, state)`` returns ``(grad_sum + N(0, ((z·C + stddev)·scale)²)) /
    normalize_by`` per coordinate (module docstring), with the noise of step ``t`` drawn from
    ``fold_in(key, t)``. Feed it the output of :func:`dpprep.clipping.clipped_grad` (the *sum*
    of per-example gradients clipped to ``C``): that sum has L2 sensitivity ``C``, so the noise
    is the Gaussian mechanism at multiplier ``z`` that the accountants charge (Abadi et al. 2016;
    :meth:`dpprep.plan.ExecutionPlan.dp_event`). Chain an optimizer after it.

    Args:
      key: the noise key (e.g. ``dpprep.streams.stream(run_key, "noise")``).
      l2_clip_norm: ``C``, the clipping bound of the gradients it privatizes; required with
        ``noise_multiplier > 0`` (the multiplier is in units of ``C``).
      noise_multiplier: ``z``, the noise std relative to ``C``.
      stddev: an absolute noise std (for unclipped runs); not together with ``z > 0``.
      scales: None (isotropic) or a pytree like the params of per-leaf / per-coordinate factors.
      normalize_by: the fixed normaliser (e.g. the expected batch size).

    Raises ``ValueError`` on the host (before any compilation) for a multiplier without a finite
    clipping bound, negative or non-finite noise, or a non-positive normaliser. Traced values
    (sweeps) are checked by the drivers.
    """
    clip = float("inf") if l2_clip_norm is None else l2_clip_norm
    z, s, c, n = (_concrete(v) for v in (noise_multiplier, stddev, clip, normalize_by))
    if z is not None and s is not None and c is not None:
        if l2_clip_norm is None and np.any(z > 0):
            raise ValueError("gaussian_privatizer with noise_multiplier > 0 needs l2_clip_norm, the clipping "
                             "bound of the gradients it privatizes (the noise std is z·C); chain it after "
                             "dpprep.clipped_grad with the same bound, or give an absolute stddev")
        check_noise(z, s, c)
    if n is not None and not (np.all(np.isfinite(n)) and np.all(n > 0)):
        raise ValueError(f"normalize_by must be finite and > 0, got {normalize_by!r}")

    def init_fn(params: Params) -> PrivatizerState:
        del params
        return PrivatizerState(key, jnp.zeros((), jnp.int32))

    def update_fn(updates: Params, state: PrivatizerState, params: Params | None = None
                  ) -> tuple[Params, PrivatizerState]:
        del params
        noisy = add_noise(jax.random.fold_in(state.key, state.count), updates, noise_multiplier, stddev,
                          clip, scales)  # type: ignore[arg-type]  # a float std broadcasts
        out = jax.tree_util.tree_map(lambda g: g / normalize_by, noisy)
        return out, PrivatizerState(state.key, state.count + 1)

    return optax.GradientTransformation(init_fn, update_fn)
