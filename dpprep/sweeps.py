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

from dpprep.algorithms import (
    Hyper,
    TrainConfig,
    check_data,
    check_hyper,
    check_key,
    make_train_fn,
    warn_on_overflow,
)
from dpprep.models import Array, Params

AXES = tuple(f.name for f in dataclasses.fields(Hyper))


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
    keys = check_key(keys, "keys", stacked=True)
    x, y = check_data(data, params0, config.model)
    if config.hyper is None:
        raise ValueError("config.hyper is required")
    unknown = sorted(set(axes) - set(AXES))
    if unknown:
        raise ValueError(f"cannot sweep {unknown}; sweepable axes are {AXES}")
    # The grid's shape, every grid value and every field not swept (a scalar), before compiling.
    check_hyper(dataclasses.replace(config.hyper, **axes), params0, swept=axes)
    fn = make_sweep_fn(config, x.shape[0], list(axes))
    values = [jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float32), axes[name])
              if name == "noise_scales" else jnp.asarray(axes[name], jnp.float32) for name in axes]
    params, metrics = fn(params0, x, y, keys, *values)
    warn_on_overflow(metrics, config)
    return params, metrics
