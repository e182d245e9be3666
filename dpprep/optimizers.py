"""Standard optimizers by name, one object per configuration.

The engine applies ``hyper.learning_rate × updates`` of a *unit-rate* optax transformation
(:class:`~dpprep.algorithms.TrainConfig` ``optimizer``). An optax ``GradientTransformation`` is a
pair of functions and compares by identity, and the engine caches its compilations on the config,
so ``optax.adam(1.0)`` built twice gives two configs that do not compare equal and compile twice.
:func:`optimizer` names a standard optax optimizer and returns the same object for the same name
and options, so configs built the same way compare equal and share one compilation:

>>> from dpprep import optimizers
>>> optimizers.optimizer("adam") is optimizers.optimizer("adam", b1=0.9)
True
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import optax


def optimizer(name: str, **options: Any) -> optax.GradientTransformation:
    """The unit-rate optax optimizer ``optax.<name>(learning_rate=1.0, **options)``, cached.

    Args:
      name: an optax optimizer alias that takes a ``learning_rate`` (``"sgd"``, ``"adam"``,
        ``"adamw"``, ``"rmsprop"``, …).
      **options: its other keyword arguments (e.g. ``b1``, ``momentum``); they must be hashable.
        Options equal to optax's defaults give the same object as leaving them out.

    Returns:
      the same ``GradientTransformation`` object for equal ``name`` and options (the learning rate
      is ``hyper.learning_rate`` of the run, applied by the engine).

    Raises:
      ValueError: an unknown name, a ``learning_rate`` option, an option the optimizer does not
        take, or an unhashable option (build that optimizer once and reuse the object instead).
    """
    factory = getattr(optax, name, None) if isinstance(name, str) and not name.startswith("_") else None
    try:
        parameters = inspect.signature(factory).parameters if callable(factory) else {}
    except (TypeError, ValueError):
        parameters = {}
    if factory is None or "learning_rate" not in parameters:
        raise ValueError(f"optimizer name must be an optax optimizer that takes a learning_rate "
                         f"(e.g. 'sgd', 'adam'), got {name!r}")
    if "learning_rate" in options:
        raise ValueError("optimizers are unit-rate: the engine applies hyper.learning_rate; "
                         "do not pass learning_rate")
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        raise ValueError(f"optax.{name} takes no option(s) {unknown}; it takes {sorted(set(parameters) - {'learning_rate'})}")
    # Defaults spelled out: optimizer("adam") and optimizer("adam", b1=0.9) are one object.
    bound = inspect.signature(factory).bind_partial(learning_rate=1.0, **options)
    bound.apply_defaults()
    key = tuple(sorted((k, v) for k, v in bound.arguments.items() if k != "learning_rate"))
    try:
        hash(key)
    except TypeError as err:
        raise ValueError(f"optimizer options must be hashable to be cached ({err}); build the "
                         f"optimizer once and reuse that object instead") from err
    return _build(name, key)


@functools.cache
def _build(name: str, options: tuple[tuple[str, Any], ...]) -> optax.GradientTransformation:
    return getattr(optax, name)(learning_rate=1.0, **dict(options))
