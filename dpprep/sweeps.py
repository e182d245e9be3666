"""Many runs as one compiled call: ``vmap`` over PRNG keys and shape-preserving hyperparameters.

``sweep(config, params0, data, keys, learning_rate=[...], noise_multiplier=[...])`` returns the
results of the full grid ``keys × axis_1 × axis_2 × …`` stacked with leading axes in that order,
equal (to float rounding of batched matrix products) to calling :func:`dpprep.algorithms.train`
once per grid point with the same key. Runs that share a key share their batches and noise draws
(common random numbers), exactly as the separate calls would.

Sweepable axes are the :class:`~dpprep.algorithms.Hyper` fields: ``learning_rate``,
``noise_multiplier``, ``clip_norm``, ``radius`` (1-D sequences) and ``noise_scales`` (a pytree
matching the params whose leaves carry a leading axis of grid values).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from dpprep.algorithms import (
    Hyper,
    TrainConfig,
    check_data,
    check_hyper,
    make_train_fn,
    warn_on_overflow,
)
from dpprep.models import Array, Params

AXES = tuple(f.name for f in dataclasses.fields(Hyper))


def _axis_length(name: str, values: Any) -> int:
    if name == "noise_scales":
        lengths = {np.shape(leaf)[0] if np.ndim(leaf) else -1 for leaf in jax.tree_util.tree_leaves(values)}
        if len(lengths) != 1 or -1 in lengths:
            raise ValueError("every noise_scales leaf needs the same leading (grid) axis")
        return lengths.pop()
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"{name} values must be a non-empty 1-D sequence, got shape {arr.shape}")
    return arr.shape[0]


def make_sweep_fn(config: TrainConfig, n: int, names: list[str]) -> Callable[..., Any]:
    """The jitted grid function ``(params0, x, y, keys, *values) -> (params, metrics)`` behind
    :func:`sweep` (no validation; ``values`` in the order of ``names``). Keep it to reuse its
    compilation across calls with the same shapes."""
    run = make_train_fn(config, n)
    base = config.hyper

    def point(params0, x, y, key, *values):
        hyper = dataclasses.replace(base, **dict(zip(names, values)))
        return run(hyper, params0, x, y, key)

    fn = point
    for i in reversed(range(len(names))):
        in_axes = [None, None, None, None] + [None] * len(names)
        in_axes[4 + i] = 0
        fn = jax.vmap(fn, in_axes=tuple(in_axes))
    fn = jax.vmap(fn, in_axes=(None, None, None, 0) + (None,) * len(names))
    return jax.jit(fn)


def sweep(
    config: TrainConfig, params0: Params, data: tuple[Any, Any], keys: Array, **axes: Any
) -> tuple[Params, dict[str, Array]]:
    """Train the grid ``keys × axes`` in one jitted, vmapped call.

    Args:
      config: the static config; ``config.hyper`` gives the values of the axes not swept.
      params0, data: shared initial parameters and ``(x, y)``.
      keys: stacked PRNG keys, one per seed (e.g. ``jax.random.split(key, 10)``).
      **axes: ``name=values`` for Hyper fields to sweep (in the order given).

    Returns:
      ``(params, metrics)`` with leading axes ``(len(keys), len(axis_1), …)``.
    """
    x, y = check_data(data, params0)
    if config.hyper is None:
        raise ValueError("config.hyper is required")
    unknown = sorted(set(axes) - set(AXES))
    if unknown:
        raise ValueError(f"cannot sweep {unknown}; sweepable axes are {AXES}")
    keys = jnp.asarray(keys)
    if keys.ndim != (1 if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else 2):
        raise ValueError(f"keys must be a stack of PRNG keys, got shape {keys.shape}")
    lengths = {name: _axis_length(name, values) for name, values in axes.items()}
    for name, values in axes.items():  # validate every grid value before compiling
        for i in range(lengths[name]):
            value = (jax.tree_util.tree_map(lambda v: np.asarray(v)[i], values) if name == "noise_scales"
                     else np.asarray(values)[i])
            check_hyper(dataclasses.replace(config.hyper, **{name: value}), params0)
    check_hyper(config.hyper, params0)
    fn = make_sweep_fn(config, x.shape[0], list(axes))
    values = [jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float32), axes[name])
              if name == "noise_scales" else jnp.asarray(axes[name], jnp.float32) for name in axes]
    params, metrics = fn(params0, x, y, keys, *values)
    warn_on_overflow(metrics, config)
    return params, metrics
