"""Bring your own model: flax.nnx, flax.linen, equinox or a plain ``(init, apply)`` pair as a
:class:`~dpprep.models.Model`, so it trains through :func:`dpprep.algorithms.train` and the
sweeps like dpprep's own models, with inputs of any shape ``(n, ...)``.

Each adapter takes the model and a ``loss``: one of :data:`LOSSES` or a callable
``loss(outputs, y) -> (b,)`` of per-example losses. The parameters are the framework's own
pytree (a linen ``params`` dict, an nnx ``State`` of ``Param`` variables, an equinox module with
only its inexact arrays), so what ``train`` returns plugs back in: ``nnx.update(module, params)``,
``module.apply({"params": params}, x)``, ``eqx.combine(params, static)``.

>>> import jax, jax.numpy as jnp
>>> model = from_init_apply(lambda key: {"w": jnp.zeros((4, 3))}, lambda p, x: x @ p["w"],
...                         loss="softmax_cross_entropy")
>>> model.per_example_loss(model.init(jax.random.key(0)), jnp.ones((2, 4)), jnp.array([0, 2])).shape
(2,)

Only trainable parameters are private-trained: models with mutable state that mixes examples
(batch norm's batch statistics) break per-example clipping and are refused; dropout needs a key
per example, which :func:`dpprep.clipping.clipped_grad` (``prng_argnum``) provides in a user's
own step (:func:`dpprep.step.dp_step`). The frameworks are optional: ``pip install
dpprep[frameworks]``; each is imported only when its adapter is called.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpprep.models import Array, Model, Params, _logistic_loss, _softmax_cross_entropy

Loss = str | Callable[[Array, Array], Array]


def _flat(outputs: Array) -> Array:
    """``(b, 1)`` → ``(b,)`` for one-output models (binary logits, regression)."""
    return outputs[:, 0] if outputs.ndim == 2 and outputs.shape[1] == 1 else outputs


#: Named losses: per-example function of (outputs, y), what ``y`` holds, the task, and whether a
#: one-output model's ``(b, 1)`` outputs are flattened to ``(b,)``.
LOSSES: dict[str, tuple[Callable[[Array, Array], Array], str, str, bool]] = {
    "softmax_cross_entropy": (_softmax_cross_entropy, "class", "classification", False),
    "sigmoid_binary_cross_entropy": (_logistic_loss, "binary", "classification", True),
    "squared_error": (lambda out, y: (y - out) ** 2, "real", "regression", True),
}


def from_init_apply(init: Callable[[Array], Params], apply: Callable[[Params, Array], Array], *,
                    loss: Loss, name: str = "custom", task: str = "classification") -> Model:
    """A :class:`~dpprep.models.Model` from ``init(key) -> params`` and a batched
    ``apply(params, x) -> outputs``. ``loss``: a name in :data:`LOSSES` or a callable
    ``loss(outputs, y) -> (b,)`` (then ``task`` says whether accuracy applies and ``y`` is only
    checked for finiteness)."""
    if not callable(init) or not callable(apply):
        raise ValueError("init and apply must be callables: init(key) -> params, apply(params, x) -> outputs")
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {sorted(LOSSES)} or a callable (outputs, y) -> (b,), got {loss!r}")
        fn, target, task, flatten = LOSSES[loss]
    elif callable(loss):
        fn, target, flatten = loss, None, False
    else:
        raise ValueError(f"loss must be one of {sorted(LOSSES)} or a callable, got {type(loss).__name__}")
    batched = (lambda params, x: _flat(apply(params, x))) if flatten else apply

    def per_example_loss(params: Params, x: Array, y: Array) -> Array:
        return fn(batched(params, x), y)

    return Model(name, init, batched, per_example_loss, task=task, target=target)


def from_flax_linen(module: Any, example_x: Any, *, loss: Loss, name: str | None = None) -> Model:
    """A flax.linen ``module`` (``module.init(key, x)["params"]``, ``module.apply({"params": p},
    x)``); ``example_x`` is a batch (or one example with its leading axis) that fixes the input
    shape. Modules with collections other than ``params`` (e.g. ``batch_stats``) are refused."""
    sample = jnp.asarray(example_x)[:1]
    collections = jax.eval_shape(module.init, jax.random.key(0), sample)
    extra = sorted(set(collections) - {"params"})
    if extra:
        raise ValueError(f"linen module has mutable collections {extra}; per-example clipping needs a "
                         "module whose only variables are 'params' (batch statistics mix examples)")

    def init(key: Array) -> Params:
        return module.init(key, sample)["params"]

    def apply(params: Params, x: Array) -> Array:
        return module.apply({"params": params}, x)

    return from_init_apply(init, apply, loss=loss, name=name or type(module).__name__)


def from_flax_nnx(module: Any, *, loss: Loss, name: str | None = None) -> Model:
    """A flax.nnx ``module`` (already initialised: nnx modules own their parameters). Its
    ``nnx.Param`` variables are the trained parameters (an ``nnx.State``; write the result back
    with ``nnx.update(module, params)``); every other variable (e.g. an RNG state) is held fixed.
    ``init`` ignores its key and returns the module's parameters: build the module with the key
    you want. Modules with ``nnx.BatchStat`` variables are refused (batch statistics mix
    examples)."""
    from flax import nnx

    graphdef, params, rest = nnx.split(module, nnx.Param, ...)  # type: ignore[misc]  # two filters: three parts
    if jax.tree_util.tree_leaves(nnx.state(module, nnx.BatchStat)):
        raise ValueError("nnx module has BatchStat variables (batch norm); per-example clipping needs a "
                         "module whose outputs for one example do not depend on the others")

    def init(key: Array) -> Params:
        del key  # nnx modules are initialised when built
        return params

    def apply(p: Params, x: Array) -> Array:
        return nnx.merge(graphdef, p, rest)(x)

    return from_init_apply(init, apply, loss=loss, name=name or type(module).__name__)


def from_equinox(module: Any, *, loss: Loss, name: str | None = None) -> Model:
    """An equinox ``module`` that maps *one* example to its outputs (equinox's convention; it is
    vmapped over the batch). Its inexact arrays (``eqx.is_inexact_array``) are the trained
    parameters (an equinox module with the rest set to None; ``eqx.combine(params, static)``
    rebuilds it). ``init`` ignores its key and returns them: build the module with the key you
    want."""
    import equinox as eqx

    params, static = eqx.partition(module, eqx.is_inexact_array)

    def init(key: Array) -> Params:
        del key  # equinox modules are initialised when built
        return params

    def apply(p: Params, x: Array) -> Array:
        return jax.vmap(eqx.combine(p, static))(x)

    return from_init_apply(init, apply, loss=loss, name=name or type(module).__name__)
