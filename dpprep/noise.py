"""Gaussian noise for the private learners, with an optional per-leaf / per-coordinate scale.

**Convention.** The learners add noise to the *sum* of clipped per-example gradients, then divide
by a fixed normaliser ``N`` (the expected batch size ``q·n`` for Poisson sampling, ``B`` for
fixed-size batches, ``n`` for full batch, 1 for one record per step). Coordinate ``j`` of
parameter leaf ``ℓ`` gets noise of standard deviation

    std_ℓ,j = noise_multiplier · l2_clip_norm · scale_ℓ,j   on the sum (·/N on the mean).

``noise_multiplier`` (z) is relative to the clip norm, the unit the accountants use: a private run
has a finite ``l2_clip_norm`` and ``z > 0`` (both come from its :class:`dpprep.plan.DPPlan`).
``scales`` is a pytree matching the parameters whose leaves are scalars or arrays broadcastable to
the leaf; ``None`` means isotropic (every scale 1), the usual DP-SGD ``N(0, z²C²I)``. An
extension running a mechanism with a *nominal* ε only (no guarantee, e.g. CorrDP-SGD's paper
mode, :mod:`dpprep.corrdp`) may add an absolute std on top, in a non-private plan.

:func:`gaussian_privatizer` is this noise as an optax ``GradientTransformation`` (its state holds
the noise key and the step count), so a private update composes with any optimizer in
``optax.chain``, in the spirit of jax_privacy's noise addition:

>>> import jax, jax.numpy as jnp, optax
>>> tx = optax.chain(gaussian_privatizer(key=jax.random.key(0), l2_clip_norm=1.0,
...                                      noise_multiplier=1.0, normalize_by=100.0),
...                  optax.sgd(0.1))
>>> params = {"w": jnp.zeros(3)}
>>> state = tx.init(params)
>>> clipped_sum = {"w": jnp.ones(3)}
>>> updates, state = tx.update(clipped_sum, state, params)
>>> updates["w"].shape, int(state[0].count)
((3,), 1)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from dpprep.models import Array, Params
from dpprep.renames import module_renames
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
        raise ValueError(
            f"{name} must have the same tree structure as the params: {s_def} vs {p_def}"
        )
    for p, s in zip(p_leaves, s_leaves):
        arr = check_finite_array(s, name)
        if np.any(arr < 0):
            raise ValueError(f"{name} must be >= 0, got a minimum of {arr.min()}")
        try:
            out = np.broadcast_shapes(arr.shape, np.shape(p))
        except ValueError:
            out = None
        if out != np.shape(p):
            raise ValueError(
                f"{name} leaf of shape {arr.shape} does not broadcast to {np.shape(p)}"
            )
    return scales


def check_noise(noise_multiplier: ArrayLike, l2_clip_norm: ArrayLike) -> None:
    """Host-side check of a private run's noise (grid values allowed): every multiplier finite and
    > 0, every clip bound finite and > 0 (a run without noise, or whose noise has no unit, has no
    DP guarantee: it is requested explicitly, with a non-private plan)."""
    z = np.asarray(noise_multiplier, np.float64)
    c = np.asarray(l2_clip_norm, np.float64)
    if z.size == 0 or not np.all(np.isfinite(z) & (z > 0)):
        raise ValueError(
            f"noise_multiplier must be finite and > 0, got {z.tolist()!r} (a run without noise has"
            " no DP guarantee: make it explicit with DPPlan.non_private(...))"
        )
    if c.size == 0 or not np.all(np.isfinite(c) & (c > 0)):
        raise ValueError(
            "l2_clip_norm must be finite and > 0 in a private run (the noise std is z·C), got"
            f" {c.tolist()!r}"
        )


def leaf_stddevs(
    noise_multiplier: ArrayLike,
    l2_clip_norm: ArrayLike,
    scales: Scales,
    params: Params,
    stddev: ArrayLike = 0.0,
) -> Params:
    """Per-leaf standard deviation of the noise on the gradient *sum*: ``(z·C + stddev)·scale``
    (see the module docstring; ``stddev`` is an extension's absolute std, nominal runs only)."""
    z = jnp.asarray(noise_multiplier, jnp.float32)
    # z·C with z = 0 and C = inf must be 0, not NaN (a private run has z > 0 and a finite C).
    relative = jnp.where(z > 0, z * jnp.asarray(l2_clip_norm, jnp.float32), 0.0)
    base = relative + jnp.asarray(stddev, jnp.float32)
    if scales is None:
        scales = isotropic_scales(params)
    elif jax.tree_util.tree_structure(scales) != jax.tree_util.tree_structure(params):  # type: ignore[operator]
        raise ValueError(
            "scales must have the tree structure of the params:"
            f" {jax.tree_util.tree_structure(scales)} vs {jax.tree_util.tree_structure(params)}"
        )
    return jax.tree_util.tree_map(lambda p, s: base * jnp.asarray(s, jnp.float32), params, scales)


def gaussian_noise(key: Array, params: Params, std: Params) -> Params:
    """Independent ``N(0, std²)`` per coordinate, one key per leaf (``std`` broadcasts per leaf)."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    stds = treedef.flatten_up_to(std)  # type: ignore[attr-defined]  # jax's PyTreeDef stub
    keys = jax.random.split(key, len(leaves))
    noise = [
        s * jax.random.normal(k, jnp.shape(p), jnp.float32) for k, p, s in zip(keys, leaves, stds)
    ]
    return jax.tree_util.tree_unflatten(treedef, noise)


def add_noise(
    key: Array,
    grad_sum: Params,
    noise_multiplier: ArrayLike,
    l2_clip_norm: ArrayLike,
    scales: Scales = None,
    stddev: ArrayLike = 0.0,
) -> Params:
    """``grad_sum + N(0, ((z·C + stddev)·scale)²)`` per coordinate."""
    std = leaf_stddevs(noise_multiplier, l2_clip_norm, scales, grad_sum, stddev)
    noise = gaussian_noise(key, grad_sum, std)
    return jax.tree_util.tree_map(jnp.add, grad_sum, noise)


class PrivatizerState(NamedTuple):
    """State of :func:`gaussian_privatizer`: the noise key and the number of updates so far
    (step ``t`` draws its noise from ``fold_in(key, t)``)."""

    key: Array
    count: Array  # type: ignore[assignment]  # optax's state field name; shadows tuple.count


def check_key_arg(key: Any, name: str = "key") -> Array:
    """``key`` as a PRNG key (``jax.random.key`` or ``jax.random.PRNGKey``); TypeError otherwise."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        ok = np.ndim(key) == 0
    else:
        ok = dtype == np.uint32 and np.shape(key) == (2,)
    if not ok:
        raise TypeError(
            f"{name} must be a PRNG key, e.g. jax.random.key(seed), got {type(key).__name__}"
            + (f" of shape {np.shape(key)} and dtype {dtype}" if dtype is not None else "")
        )
    return key


def privatizer(
    key: Array,
    l2_clip_norm: ArrayLike,
    noise_multiplier: ArrayLike,
    scales: Scales,
    normalize_by: ArrayLike,
    stddev: ArrayLike = 0.0,
) -> optax.GradientTransformation:
    """Internal: the engine's privatizer, **unchecked** (its values may be traced, and nothing
    here refuses a multiplier, clip bound or scale of 0): ``(sum + noise) / normalize_by`` with
    noise std ``(z·C + stddev)·scale`` drawn from ``fold_in(key, t)`` at the ``t``-th update.
    The engine and the sweeps call it with values their plan checked on the host (each point of
    a sweep is checked and accounted before compiling), and an extension's privatizer hook with
    the options the engine hands it. Anything else uses :func:`gaussian_privatizer` (concrete,
    checked values) or a plan's (:meth:`dpprep.plan.DPPlan.optimizer`)."""

    def init_fn(params: Params) -> PrivatizerState:
        del params
        return PrivatizerState(key, jnp.zeros((), jnp.int32))

    def update_fn(
        updates: Params, state: PrivatizerState, params: Params | None = None
    ) -> tuple[Params, PrivatizerState]:
        del params
        noisy = add_noise(
            jax.random.fold_in(state.key, state.count),
            updates,
            noise_multiplier,
            l2_clip_norm,
            scales,
            stddev,
        )
        out = jax.tree_util.tree_map(lambda g: g / normalize_by, noisy)
        return out, PrivatizerState(state.key, state.count + 1)

    return optax.GradientTransformation(init_fn, update_fn)


def _traced(value: Any) -> bool:
    """Whether any leaf of ``value`` is traced (under ``jit``/``vmap``: no value to check)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(value))


def gaussian_privatizer(
    *,
    key: Array,
    l2_clip_norm: float,
    noise_multiplier: float,
    scales: Scales = None,
    normalize_by: float = 1.0,
) -> optax.GradientTransformation:
    """The Gaussian mechanism on a clipped gradient sum, as an optax transformation.

    ``update(grad_sum, state)`` returns ``(grad_sum + N(0, (z·C·scale)²)) / normalize_by`` per
    coordinate, with the noise of step ``t`` drawn from ``fold_in(key, t)``. Feed it the output of
    :func:`dpprep.clipping.clipped_grad` (the *sum* of per-example gradients clipped to ``C``):
    that sum has L2 sensitivity ``C``, so the noise is the Gaussian mechanism at multiplier ``z``
    that the accountants charge (Abadi et al. 2016). Chain an optimizer after it. A
    :class:`dpprep.plan.DPPlan` hands out this privatizer with its own ``C``, ``z`` and normaliser
    already chained before an optimizer (:meth:`~dpprep.plan.DPPlan.optimizer`): prefer that.

    Args:
      key: the noise key (e.g. ``dpprep.streams.stream(run_key, "noise")``).
      l2_clip_norm: ``C``, the clipping bound of the gradients it privatizes (finite, > 0).
      noise_multiplier: ``z`` (> 0), the noise std relative to ``C``.
      scales: None (isotropic) or a pytree like the params of per-leaf / per-coordinate factors
        (> 0; the account is that of the smallest factor times ``z``).
      normalize_by: the fixed normaliser (e.g. the expected batch size).

    Raises ``TypeError`` for a key that is not a PRNG key or a noise value that is traced (built
    under ``jit`` or ``vmap`` from traced numbers, which no host check can read: one traced to 0
    would add no noise), ``ValueError`` on the host (before any compilation) for a clip bound or
    multiplier that is not finite and > 0, scales that are not, or a non-positive normaliser: a
    privatizer adds noise, or it is not one. To vary the noise inside a compiled computation,
    give each value its plan (sweeps check and account every point before compiling).
    """
    check_key_arg(key)
    values = {
        "noise_multiplier": noise_multiplier,
        "l2_clip_norm": l2_clip_norm,
        "normalize_by": normalize_by,
        "scales": scales,
    }
    traced = [name for name, value in values.items() if _traced(value)]
    if traced:
        raise TypeError(
            f"gaussian_privatizer got traced {', '.join(traced)} (it was called under jit or vmap"
            " with traced values): it checks its noise on the host, before compiling, and a"
            " traced value cannot be checked (one traced to 0 would add no noise). Pass concrete"
            " numbers (build the privatizer outside jit), or use a plan"
            " (DPPlan.create(...).optimizer(tx, key=...)), which states and checks them once"
        )
    z, c, n = (np.asarray(v, np.float64) for v in (noise_multiplier, l2_clip_norm, normalize_by))
    check_noise(z, c)
    if not (n.size and np.all(np.isfinite(n)) and np.all(n > 0)):
        raise ValueError(f"normalize_by must be finite and > 0, got {normalize_by!r}")
    if scales is not None:
        for leaf in jax.tree_util.tree_leaves(scales):
            arr = np.asarray(leaf, np.float64)
            if not np.all(np.isfinite(arr) & (arr > 0)):
                raise ValueError(
                    "scales must be finite and > 0 (a zero scale adds no noise there), got a leaf"
                    f" with values in [{arr.min():g}, {arr.max():g}]"
                )
    return privatizer(key, l2_clip_norm, noise_multiplier, scales, normalize_by)


if not TYPE_CHECKING:  # old names, for users' code (they warn)
    __getattr__ = module_renames(globals(), {"noise_std": "leaf_stddevs"})
