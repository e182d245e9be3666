"""One private step, where the core primitives compose.

A DP-SGD step is three pieces, each handed out by the run's :class:`dpprep.plan.DPPlan`, the one
object that states the clip bound, the noise, the normaliser, the sampler and the steps:

1. ``plan.clipped_grad(loss)`` — the sum of per-example gradients clipped to the plan's ``C``
   (any loss, any batch pytree; :func:`dpprep.clipping.clipped_grad`);
2. ``plan.optimizer(tx, key=...)`` — the plan's privatizer (Gaussian noise of std ``z·C`` on that
   sum, divided by the plan's normaliser) chained *before* any optax optimizer ``tx``;
3. ``optax.apply_updates``.

:func:`dp_step` runs them in that order, and refuses pieces that do not come from one plan (a
clipped sum at another bound, an optimizer without the privatizer or with it after Adam, a batch
of another shape, the state of another transformation, a step past the plan's last).
:func:`dpprep.algorithms.train` scans the same step, the sweeps vmap that scan, and a user calls
it from their own loop:

>>> import jax, jax.numpy as jnp, optax
>>> from dpprep.plan import DPPlan
>>> plan = DPPlan.create("poisson", 1000, batch_size=50, steps=3, l2_clip_norm=1.0,
...                      noise_multiplier=1.1, delta=1e-5)
>>> loss = lambda params, batch: jnp.mean((batch["x"] @ params["w"] - batch["y"]) ** 2)
>>> grad_fn = plan.clipped_grad(loss)                       # C stated once: in the plan
>>> tx = plan.optimizer(optax.sgd(0.5), key=jax.random.key(0))
>>> data = {"x": jnp.ones((1000, 2)), "y": jnp.ones(1000)}
>>> params = {"w": jnp.zeros(2)}
>>> opt_state = tx.init(params)
>>> for t in range(plan.steps):
...     idx, mask = plan.batch(jax.random.key(0), t)       # the plan's sampler
...     batch = jax.tree_util.tree_map(lambda a: a[idx], data)
...     params, opt_state, out = dp_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask)
>>> round(plan.spent(opt_state), 3) == round(plan.epsilon, 3)    # the ε of the steps taken
True
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
import optax

from dpprep.clipping import ClippedGrad
from dpprep.models import Array, Params
from dpprep.plan import PlanGradFn, PrivateTransformation, _privatizer_state


def apply_step(params: Params, opt_state: optax.OptState, batch: Any, *, grad_fn: Callable[..., ClippedGrad],
               tx: optax.GradientTransformation, mask: Array | None = None
               ) -> tuple[Params, optax.OptState, ClippedGrad]:
    """The step itself, unchecked (the engine's: its pieces come from the driver, which checked
    them against the plan): ``grad_fn`` → ``tx`` → apply."""
    clipped = grad_fn(params, batch, mask=mask)
    updates, opt_state = tx.update(clipped.grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, clipped


def dp_step(
    params: Params,
    opt_state: optax.OptState,
    batch: Any,
    *,
    grad_fn: PlanGradFn,
    tx: PrivateTransformation,
    mask: Array | None = None,
) -> tuple[Params, optax.OptState, ClippedGrad]:
    """One private update of a plan's run: clipped sum → privatizer → optimizer → apply.

    Args:
      params, opt_state: the current parameters and ``tx``'s state (``tx.init(params)``).
      batch: the step's batch pytree (leading axis = the plan's ``pad`` examples).
      grad_fn: ``plan.clipped_grad(loss)``.
      tx: ``plan.optimizer(optimizer, key=...)`` of the **same** plan.
      mask: 0/1 weights of the batch's examples (``plan.batch`` gives them), or None.

    Returns:
      ``(new_params, new_opt_state, clipped)``; ``clipped`` holds the per-example norms and aux,
      which are **not** private (diagnostics only).

    Raises ``TypeError`` for pieces that no plan handed out and ``ValueError`` when they come
    from different plans, when ``opt_state`` is not ``tx``'s, or (outside ``jit``) when the plan's
    steps are used up.
    """
    if not isinstance(grad_fn, PlanGradFn):
        raise TypeError("grad_fn must come from a plan (plan.clipped_grad(loss)), so that it clips to the "
                        f"plan's bound; got {type(grad_fn).__name__}")
    if not isinstance(tx, PrivateTransformation):
        raise TypeError("tx must come from a plan (plan.optimizer(optax_optimizer, key=...)), which puts its "
                        f"privatizer first; got {type(tx).__name__}")
    if grad_fn.plan != tx.plan:
        raise ValueError("grad_fn and tx come from different plans: they would clip to one bound and add noise for "
                         f"another ({grad_fn.plan.describe()} vs {tx.plan.describe()})")
    expected = jax.tree_util.tree_structure(jax.eval_shape(tx.init, params))
    if jax.tree_util.tree_structure(opt_state) != expected:  # type: ignore[operator]  # jax's PyTreeDef stub
        raise ValueError("opt_state is not the state of tx (build it with tx.init(params)): its structure is "
                         f"{jax.tree_util.tree_structure(opt_state)}, tx's is {expected}")
    count = _privatizer_state(opt_state).count
    if not isinstance(count, jax.core.Tracer) and int(np.asarray(count)) >= tx.plan.steps:
        raise ValueError(f"the plan charges {tx.plan.steps} steps and all of them were taken: a further step is "
                         "not covered by its epsilon (make a plan with more steps)")
    out = apply_step(params, opt_state, batch, grad_fn=grad_fn, tx=tx, mask=mask)
    if not isinstance(out[2], ClippedGrad):  # pragma: no cover - a PlanGradFn returns one
        raise TypeError(f"grad_fn must return a ClippedGrad, got {type(out[2]).__name__}")
    return out
