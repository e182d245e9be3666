"""One private step, where the core primitives compose.

A DP-SGD step is three pieces, each usable on its own:

1. :func:`dpprep.clipping.clipped_grad` — the sum of per-example gradients clipped to ``C`` (any
   loss, any batch pytree; :func:`dpprep.clipping.model_clipped_grad` picks the GLM fast path for
   dpprep's linear models);
2. an optax transformation whose first link is :func:`dpprep.noise.gaussian_privatizer` — the
   Gaussian noise on that sum and the division by the normaliser — chained with any optimizer;
3. ``optax.apply_updates``.

:func:`dp_step` runs them in that order. :func:`dpprep.algorithms.train` scans it, the sweeps
vmap that scan, and a user can call it from their own loop:

>>> import jax, jax.numpy as jnp, optax
>>> from dpprep.clipping import clipped_grad
>>> from dpprep.noise import gaussian_privatizer
>>> loss = lambda params, batch: jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2)
>>> grad_fn = clipped_grad(loss, l2_clip_norm=1.0)
>>> tx = optax.chain(gaussian_privatizer(key=jax.random.key(0), l2_clip_norm=1.0,
...                                      noise_multiplier=1.1, normalize_by=4.0),
...                  optax.sgd(0.5))
>>> params = {"w": jnp.zeros(2)}
>>> opt_state = tx.init(params)
>>> batch = {"x": jnp.ones((4, 2)), "y": jnp.ones(4)}
>>> for _ in range(3):
...     params, opt_state, out = dp_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx)
>>> out.norms.shape
(4,)

The privacy of a loop of such steps is that of its sampler and count of steps: build the
matching :class:`dpprep.plan.ExecutionPlan` and read ``plan.epsilon(z, δ)``.
"""

from __future__ import annotations

from typing import Any, Callable

import optax

from dpprep.clipping import ClippedGrad
from dpprep.models import Array, Params


def dp_step(
    params: Params,
    opt_state: optax.OptState,
    batch: Any,
    *,
    grad_fn: Callable[..., ClippedGrad],
    tx: optax.GradientTransformation,
    mask: Array | None = None,
) -> tuple[Params, optax.OptState, ClippedGrad]:
    """One private update: ``grad_fn`` (clipped sum) → ``tx`` (privatizer, optimizer) → apply.

    Args:
      params, opt_state: the current parameters and ``tx``'s state (``tx.init(params)``).
      batch: the step's batch pytree (leading axis = examples), as ``grad_fn`` takes it.
      grad_fn: ``grad_fn(params, batch, mask=mask) -> ClippedGrad``
        (:func:`dpprep.clipping.clipped_grad`).
      tx: an optax transformation whose first link privatizes the clipped sum
        (:func:`dpprep.noise.gaussian_privatizer`).
      mask: 0/1 weights of the batch's examples (padded slots 0), or None.

    Returns:
      ``(new_params, new_opt_state, clipped)``; ``clipped`` holds the per-example norms and aux,
      which are **not** private (diagnostics only).
    """
    clipped = grad_fn(params, batch, mask=mask)
    updates, opt_state = tx.update(clipped.grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, clipped
