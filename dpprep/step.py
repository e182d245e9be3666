"""One private step, where the core primitives compose.

A DP-SGD step is four pieces, each handed out by the run's :class:`dpprep.plan.DPPlan`, the one
object that states the clip bound, the noise, the normaliser, the sampler and the steps:

1. ``plan.batch(key, t, data)`` — step ``t``'s batch and its mask, drawn by the plan's sampler,
   as one :class:`~dpprep.plan.PlanBatch` (padded slots hold zeros, never a record);
2. ``plan.clipped_grad(loss)`` — the sum of per-example gradients clipped to the plan's ``C``
   (any loss, any batch pytree; :func:`dpprep.clipping.clipped_grad`) over that
   :class:`~dpprep.plan.PlanBatch`, which it takes whole (no separate mask);
3. ``plan.optimizer(tx, key=...)`` — the plan's privatizer (Gaussian noise of std ``z·C`` on that
   sum, divided by the plan's normaliser) chained *before* any optax optimizer ``tx``;
4. ``optax.apply_updates``.

:func:`dp_step` runs them in that order on the whole ``data`` — it draws the batch of the step the
optimizer's state has reached, so batches, mask and noise cannot fall out of step — and refuses
pieces that do not come from one plan (a clipped sum at another bound, an optimizer without the
privatizer or with it after Adam, data of another size, the state of another transformation, a
step past the plan's last). :func:`dpprep.algorithms.train` scans the same step, the sweeps vmap
that scan, and a user calls it from their own loop:

>>> import jax, jax.numpy as jnp, optax
>>> from dpprep.plan import DPPlan
>>> plan = DPPlan.create("poisson", 1000, batch_size=50, steps=3, l2_clip_norm=1.0,
...                      noise_multiplier=1.1, delta=1e-5)
>>> loss = lambda p, batch: jnp.mean((batch["x"] @ p["w"] - batch["y"]) ** 2)
>>> grad_fn = plan.clipped_grad(loss)  # C stated once: in the plan
>>> # the run's key: it draws the batches and the noise
>>> tx = plan.optimizer(optax.sgd(0.5), key=jax.random.key(0))
>>> data = {"x": jnp.ones((1000, 2)), "y": jnp.ones(1000)}
>>> params = {"w": jnp.zeros(2)}
>>> opt_state = tx.init(params)
>>> for t in range(plan.steps):
...     params, opt_state, out = dp_step(
...         params, opt_state, data, grad_fn=grad_fn, tx=tx
...     )
>>> plan.spent(opt_state) == plan.epsilon  # the ε of the steps taken
True
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpprep import streams
from dpprep.clipping import LOSS_LEADING_ARGS, Batch, ClippedGrad
from dpprep.models import Array, Params
from dpprep.plan import PlanGradFn, PrivateTransformation, _privatizer_state
from dpprep.validation import check_step_fits


def apply_step(
    params: Params,
    opt_state: optax.OptState,
    batch: Batch,
    *,
    grad_fn: Callable[..., ClippedGrad],
    tx: optax.GradientTransformation,
    mask: Array | None = None,
) -> tuple[Params, optax.OptState, ClippedGrad]:
    """The step itself, unchecked (the engine's: its pieces come from the driver, which checked
    them against the plan): ``grad_fn`` → ``tx`` → apply."""
    clipped = grad_fn(params, batch, mask=mask)
    updates, opt_state = tx.update(clipped.grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, clipped


def dp_step(
    params: Params,
    opt_state: optax.OptState,
    data: Batch,
    *,
    grad_fn: PlanGradFn,
    tx: PrivateTransformation,
    args: tuple[Any, ...] = (),
) -> tuple[Params, optax.OptState, ClippedGrad]:
    """One private update of a plan's run: batch → clipped sum → privatizer → optimizer → apply.

    Args:
      params, opt_state: the current parameters and ``tx``'s state (``tx.init(params)``, once).
      data: the whole private data set, a pytree whose every leaf has the plan's ``n`` rows; the
        step draws its batch (``plan.batch(tx.key, t, data)``, ``t`` the releases so far).
      grad_fn: ``plan.clipped_grad(loss)``.
      tx: ``plan.optimizer(optimizer, key=...)`` of the **same** plan.
      args: further arguments of the loss (e.g. model state), passed to every example; a key
        goes where ``grad_fn``'s ``prng_argnum`` says (the step's key from the run key's
        ``"model"`` stream, split per example), and a stochastic model gets it too.

    Returns:
      ``(new_params, new_opt_state, clipped)``; ``clipped`` holds the per-example norms and aux,
      which are **not** private (diagnostics only).

    Raises ``TypeError`` for pieces that no plan handed out and ``ValueError`` when they come
    from different plans, when ``opt_state`` is not ``tx``'s, when the data has another size, or
    (outside ``jit``) when the plan's steps are used up.
    """
    if not isinstance(grad_fn, PlanGradFn):
        raise TypeError(
            "grad_fn must come from a plan (plan.clipped_grad(loss)), so that it clips to the "
            f"plan's bound; got {type(grad_fn).__name__}"
        )
    if not isinstance(tx, PrivateTransformation):
        raise TypeError(
            "tx must come from a plan (plan.optimizer(optax_optimizer, key=...)), which puts its "
            f"privatizer first; got {type(tx).__name__}"
        )
    if grad_fn.plan != tx.plan:
        raise ValueError(
            "grad_fn and tx come from different plans: they would clip to one bound and add noise"
            f" for another ({grad_fn.plan.describe()} vs {tx.plan.describe()})"
        )
    expected = jax.tree_util.tree_structure(jax.eval_shape(tx.chained.init, params))
    # jax's PyTreeDef stub
    if jax.tree_util.tree_structure(opt_state) != expected:  # type: ignore[operator]
        raise ValueError(
            "opt_state is not the state of tx (build it with tx.init(params)): its structure is "
            f"{jax.tree_util.tree_structure(opt_state)}, tx's is {expected}"
        )
    plan = tx.plan
    count = _privatizer_state(opt_state).count
    if not isinstance(count, jax.core.Tracer) and int(np.asarray(count)) >= plan.steps:
        raise ValueError(
            f"the plan charges {plan.steps} steps and all of them were taken: a further step is "
            "not covered by its epsilon (make a plan with more steps)"
        )
    # past the last step the privatizer gives NaN
    t = jnp.minimum(jnp.asarray(count, jnp.int32), plan.steps - 1)
    batch = plan.batch(tx.key, t, data)  # rows and mask as one PlanBatch
    step_key = jax.random.fold_in(streams.stream(tx.key, streams.MODEL), t)
    call_args = list(args)
    if grad_fn.prng_argnum is not None:
        # prng_argnum counts the loss's (params, batch, *args), as jax_privacy and JAX do.
        index = grad_fn.prng_argnum - LOSS_LEADING_ARGS
        if not 0 <= index <= len(call_args):
            raise ValueError(
                f"prng_argnum={grad_fn.prng_argnum} (counting params and batch): dp_step puts the"
                f" step's key there, but only {len(call_args)} other argument(s) were given"
            )
        call_args.insert(index, step_key)
    step_fn = functools.partial(grad_fn, key=step_key) if grad_fn.stochastic else grad_fn
    check_step_fits(grad_fn, step_fn, params, batch, None, tuple(call_args))
    return apply_step(
        params,
        opt_state,
        batch,
        grad_fn=lambda p, b, mask: step_fn(p, b, *call_args),
        tx=tx,
    )
