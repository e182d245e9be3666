"""Helpers for code that must keep its shape under JAX's transformations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array


@jax.custom_batching.custom_vmap
def everywhere(ok: Array) -> Array:
    """``ok``, and under ``vmap`` ``all(ok)`` over the mapped axes, unbatched: the predicate of a
    ``lax.cond`` that must stay a cond when the computation is vmapped (a batched predicate turns
    it into a select that runs both branches for every element).

    >>> import jax, jax.numpy as jnp
    >>> bool(everywhere(jnp.array(True)))
    True
    >>> # one unbatched answer for the whole map
    >>> jax.vmap(everywhere)(jnp.array([True, False]))
    Array([False, False], dtype=bool)
    """
    return ok


@everywhere.def_vmap
def _everywhere_vmap(axis_size: int, in_batched: list[bool], ok: Array) -> tuple[Array, bool]:
    del axis_size
    return everywhere(jnp.all(ok) if in_batched[0] else ok), False
