"""Standard optimizers by name, one object per configuration.

The engine applies ``hyper.learning_rate × updates`` of a *unit-rate* optax transformation
(:class:`~dpprep.algorithms.TrainConfig` ``optimizer``). An optax ``GradientTransformation`` is a
pair of functions and compares by identity, and the engine caches its compilations on the config,
so ``optax.adam(1.0)`` built twice gives two configs that do not compare equal and compile twice.
:func:`optimizer` names a standard optax optimizer: a :class:`NamedOptimizer`, which compares by
its name and options (defaults spelled out), so configs built the same way compare equal and share
one compilation:

>>> from dpprep import optimizers
>>> optimizers.optimizer("adam") == optimizers.optimizer("adam", b1=0.9)
True

It also holds two optax-style wrappers the convex-optimisation analyses of DP-GD assume:

* :func:`project_l2_ball` — a last link that keeps the iterates in ``{‖θ‖ ≤ R}`` (projected
  gradient descent); :class:`L2BallProjection` puts it around a run's update as an engine extension;
* :func:`average_iterates` — keeps the running sum of the iterates in the optimizer state;
  :func:`averaged_params` reads their mean (the engine's ``iterates="average"``).

>>> import jax.numpy as jnp, optax
>>> tx = average_iterates(optax.chain(optax.sgd(1.0), project_l2_ball(1.0)))
>>> params = {"w": jnp.zeros(2)}
>>> state = tx.init(params)
>>> for _ in range(2):
...     updates, state = tx.update({"w": jnp.array([-3.0, -4.0])}, state, params)
...     params = optax.apply_updates(params, updates)
>>> # (3, 4) projected onto the unit ball
>>> [round(float(v), 3) for v in params["w"]]
[0.6, 0.8]
>>> [round(float(v), 3) for v in averaged_params(state)["w"]]
[0.6, 0.8]
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, ClassVar, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpprep.extensions import Extension
from dpprep.models import Params
from dpprep.validation import check_positive


@dataclasses.dataclass(frozen=True)
class NamedOptimizer:
    """The unit-rate optax optimizer ``optax.<name>(learning_rate=1.0, **options)`` (an optax
    transformation: ``init`` and ``update``), compared by ``name`` and ``options``."""

    name: str
    options: tuple[tuple[str, Any], ...]

    @property
    def init(self) -> optax.TransformInitFn:
        return _build(self.name, self.options).init

    @property
    def update(self) -> optax.TransformUpdateFn:
        return _build(self.name, self.options).update


def optimizer(name: str, **options: Any) -> NamedOptimizer:
    """The unit-rate optax optimizer ``optax.<name>(learning_rate=1.0, **options)`` by name.

    Args:
      name: an optax optimizer alias that takes a ``learning_rate`` (``"sgd"``, ``"adam"``,
        ``"adamw"``, ``"rmsprop"``, …).
      **options: its other keyword arguments (e.g. ``b1``, ``momentum``); they must be hashable.
        Options equal to optax's defaults give the same object as leaving them out.

    Returns:
      a :class:`NamedOptimizer`, equal for equal ``name`` and options (the learning rate is
      ``hyper.learning_rate`` of the run, applied by the engine).

    Raises:
      ValueError: an unknown name, a ``learning_rate`` option, an option the optimizer does not
        take, or an unhashable option (build that optimizer once and reuse the object instead).
    """
    factory = (
        getattr(optax, name, None) if isinstance(name, str) and not name.startswith("_") else None
    )
    try:
        parameters = inspect.signature(factory).parameters if callable(factory) else {}
    except (TypeError, ValueError):
        parameters = {}
    if factory is None or "learning_rate" not in parameters:
        raise ValueError(
            "optimizer name must be an optax optimizer that takes a learning_rate "
            f"(e.g. 'sgd', 'adam'), got {name!r}"
        )
    if "learning_rate" in options:
        raise ValueError(
            "optimizers are unit-rate: the engine applies hyper.learning_rate; "
            "do not pass learning_rate"
        )
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        raise ValueError(
            f"optax.{name} takes no option(s) {unknown}; it takes"
            f" {sorted(set(parameters) - {'learning_rate'})}"
        )
    # Defaults spelled out: optimizer("adam") and optimizer("adam", b1=0.9) are one object.
    bound = inspect.signature(factory).bind_partial(learning_rate=1.0, **options)
    bound.apply_defaults()
    key = tuple(sorted((k, v) for k, v in bound.arguments.items() if k != "learning_rate"))
    try:
        hash(key)
    except TypeError as err:
        raise ValueError(
            f"optimizer options must be hashable to be compared ({err}); build the "
            "optimizer once and reuse that object instead"
        ) from err
    return NamedOptimizer(name, key)


def as_optimizer(
    value: optax.GradientTransformation | str | None, name: str = "optimizer"
) -> optax.GradientTransformation | None:
    """``value`` as a run's unit-rate optimizer: an optax transformation (anything with callable
    ``init`` and ``update``) unchanged, a name as :func:`optimizer` ``(value)`` (``"adam"``), None
    unchanged (the engine's default, ``optax.sgd(1.0)``).

    Raises:
      TypeError: anything else, e.g. the factory ``optax.adam`` instead of ``optax.adam(1.0)``.
      ValueError: a name :func:`optimizer` does not know.
    """
    if value is None or isinstance(value, NamedOptimizer):
        return value
    if isinstance(value, str):
        return optimizer(value)
    if callable(getattr(value, "init", None)) and callable(getattr(value, "update", None)):
        return value
    hint = (
        f" ({getattr(value, '__name__', 'it')} is a function: pass what it returns, e.g. "
        "optax.adam(1.0), not the factory)"
        if callable(value)
        else ""
    )
    raise TypeError(
        f"{name} must be an optax GradientTransformation at unit learning rate (e.g. "
        "optax.adam(1.0)) or the name of an optax optimizer that dpprep.optimizers.optimizer "
        f"accepts (e.g. 'sgd', 'adam'), got {type(value).__name__}{hint}"
    )


@functools.cache
def _build(name: str, options: tuple[tuple[str, Any], ...]) -> optax.GradientTransformation:
    return getattr(optax, name)(learning_rate=1.0, **dict(options))


def project_l2_ball(radius: float) -> optax.GradientTransformation:
    """A last link that projects the next iterate onto the L2 ball ``{‖θ‖ ≤ radius}`` (global norm
    over every leaf, bias included): it returns ``Π(θ + u) − θ`` for updates ``u``, so that
    ``optax.apply_updates`` lands on the projection (up to float rounding of that difference).
    Needs the params in ``update``."""
    radius = check_positive(radius, "radius")

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("project_l2_ball needs the params (pass them to tx.update)")
        new = optax.apply_updates(params, updates)
        factor = jnp.minimum(1.0, radius / jnp.maximum(optax.tree.norm(new), 1e-30))
        return jax.tree_util.tree_map(lambda n, p: n * factor - p, new, params), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


@dataclasses.dataclass(frozen=True)
class L2BallProjection(Extension):
    """Engine extension: projected updates, the iterates kept in ``{‖θ‖ ≤ radius}``
    (:func:`project_l2_ball` after the learning rate), as the convex DP-ERM analyses assume."""

    #: Vouched: the projection post-processes the privatized update (it calls the inner
    #: transformation once).
    vouches: ClassVar[tuple[str, ...]] = ("wrap",)
    #: Verified by dpprep's tests (tests/test_plan_pieces.py: one inner update per step, the
    #: update projected; tests/test_algorithms.py: the iterates stay in the ball).
    verified_by_dpprep: ClassVar[bool] = True

    radius: float

    def __post_init__(self) -> None:
        if not (
            isinstance(self.radius, (int, float)) and self.radius > 0 and math.isfinite(self.radius)
        ):
            raise ValueError(f"radius must be a finite number > 0, got {self.radius!r}")

    def wrap(
        self, tx: optax.GradientTransformation, values: Mapping[str, Any]
    ) -> optax.GradientTransformation:
        del values
        return optax.chain(tx, project_l2_ball(self.radius))


class AverageIteratesState(NamedTuple):
    """State of :func:`average_iterates`: the inner state, ``Σ θ_t`` and the number of updates."""

    inner: optax.OptState
    total: Params
    num_updates: jax.Array


def average_iterates(inner: optax.GradientTransformation) -> optax.GradientTransformation:
    """``inner`` unchanged, plus the running sum of the iterates it produces (``θ_1..θ_t``) in its
    state: :func:`averaged_params` gives their mean (Polyak–Ruppert averaging). A driver that
    skips a step keeps the old state, so skipped steps are not counted. Needs the params."""

    def init_fn(params):
        return AverageIteratesState(
            inner.init(params),
            jax.tree_util.tree_map(jnp.zeros_like, params),
            jnp.zeros((), jnp.int32),
        )

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("average_iterates needs the params (pass them to tx.update)")
        updates, inner_state = inner.update(updates, state.inner, params)
        new = optax.apply_updates(params, updates)
        total = jax.tree_util.tree_map(jnp.add, state.total, new)
        return updates, AverageIteratesState(inner_state, total, state.num_updates + 1)

    return optax.GradientTransformation(init_fn, update_fn)


def averaged_params(state: AverageIteratesState) -> Params:
    """The mean of the iterates summed by :func:`average_iterates` (NaN before any update)."""
    return jax.tree_util.tree_map(lambda a: a / state.num_updates, state.total)
