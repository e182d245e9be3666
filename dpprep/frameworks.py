"""Bring your own model: flax.nnx, flax.linen, equinox or a plain ``(init, apply)`` pair as a
:class:`~dpprep.models.Model`, so it trains through :func:`dpprep.algorithms.train` and the
sweeps like dpprep's own models, with inputs of any shape ``(n, ...)``.

Each adapter takes the model and a ``loss``: one of :data:`LOSSES` or a callable
``loss(outputs, y) -> (b,)`` of per-example losses. The parameters are the framework's own
pytree (a linen ``params`` dict, an nnx ``State`` of ``Param`` variables, an equinox module with
only its inexact arrays), so what ``train`` returns plugs back in: ``nnx.update(module, params)``,
``module.apply({"params": params}, x)``, ``eqx.combine(params, static)``.

>>> import jax, jax.numpy as jnp
>>> init = lambda key: {"w": jnp.zeros((4, 3))}
>>> model = from_init_apply(init, lambda p, x: x @ p["w"], loss="softmax_cross_entropy")
>>> params = model.init(jax.random.key(0))
>>> model.per_example_loss(params, jnp.ones((2, 4)), jnp.array([0, 2])).shape
(2,)

Only trainable parameters are private-trained: models with mutable state that mixes examples
(batch norm's batch statistics) break per-example clipping and are refused by every adapter.
Dropout (any layer that draws randomness) makes the model **stochastic**
(:attr:`~dpprep.models.Model.stochastic`): :func:`dpprep.algorithms.train`, the sweeps and private
selection give each example of each step its own key, and evaluation runs in inference mode
(nnx: modules with an ``nnx.Rngs`` stream, e.g. ``nnx.Dropout``; equinox: ``eqx.nn.Dropout``, the
module's ``__call__(x, *, key=None)``; linen: name the ``rngs`` collections and the training flag).
The frameworks are optional: ``pip install dpprep[frameworks]``; each is imported only when its
adapter is called.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpprep.models import (
    Array,
    Model,
    Params,
    _logistic_loss,
    _softmax_cross_entropy,
    _squared_error,
)

Loss = str | Callable[[Array, Array], Array]


def _flat(outputs: Array) -> Array:
    """``(b, 1)`` → ``(b,)`` for one-output models (binary logits, regression)."""
    return outputs[:, 0] if outputs.ndim == 2 and outputs.shape[1] == 1 else outputs


#: Named losses: per-example function of (outputs, y), what ``y`` holds, the task, and whether a
#: one-output model's ``(b, 1)`` outputs are flattened to ``(b,)``.
LOSSES: dict[str, tuple[Callable[[Array, Array], Array], str, str, bool]] = {
    "softmax_cross_entropy": (_softmax_cross_entropy, "class", "classification", False),
    "sigmoid_binary_cross_entropy": (_logistic_loss, "binary", "classification", True),
    "squared_error": (_squared_error, "real", "regression", True),
}


def from_init_apply(
    init: Callable[[Array], Params],
    apply: Callable[..., Array],
    *,
    loss: Loss,
    name: str = "custom",
    task: str = "classification",
    stochastic: bool = False,
) -> Model:
    """A :class:`~dpprep.models.Model` from ``init(key) -> params`` and a batched
    ``apply(params, x) -> outputs`` (``stochastic``: ``apply(params, x, key=None)``, deterministic
    at ``key=None``). ``loss``: a name in :data:`LOSSES` or a callable ``loss(outputs, y) -> (b,)``
    (then ``task`` says whether accuracy applies and ``y`` is only checked for finiteness)."""
    if not callable(init) or not callable(apply):
        raise TypeError(
            "init and apply must be callables: init(key) -> params, apply(params, x) -> outputs"
        )
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ValueError(
                f"loss must be one of {sorted(LOSSES)} or a callable (outputs, y) -> (b,), got"
                f" {loss!r}"
            )
        fn, target, task, flatten = LOSSES[loss]
    elif callable(loss):
        fn, target, flatten = loss, None, False
    else:
        raise TypeError(
            f"loss must be one of {sorted(LOSSES)} or a callable, got {type(loss).__name__}"
        )

    def batched(params: Params, x: Array, **kw: Any) -> Array:
        out = apply(params, x, **kw)
        return _flat(out) if flatten else out

    def per_example_loss(params: Params, x: Array, y: Array, **kw: Any) -> Array:
        return fn(batched(params, x, **kw), y)

    return Model(
        name, init, batched, per_example_loss, task=task, target=target, stochastic=stochastic
    )


def from_flax_linen(
    module: Any,
    example_x: ArrayLike,
    *,
    loss: Loss,
    name: str | None = None,
    rngs: tuple[str, ...] = (),
    train_kwarg: str | None = None,
) -> Model:
    """A flax.linen ``module`` (``module.init(key, x)["params"]``, ``module.apply({"params": p},
    x)``); ``example_x`` is a batch (or one example with its leading axis) that fixes the input
    shape. Modules with collections other than ``params`` (e.g. ``batch_stats``) are refused.

    Dropout: ``rngs`` names the module's random collections (e.g. ``("dropout",)``) and
    ``train_kwarg`` its training flag (e.g. ``"train"``): training calls ``apply(..., train=True,
    rngs={"dropout": key})``, evaluation ``apply(..., train=False)``."""
    if bool(rngs) != (train_kwarg is not None):
        raise ValueError(
            "give rngs (the module's random collections) and train_kwarg (its training flag)"
            " together"
        )
    sample = jnp.asarray(example_x)[:1]
    flag = {train_kwarg: False} if train_kwarg is not None else {}
    collections = jax.eval_shape(
        lambda key, xs: module.init(key, xs, **flag), jax.random.key(0), sample
    )
    extra = sorted(set(collections) - {"params"})
    if extra:
        raise ValueError(
            f"linen module has mutable collections {extra}; per-example clipping needs a "
            "module whose only variables are 'params' (batch statistics mix examples)"
        )

    def init(key: Array) -> Params:
        return module.init(key, sample, **flag)["params"]

    def apply(params: Params, x: Array, key: Array | None = None) -> Array:
        if key is None or train_kwarg is None:
            return module.apply({"params": params}, x, **flag)
        keys = dict(zip(rngs, jax.random.split(key, len(rngs))))
        return module.apply({"params": params}, x, **{train_kwarg: True}, rngs=keys)

    return from_init_apply(
        init, apply, loss=loss, name=name or type(module).__name__, stochastic=bool(rngs)
    )


def from_flax_nnx(module: Any, *, loss: Loss, name: str | None = None) -> Model:
    """A flax.nnx ``module`` (already initialised: nnx modules own their parameters). Its
    ``nnx.Param`` variables are the trained parameters (an ``nnx.State``; write the result back
    with ``nnx.update(module, params)``); every other variable is held fixed. ``init`` ignores its
    key and returns the module's parameters: build the module with the key you want. A module
    with random streams (``nnx.Rngs``, e.g. for ``nnx.Dropout``) is stochastic: each example is
    reseeded with its own key, and evaluation runs it in ``eval()`` mode. Modules with
    ``nnx.BatchStat`` variables are refused (batch statistics mix examples)."""
    from flax import nnx

    # two filters: three parts
    graphdef, params, rest = nnx.split(module, nnx.Param, ...)  # type: ignore[misc]
    if jax.tree_util.tree_leaves(nnx.state(module, nnx.BatchStat)):
        raise ValueError(
            "nnx module has BatchStat variables (batch norm); per-example clipping needs a "
            "module whose outputs for one example do not depend on the others"
        )
    stochastic = bool(jax.tree_util.tree_leaves(nnx.state(module, nnx.RngState)))

    def apply(p: Params, x: Array, key: Array | None = None) -> Array:
        # A fresh copy of the fixed state, so the merged module's variables belong to this trace
        # (an RNG count captured from outside cannot be updated inside jit/vmap).
        model = nnx.merge(graphdef, p, jax.tree_util.tree_map(jnp.asarray, rest))
        if key is None:
            model.eval()
        else:
            nnx.reseed(model, **{name: key for name in _rng_streams(nnx, model)})  # type: ignore[arg-type]
        return model(x)

    def init(key: Array) -> Params:
        del key  # nnx modules are initialised when built
        return params

    return from_init_apply(
        init, apply, loss=loss, name=name or type(module).__name__, stochastic=stochastic
    )


def _rng_streams(nnx: Any, model: Any) -> list[str]:
    """The names of an nnx module's random streams (e.g. ``["dropout"]``)."""
    names = set()
    for _, rng_key in nnx.state(model, nnx.RngKey).flat_state():
        names.add(str(rng_key.tag))
    return sorted(names)


def from_equinox(module: Any, *, loss: Loss, name: str | None = None) -> Model:
    """An equinox ``module`` that maps *one* example to its outputs (equinox's convention; it is
    vmapped over the batch). Its inexact arrays (``eqx.is_inexact_array``) are the trained
    parameters (an equinox module with the rest set to None; ``eqx.combine(params, static)``
    rebuilds it). ``init`` ignores its key and returns them: build the module with the key you
    want. A module with ``eqx.nn.Dropout`` is stochastic: its ``__call__`` takes ``key=``, each
    example gets its own, and evaluation runs it in inference mode. Stateful modules
    (``eqx.nn.BatchNorm``, anything holding an ``eqx.nn.StateIndex``) are refused."""
    import equinox as eqx

    layers = jax.tree_util.tree_leaves(module, is_leaf=lambda m: isinstance(m, eqx.Module))
    stateful = sorted(
        {
            type(m).__name__
            for m in jax.tree_util.tree_leaves(
                module, is_leaf=lambda m: isinstance(m, (eqx.nn.StateIndex, eqx.nn.BatchNorm))
            )
            if isinstance(m, (eqx.nn.StateIndex, eqx.nn.BatchNorm))
        }
    )
    if stateful:
        raise ValueError(
            f"equinox module holds state ({', '.join(stateful)}): per-example clipping needs a"
            " module whose outputs for one example do not depend on the others or on state it"
            " updates (batch norm's statistics mix examples); use a stateless normalisation (e.g."
            " LayerNorm)"
        )
    del layers
    stochastic = any(
        isinstance(m, eqx.nn.Dropout)
        for m in jax.tree_util.tree_leaves(module, is_leaf=lambda m: isinstance(m, eqx.nn.Dropout))
    )
    params, static = eqx.partition(module, eqx.is_inexact_array)

    def init(key: Array) -> Params:
        del key  # equinox modules are initialised when built
        return params

    def apply(p: Params, x: Array, key: Array | None = None) -> Array:
        model = eqx.combine(p, static)
        if not stochastic:
            return jax.vmap(model)(x)
        if key is None:
            return jax.vmap(eqx.nn.inference_mode(model))(x)
        return jax.vmap(lambda xi, ki: model(xi, key=ki))(x, jax.random.split(key, x.shape[0]))

    return from_init_apply(
        init, apply, loss=loss, name=name or type(module).__name__, stochastic=stochastic
    )
