"""Engine extensions: what a learner adds to the core private step without the core knowing it.

The core step (:func:`dpprep.step.dp_step`, scanned by :func:`dpprep.algorithms.train` and vmapped
by :mod:`dpprep.sweeps`) is: clipped per-example gradient sum → Gaussian privatizer → regulariser
→ optimizer → learning rate. A learner that needs more registers an :class:`Extension` on
:class:`~dpprep.algorithms.TrainConfig` ``extensions``. An extension is a frozen, hashable object
(its static options are part of the compilation key) whose hooks all default to doing nothing:

* :attr:`Extension.fields` — traced hyperparameters of its own. Their values live in
  ``Hyper.extra`` (``{name: value}``), are swept by name exactly like the core fields
  (``sweep_points(..., {"feature_shift": ...})``) and are handed to every hook as ``values``;
* :meth:`Extension.check` — host-side checks of those values (before anything is compiled);
* :meth:`Extension.model` — the model as the run sees it (e.g. on transformed features): used
  for the loss metric, the ``"none"`` clipping path and the sweeps' evaluation;
* :meth:`Extension.clipped_grad` — its own clipped gradient sum (e.g. a fast path that lets every
  point of a sweep share one batch);
* :meth:`Extension.privatizer` — its own privatizer (e.g. per-coordinate noise scales);
* :meth:`Extension.wrap` — a wrapper around the whole update transformation (e.g. a projection).

At most one extension of a config may provide :meth:`~Extension.clipped_grad` and one
:meth:`~Extension.privatizer`; :meth:`~Extension.model` and :meth:`~Extension.wrap` compose in the
order the extensions are given. An extension that changes what is released (a privatizer, a
clipped sum) carries the responsibility for the accounting of the runs that use it; the
:class:`~dpprep.plan.ExecutionPlan` accounts the core Gaussian mechanism only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Collection, Mapping, Sequence

import optax

from dpprep.models import Array, Model, Params


@dataclasses.dataclass(frozen=True)
class Field:
    """A traced hyperparameter an extension declares.

    Attributes:
      default: its value when ``Hyper.extra`` does not set it (None: not used).
      pytree: the value is a pytree (e.g. shaped like the params) rather than one array; swept
        values then carry the grid axis on every leaf.
    """

    default: Any = None
    pytree: bool = False


class Extension:
    """Base class of engine extensions (module docstring). Subclasses are frozen dataclasses."""

    #: The traced hyperparameters this extension adds, by name.
    fields: ClassVar[Mapping[str, Field]] = {}

    def check(self, values: Mapping[str, Any], params: Params, *, swept: Collection[str],
              num_features: int | None) -> set[int]:
        """Host-side checks of this extension's ``values`` (``{field: value}``, defaults filled in);
        raise ValueError naming the field. Fields in ``swept`` carry a leading grid axis (every
        grid value must be checked); return the set of those axes' lengths."""
        del values, params, swept, num_features
        return set()

    def model(self, model: Model, values: Mapping[str, Any]) -> Model:
        """The model as this run sees it (default: unchanged)."""
        del values
        return model

    def clipped_grad(self, model: Model, values: Mapping[str, Any], *, l2_clip_norm: Array, method: str
                     ) -> Callable[..., Any] | None:
        """A ``grad_fn(params, (x, y), mask=None) -> ClippedGrad`` replacing the core's
        :func:`dpprep.clipping.model_clipped_grad` of :meth:`model` (None: the core's)."""
        del model, values, l2_clip_norm, method
        return None

    def privatizer(self, values: Mapping[str, Any], **options: Any) -> optax.GradientTransformation | None:
        """A privatizer replacing :func:`dpprep.noise.gaussian_privatizer` ``(**options)`` (None: the
        core's). ``options`` are the core privatizer's: ``key``, ``l2_clip_norm``,
        ``noise_multiplier``, ``stddev`` and ``normalize_by``."""
        del values, options
        return None

    def wrap(self, tx: optax.GradientTransformation, values: Mapping[str, Any]) -> optax.GradientTransformation:
        """The update transformation with this extension around it (default: unchanged)."""
        del values
        return tx


def field_specs(extensions: Sequence[Extension], reserved: Collection[str] = ()) -> dict[str, tuple[Extension, Field]]:
    """``{field name: (extension, Field)}`` of ``extensions``; ValueError when two extensions (or an
    extension and a core field in ``reserved``) declare the same name, or an entry is no Extension."""
    out: dict[str, tuple[Extension, Field]] = {}
    for ext in extensions:
        if not isinstance(ext, Extension):
            raise ValueError(f"extensions must be dpprep.extensions.Extension objects, got {type(ext).__name__}")
        for name, spec in ext.fields.items():
            if name in out or name in reserved:
                raise ValueError(f"field {name!r} is declared twice (by {type(ext).__name__} and "
                                 f"{type(out[name][0]).__name__ if name in out else 'the core Hyper'})")
            out[name] = (ext, spec)
    return out


def values_for(extension: Extension, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The extension's field values: ``extra``'s, defaults for the rest."""
    extra = extra or {}
    return {name: extra.get(name, spec.default) for name, spec in extension.fields.items()}


def the_one(extensions: Sequence[Extension], hook: str, call: Callable[[Extension], Any]) -> Any:
    """``call(ext)`` for the one extension whose ``hook`` gives a result (not None), or None; more
    than one is an error (which of two clipped sums or privatizers would be meant?)."""
    found = [(ext, out) for ext in extensions if (out := call(ext)) is not None]
    if len(found) > 1:
        raise ValueError(f"more than one extension provides {hook}: {[type(e).__name__ for e, _ in found]}")
    return found[0][1] if found else None
