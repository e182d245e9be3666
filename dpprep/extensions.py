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
order the extensions are given.

**Privacy.** The :class:`~dpprep.plan.DPPlan` accounts the core Gaussian mechanism: every
example's clipped contribution at most ``C``, noise std ``z·C`` on every coordinate. An extension
whose fields change the noise declares them (``Field(privacy=True)``) and says, through
:meth:`Extension.noise_factor`, the smallest factor it applies to the plan's noise std on any
coordinate: the run is then accounted at ``z·factor`` (a sweep reports each point's ε so; a single
run and a private selection refuse a factor below 1, which their plan does not charge), and a
factor of 0 — noise taken away somewhere — is refused in every private plan. An extension with
privacy fields that does not override :meth:`~Extension.noise_factor` is refused in private plans.

The hooks that replace part of the mechanism — :meth:`~Extension.clipped_grad`,
:meth:`~Extension.privatizer`, :meth:`~Extension.wrap` — are not covered by the plan's guarantee,
which rests on what each must keep (:data:`HOOK_REQUIREMENTS`): a clipped sum keeps every
example's contribution at most ``C``; a privatizer adds the plan's noise times
:meth:`noise_factor` (at least) on every coordinate, once per step; a wrapper only post-processes
the privatized update (it does not call the inner transformation more than once per step).
dpprep cannot check that of an arbitrary hook, so an override is refused in a private plan
before anything compiles — unless its extension declares it in :attr:`Extension.vouches`. A
declaration is the author's word, not a proof: every guarantee the drivers report
(``train``'s and ``fit``'s, the sweeps', a private selection's) then says that it rests on an
unverified extension and which hooks (:func:`reliance`). dpprep's own extensions that vouch
(:class:`dpprep.features.AffineFeatures`, :class:`dpprep.optimizers.L2BallProjection`,
:class:`dpprep.corrdp.sgd.CoordinateNoise`) are verified by dpprep's tests and marked
``verified_by_dpprep``, a mark a subclass does not inherit (:func:`verified`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Collection, Mapping, Sequence, TypeVar

import optax

from dpprep.models import Array, Model, Params

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class Field:
    """A traced hyperparameter an extension declares.

    Attributes:
      default: its value when ``Hyper.extra`` does not set it (None: not used).
      pytree: the value is a pytree (e.g. shaped like the params) rather than one array; swept
        values then carry the grid axis on every leaf.
      privacy: the value changes the noise (or anything else the guarantee rests on); its
        extension's :meth:`Extension.noise_factor` says how the plan's account covers it.
    """

    default: Any = None
    pytree: bool = False
    privacy: bool = False


class Extension:
    """Base class of engine extensions (module docstring). Subclasses are frozen dataclasses."""

    #: The traced hyperparameters this extension adds, by name.
    fields: ClassVar[Mapping[str, Field]] = {}
    #: Earlier names of those fields (``{old: new}``): accepted in points, grids and
    #: ``Hyper.extra`` with a :class:`~dpprep.renames.RenamedWarning`.
    renamed_fields: ClassVar[Mapping[str, str]] = {}
    #: The mechanism hooks it overrides and vouches keep the plan's guarantee (module docstring):
    #: its author's word, which every reported guarantee then names.
    vouches: ClassVar[tuple[str, ...]] = ()
    #: Set (to True) only by dpprep's own extensions whose vouched hooks dpprep's tests verify;
    #: read from the class itself (:func:`verified`), so a subclass does not inherit it.
    verified_by_dpprep: ClassVar[bool] = False

    def check(
        self,
        values: Mapping[str, Any],
        params: Params,
        *,
        swept: Collection[str],
        num_features: int | None,
    ) -> set[int]:
        """Host-side checks of this extension's ``values`` (``{field: value}``, defaults filled in);
        raise ValueError naming the field. Fields in ``swept`` carry a leading grid axis (every
        grid value must be checked); return the set of those axes' lengths."""
        del values, params, swept, num_features
        return set()

    def noise_factor(self, values: Mapping[str, Any]) -> float:
        """The smallest factor this extension applies to the plan's noise std on any coordinate,
        for one point's concrete ``values`` (host-side; 1: the noise is the plan's). The run is
        accounted at ``z·factor``; 0 means some coordinate is released without noise. The default
        is 1 for an extension without privacy fields and a refusal otherwise (override it)."""
        del values
        if any(spec.privacy for spec in self.fields.values()):
            raise ValueError(
                f"{type(self).__name__} declares privacy fields but not how a plan's account covers"
                " them (noise_factor): it cannot run in a private plan"
            )
        return 1.0

    def fixed_events(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """dp-accounting events of private statistics this extension's values of one point were
        computed from (released once, before training; e.g. a private feature mean used as a
        shift): a point's account composes them with the run (default: none)."""
        del values
        return ()

    def model(self, model: Model, values: Mapping[str, Any]) -> Model:
        """The model as this run sees it (default: unchanged)."""
        del values
        return model

    def clipped_grad(
        self, model: Model, values: Mapping[str, Any], *, l2_clip_norm: Array, method: str
    ) -> Callable[..., Any] | None:
        """A ``grad_fn(params, (x, y), mask=None) -> ClippedGrad`` replacing the core's
        :func:`dpprep.clipping.clipped_grad` of :meth:`model` (None: the core's)."""
        del model, values, l2_clip_norm, method
        return None

    def privatizer(
        self, values: Mapping[str, Any], **options: Any
    ) -> optax.GradientTransformation | None:
        """A privatizer replacing the core's (None: the core's). ``options`` are the core
        privatizer's: ``key``, ``l2_clip_norm``, ``noise_multiplier`` and ``normalize_by``; its
        noise
        must be what :meth:`noise_factor` says (:func:`dpprep.noise.privatizer` with scales)."""
        del values, options
        return None

    def wrap(
        self, tx: optax.GradientTransformation, values: Mapping[str, Any]
    ) -> optax.GradientTransformation:
        """The update transformation with this extension around it (default: unchanged)."""
        del values
        return tx


def field_specs(
    extensions: Sequence[Extension], reserved: Collection[str] = ()
) -> dict[str, tuple[Extension, Field]]:
    """``{field name: (extension, Field)}`` of ``extensions``; ValueError when two extensions (or an
    extension and a core field in ``reserved``) declare the same name, or an entry is no Extension.
    """
    out: dict[str, tuple[Extension, Field]] = {}
    for ext in extensions:
        if not isinstance(ext, Extension):
            raise TypeError(
                f"extensions must be dpprep.extensions.Extension objects, got {type(ext).__name__}"
            )
        params = getattr(type(ext), "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(
                f"extension {type(ext).__name__} must be a frozen dataclass "
                "(@dataclasses.dataclass(frozen=True)): its options are part of the compilation key"
            )
        for name, spec in ext.fields.items():
            if name in out or name in reserved:
                raise ValueError(
                    f"field {name!r} is declared twice (by {type(ext).__name__} and "
                    f"{type(out[name][0]).__name__ if name in out else 'the core Hyper'})"
                )
            out[name] = (ext, spec)
    return out


def per_point(
    extension: Extension, values: Mapping[str, Any], swept: Collection[str]
) -> list[Mapping[str, Any]]:
    """The extension's values of each point (one mapping when nothing of it is swept): fields in
    ``swept`` carry the grid axis (every leaf of a pytree field)."""
    import jax
    import numpy as np

    if not swept:
        return [values]
    count = {
        int(np.shape(leaf)[0]) for name in swept for leaf in jax.tree_util.tree_leaves(values[name])
    }
    size = count.pop() if len(count) == 1 else 0
    return [
        {
            name: (
                jax.tree_util.tree_map(lambda v, i=i: np.asarray(v)[i], value)
                if name in swept
                else value
            )
            for name, value in values.items()
        }
        for i in range(size)
    ]


#: The hooks that replace part of the private mechanism.
MECHANISM_HOOKS = ("clipped_grad", "privatizer", "wrap")

#: What the plan's guarantee needs of each mechanism hook an extension overrides.
HOOK_REQUIREMENTS = {
    "clipped_grad": "a clipped sum must keep every example's contribution at most C (float32"
    " rounding included) and count no padded slot",
    "privatizer": "a privatizer must add Gaussian noise of std at least z·C·noise_factor on every"
    " coordinate of the sum, freshly drawn, once per step",
    "wrap": "a wrapper must only post-process the privatized update (call the inner"
    " transformation once per step and read no data)",
}


def _overridden(extension: Extension) -> list[str]:
    return [
        hook
        for hook in MECHANISM_HOOKS
        if getattr(type(extension), hook) is not getattr(Extension, hook)
    ]


def unvouched_hooks(extension: Extension) -> list[str]:
    """The mechanism hooks ``extension`` overrides without vouching for them (refused in private
    plans)."""
    return [hook for hook in _overridden(extension) if hook not in extension.vouches]


def vouched_hooks(extension: Extension) -> list[str]:
    """The mechanism hooks ``extension`` overrides and vouches for (its author's word)."""
    return [hook for hook in _overridden(extension) if hook in extension.vouches]


def verified(extension: Extension) -> bool:
    """Whether dpprep's tests verify ``extension``'s vouched hooks: its own class (not a base) is
    one of dpprep's and says ``verified_by_dpprep = True``. A user's subclass of a verified
    extension is not verified (it may change what the hooks do)."""
    cls = type(extension)
    return cls.__dict__.get("verified_by_dpprep") is True and cls.__module__.startswith("dpprep.")


def reliance(extensions: Sequence[Extension]) -> list[str]:
    """What a private run's guarantee rests on besides dpprep's checks: one line per extension
    that vouches for a mechanism hook it overrides and that dpprep does not verify, e.g.
    ``"rests on an unverified extension: MyNoise vouches for privatizer"``."""
    return [
        f"rests on an unverified extension: {type(ext).__name__} vouches for {', '.join(hooks)}"
        for ext in extensions
        if (hooks := vouched_hooks(ext)) and not verified(ext)
    ]


def refusal(extension: Extension, hooks: Sequence[str]) -> str:
    """The message refusing ``extension``'s unvouched ``hooks`` in a private plan: what each must
    keep, and that a declaration of it would be its author's word, not dpprep's check."""
    needs = "; ".join(HOOK_REQUIREMENTS[hook] for hook in hooks)
    return (
        f"extension {type(extension).__name__} replaces {list(hooks)} of the private mechanism,"
        f" which the plan's guarantee does not cover: {needs}. dpprep cannot check that of this"
        " code, so it does not run in a private plan. Use the core's mechanism (drop the"
        " override), or run it in a non-private plan (DPPlan.non_private) that claims nothing."
        " (An extension whose author declares the hooks in Extension.vouches does run, but its"
        " guarantee then rests on that author's word, and every report says so.)"
    )


def values_for(extension: Extension, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The extension's field values: ``extra``'s, defaults for the rest."""
    extra = extra or {}
    return {name: extra.get(name, spec.default) for name, spec in extension.fields.items()}


def the_one(
    extensions: Sequence[Extension], hook: str, call: Callable[[Extension], _T | None]
) -> _T | None:
    """``call(ext)`` for the one extension whose ``hook`` gives a result (not None), or None; more
    than one is an error (which of two clipped sums or privatizers would be meant?)."""
    found = [(ext, out) for ext in extensions if (out := call(ext)) is not None]
    if len(found) > 1:
        raise ValueError(
            f"more than one extension provides {hook}: {[type(e).__name__ for e, _ in found]}"
        )
    return found[0][1] if found else None
