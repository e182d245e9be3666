"""Private (and non-private) gradient learners as one pure, jit-once engine of steps.

``train(config, params0, (x, y), key) -> (params, metrics)`` runs (``x``: an array with a leading
example axis, or a dict of them; :func:`check_inputs`), per step ``t``:

1. select a batch (the plan's sampler, see :mod:`dpprep.sampling`):

   - ``"full"``: every example: DP-GD (Hu et al. §2 ``A_GD``; with
     :class:`dpprep.optimizers.L2BallProjection` and ``iterates="average"`` exactly their
     projected, averaged DP-GD);
   - ``"poisson"``: each example independently with rate ``q = batch_size/n``: DP-SGD (Abadi et
     al.) as the PLD/RDP accountants analyse it; ``batch_size=1`` is Hu et al.'s
     ``A_SGD-samp`` regime under Poisson sampling;
   - ``"replacement"``: ``batch_size`` indices uniform with replacement (Sun et al.'s
     Algorithm 1; Hu et al.'s analysed ``A_SGD-samp`` is ``batch_size=1``);
   - ``"shuffle"``: a fresh permutation per epoch cut into ``⌈n/B⌉`` batches of size ``B``, the
     last one padded (and still divided by ``B``) when ``B`` does not divide ``n`` (common DP-SGD
     practice and non-private SGD; Poisson amplification does not apply to it);
   - ``"without_replacement"``: ``B`` distinct records drawn afresh each step (replace-one);
   - ``"fixed_order"``: record ``t`` at step ``t`` (Hu et al.'s DP-FGD when ``steps`` is given;
     DP-SGD by iteration when ``steps`` is None: stop at ``T ~ Unif{1..n−κ+1}``). Their
     amplification-by-iteration analysis (contractive noisy iteration) assumes plain projected
     SGD with contractive steps: a convex, L-Lipschitz, β-smooth loss (β including the
     regulariser), learning rate ``η ≤ 2/β`` and no binding clipping (``C ≥ L``); momentum, Adam
     or any other stateful ``config.optimizer`` voids it, as does ``η > 2/β``, so the plan takes
     ``smoothness=β`` and the drivers and the plan's own pieces refuse both
     (:meth:`~dpprep.plan.DPPlan.optimizer` builds plain SGD at a checked ``learning_rate``
     for such a plan, and its privatizer zeroes the updates after the random stop);
2. sum the clipped per-example gradients (:mod:`dpprep.clipping`; no clipping only in a
   non-private plan without a clip bound);
3. add Gaussian noise to the sum (:mod:`dpprep.noise` for the std convention) and divide by the
   fixed normaliser ``N``: the *expected* batch size ``q·n = batch_size`` (poisson),
   ``batch_size`` (replacement, shuffle), ``n`` (full), 1 (fixed_order); then add the gradient of
   the model's (data-independent) regulariser;
4. update with an optax transformation scaled by the learning rate.

Steps 2–4 are :func:`dpprep.step.apply_step` (what :func:`dpprep.step.dp_step` checks and runs):
the clipped sum comes from :func:`dpprep.clipping.clipped_grad` of the model (its loss, or the GLM
fast path), and :func:`update_transform` is the optax chain that privatizes and applies it (the
plan's Gaussian privatizer, regulariser, optimizer, learning rate); the
scan adds the sampler, the random stop and (``iterates``) the iterate average
(:func:`dpprep.optimizers.average_iterates`).

**Compiled calls.** :func:`make_train_fn` (and :func:`engine_fn`) is the whole run as one
``lax.scan``. :func:`train` and :mod:`dpprep.sweeps` cut a run whose step convolves into a host
loop over compiled calls of a few straight-line steps (``TrainConfig.steps_per_call``;
:func:`steps_per_call`): XLA:CPU compiles convolutions inside a loop body with slower layouts, so
a scanned CNN step is much slower than the same step jitted alone; cut, it runs as fast as a Python
loop over its jitted step.
The run is the same — its batches, noise, iterates and metrics — whichever way it is cut.

**Extensions.** ``config.extensions`` (:mod:`dpprep.extensions`) extend the step without the engine
knowing them: traced hyperparameters of their own (in ``Hyper.extra``, swept by name), a view of
the model, their own clipped sum or privatizer, a wrapper around the update. E.g.
:class:`dpprep.features.AffineFeatures` (train on per-point transformed features sharing one
batch) and :class:`dpprep.optimizers.L2BallProjection` (projected updates); the papers' modules
add theirs (e.g. :class:`dpprep.corrdp.sgd.CoordinateNoise`).
Non-private training is the same code under :meth:`dpprep.plan.DPPlan.non_private`, requested
explicitly (its results say "no DP guarantee"). Randomness comes from named streams of the run's key
(:mod:`dpprep.streams`: ``"batch"``,
``"noise"``, ``"stop"``), so runs with the same key and sampler share their batches.

**Only the returned parameters are the private output.** ``metrics`` are diagnostics computed
from the data and the secret randomness without noise: ``loss`` and ``clip_fraction`` (opt-in,
``track_loss`` / ``track_clip_fraction``) and ``nonfinite`` (the examples whose gradient was not
finite, skipped) are plain functions of the batch, ``batch_size`` and
``overflow`` expose the Poisson draws whose secrecy amplification relies on, ``params`` are the
intermediate iterates (hidden in the amplification-by-iteration and averaged-iterate analyses) and
``stopping_time`` is the random stop those analyses average over. None of them may be released as
part of the DP output.

**The plan owns the guarantee.** Everything a run's privacy rests on — the sampler, ``n``, the
batch size, the steps, the clip bound ``C``, the noise multiplier ``z``, the normaliser, δ — is
stated once, in the :class:`~dpprep.plan.DPPlan` of :class:`TrainConfig` ``plan``; :func:`train`
runs exactly that plan on data of exactly ``plan.n`` rows and reports the ε it spent
(``metrics["epsilon"]``). Static choices (model, optimizer, iterates, extensions) live in the frozen
:class:`TrainConfig`; the values that can be swept (learning rate, extensions' fields) live in
:class:`Hyper`, a pytree whose leaves are traced, so :mod:`dpprep.sweeps` can ``vmap`` over seeds
and any set of points (learning rates, noise levels and clip bounds — each point accounted by the
plan —, noise scales, feature transforms) in one compiled call.

**Optimizer convention.** ``config.optimizer`` gives the update *direction* at unit learning
rate (default ``optax.sgd(1.0)``); the applied update is ``hyper.learning_rate × updates``. Build
optimizers with ``learning_rate=1.0`` (e.g. ``optax.adam(1.0)``, or
:func:`dpprep.optimizers.optimizer` ``("adam")``, which also returns one object per configuration
so that equal configs share a compilation): for optax's SGD, momentum, Adam and AdamW the learning
rate is a final multiplicative factor, so this is exactly the optimizer at ``learning_rate`` while
keeping the rate traceable.

**Privacy.** ``config.plan`` is read by both the scan and the accountant: its ε accounts exactly
the steps :func:`train` takes (Poisson overflow slack included); :func:`fit` is the one-call entry
(ask for ``(ε, δ)``, get the trained model and the ε spent).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import warnings
from typing import Any, Callable, Collection, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike, DTypeLike

from dpprep import clipping, optimizers, sampling, streams
from dpprep import extensions as ext_lib
from dpprep import noise as noise_lib
from dpprep.extensions import Extension, Field
from dpprep.models import Array, Inputs, Model, Params, PyTree, check_targets
from dpprep.plan import (
    DPPlan,
    ExecutionPlan,
    PrivateTransformation,
    check_iteration_learning_rate,
    refuse_iteration_optimizer,
)
from dpprep.renames import rename_keys
from dpprep.step import apply_step
from dpprep.validation import (
    check_finite_array,
    check_finite_values,
    check_float_params,
    check_key,
)

# The engine's traced scalar fields: the learning rate (Hyper's) and the noise multiplier and clip
# bound (the plan's; a sweep may vary them point by point, each point accounted).
SCALAR_FIELDS = ("learning_rate", "noise_multiplier", "l2_clip_norm")
#: Earlier names of the core's traced fields (``{old: new}``), accepted with a warning.
CORE_RENAMES = {"clip_norm": "l2_clip_norm"}
ITERATES = ("last", "average", "both")
PRECISIONS = (None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Hyper:
    """The values of a run that may be traced (and so vmapped over by sweeps) besides the plan's.

    Attributes:
      learning_rate: step size (multiplies the optimizer's unit-rate update).
      extra: ``{field: value}`` for the traced fields of ``config.extensions``
        (:mod:`dpprep.extensions`; e.g. ``{"feature_shift": mu}`` with
        :class:`dpprep.features.AffineFeatures`); None: their defaults.

    The clip bound and the noise are the plan's (:class:`~dpprep.plan.DPPlan`), stated there once.
    """

    learning_rate: ArrayLike
    extra: dict[str, Any] | None = dataclasses.field(default=None, kw_only=True)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Traced:
    """What the engine traces for one run: :class:`Hyper`'s values and the plan's ``z`` and ``C``
    (a sweep point may set any of them; the drivers build it, checked against the plan)."""

    learning_rate: ArrayLike
    noise_multiplier: ArrayLike
    l2_clip_norm: ArrayLike
    extra: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static description of a run (hashable; one compilation per config, plan layout and data
    shape).

    Attributes:
      model: the :class:`~dpprep.models.Model`. Compilations are cached on the config (with the
        plan's layout and the swept names): models from :mod:`dpprep.models`' factories and
        optimizers from :func:`dpprep.optimizers.optimizer` compare by what they are (name and
        arguments), so equal configs share a compilation; a model or optax transformation built
        by hand (e.g. :mod:`dpprep.frameworks`, ``optax.adam(1.0)``) is reused only as the same
        object.
      hyper: the traced values (learning rate, extensions' fields).
      plan: the :class:`~dpprep.plan.DPPlan` of the run: sampler, ``n``, batch size, steps, clip
        bound, noise, δ and ε, stated there once (:meth:`~dpprep.plan.DPPlan.create`, or
        :meth:`~dpprep.plan.DPPlan.non_private` for a run that claims no guarantee).
      optimizer: unit-learning-rate optax transformation (default ``optax.sgd(1.0)``), e.g.
        ``dpprep.optimizers.optimizer("adam")``, or a name :func:`dpprep.optimizers.optimizer`
        accepts (``"adam"``), which becomes that optimizer.
      iterates: "last" (``θ_T``), "average" (mean of ``θ_1..θ_T``) or "both" (a dict
        ``{"last": …, "average": …}`` from the same run).
      clip_method: "auto", "fast", "taps", "vmap" or "none" (:func:`dpprep.clipping.clipped_grad`;
        "none": the plain gradient of the batch loss, for unclipped non-private plans only).
      microbatch_size: per-example gradients ``m`` at a time (:func:`dpprep.clipping.clipped_grad`):
        memory for ``m`` of them instead of the batch's, and Poisson's padding-only microbatches
        skipped in ``train`` (not under a sweep's ``vmap``, where JAX runs both branches). None:
        the whole batch at once. The GLM fast path holds no per-example gradients and ignores it.
      track_loss: record the (masked) batch loss per step (one extra forward pass).
      track_clip_fraction: record the share of the batch's real examples whose gradient norm
        exceeded ``C``. Like every metric it is not private (module docstring).
      track_params: record every iterate ``θ_t`` (memory ``T × |θ|``; for tests and analysis).
      matmul_precision: JAX matmul precision of the model's products inside the run (None:
        JAX's default, which on GPUs is TF32 for float32; "float32"/"highest" for final numbers).
        The clipped sum runs at full precision whatever this says
        (:data:`dpprep.clipping.CLIPPED_SUM_PRECISION`).
      steps_per_call: how :func:`train` and the sweeps cut the run into compiled calls
        (:func:`steps_per_call`): None, the whole run in one ``lax.scan``; ``k``, a host loop over
        calls of ``k`` straight-line steps; "auto" (default), 2 for a model that convolves, else
        None. The run is the same (its batches, noise and updates); only its speed differs.
      extensions: :class:`~dpprep.extensions.Extension` objects extending the step (module
        docstring); their traced fields are set in ``hyper.extra`` and swept by name.
    """

    model: Model
    hyper: Hyper | None = None
    plan: DPPlan | None = None
    optimizer: optax.GradientTransformation | None = None
    iterates: str = "last"
    clip_method: str = "auto"
    microbatch_size: int | None = None
    track_loss: bool = False
    track_clip_fraction: bool = False
    track_params: bool = False
    matmul_precision: str | None = None
    steps_per_call: int | str | None = "auto"
    extensions: tuple[Extension, ...] = ()

    def __post_init__(self) -> None:
        # every route (train, fit, the sweeps, select) builds a config: a name becomes its
        # optimizer here, and a wrong type fails here rather than as an AttributeError in the scan
        if isinstance(self.optimizer, PrivateTransformation):
            raise ValueError(
                "config.optimizer is a plan's optimizer (plan.optimizer(...)), which holds the"
                " plan's privatizer: the run adds the plan's noise itself, so it would be added"
                " twice and its releases counted twice; give the optax optimizer it wraps"
            )
        object.__setattr__(self, "optimizer", optimizers.as_optimizer(self.optimizer))


def sweepable_fields(config: TrainConfig) -> tuple[str, ...]:
    """The names a sweep may vary for ``config``: the core's traced fields, then its extensions'."""
    return SCALAR_FIELDS + tuple(ext_lib.field_specs(config.extensions, SCALAR_FIELDS))


def field_renames(extensions: Collection[Extension] = ()) -> dict[str, str]:
    """Earlier names of the traced fields of the core and of ``extensions`` (``{old: new}``)."""
    renames = dict(CORE_RENAMES)
    for ext in extensions:
        renames.update(getattr(type(ext), "renamed_fields", {}))
    return renames


def current_names(
    values: Mapping[str, Any], extensions: Collection[Extension] = (), where: str = ""
) -> dict[str, Any]:
    """``values`` (``{field: value}``) under the fields' current names: an earlier name (e.g.
    ``clip_norm`` for ``l2_clip_norm``) is renamed with a :class:`~dpprep.renames.RenamedWarning`,
    and a value under both names is a TypeError."""
    return rename_keys(values, field_renames(extensions), where, stacklevel=3)


def with_values(traced: Traced, values: Mapping[str, Any]) -> Traced:
    """``traced`` with ``values`` (``{field: value}``) set: core fields directly, extension fields
    in ``extra`` (any name that is not a core field)."""
    core = {name: value for name, value in values.items() if name in SCALAR_FIELDS}
    extra = {name: value for name, value in values.items() if name not in SCALAR_FIELDS}
    if extra:
        core["extra"] = {**(traced.extra or {}), **extra}
    return dataclasses.replace(traced, **core)


def traced(config: TrainConfig) -> Traced:
    """The engine's values of ``config``'s run: its hyper's, and its plan's ``z`` and ``C``."""
    plan, hyper = checked_plan(config), config.hyper
    if hyper is None:
        raise ValueError("config.hyper is required (Hyper(learning_rate))")
    if not isinstance(hyper, Hyper):
        raise TypeError(f"config.hyper must be a Hyper, got {type(hyper).__name__}")
    extra = hyper.extra
    if isinstance(extra, Mapping):
        extra = current_names(extra, config.extensions, "hyper.extra: ")
    return Traced(hyper.learning_rate, plan.noise_multiplier, plan.l2_clip_norm, extra)


def checked_plan(config: TrainConfig, n: int | None = None) -> DPPlan:
    """``config.plan`` after the checks of the config against it (before anything is compiled):
    a :class:`~dpprep.plan.DPPlan` is given, the data has ``plan.n`` rows (when ``n`` is given),
    the clipping method fits the plan, and DP-SGD by iteration runs only what its proof covers."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    plan = config.plan
    if plan is None:
        raise ValueError(
            "config.plan is required: the DPPlan that states the run's sampler, steps, clip bound"
            " and noise (DPPlan.create(..., target_epsilon=..., delta=...)), or"
            " DPPlan.non_private(...) for a run that claims no DP guarantee"
        )
    if not isinstance(plan, DPPlan):
        raise TypeError(f"config.plan must be a DPPlan, got {type(plan).__name__}")
    clipping.check_method(config.clip_method, "clip_method")
    if clipping.check_microbatch_size(config.microbatch_size) is not None:
        own = [
            type(ext).__name__
            for ext in config.extensions
            if type(ext).clipped_grad is not Extension.clipped_grad
        ]
        if own:
            raise ValueError(
                f"microbatch_size is for the core's clipped sum; extension {own[0]} computes its"
                " own (its batch at once): drop one of them"
            )
    if config.iterates not in ITERATES:
        raise ValueError(f"iterates must be one of {ITERATES}, got {config.iterates!r}")
    per_call = config.steps_per_call
    if per_call is not None and not (
        per_call == "auto"
        if isinstance(per_call, str)
        else isinstance(per_call, int) and not isinstance(per_call, bool) and per_call >= 1
    ):
        raise ValueError(
            f"steps_per_call must be 'auto', None or an integer >= 1, got {per_call!r}"
        )
    if config.matmul_precision not in PRECISIONS:
        raise ValueError(
            f"matmul_precision must be one of {PRECISIONS}, got {config.matmul_precision!r}"
        )
    if not isinstance(config.extensions, tuple):
        raise TypeError(
            "extensions must be a tuple of Extension objects, got"
            f" {type(config.extensions).__name__}"
        )
    ext_lib.field_specs(config.extensions, SCALAR_FIELDS)
    if n is not None and n != plan.n:
        raise ValueError(
            f"the data has {n} rows but the plan was made for n={plan.n}: its sampler, normaliser"
            f" and epsilon are those of n={plan.n} (make the plan with the data's size)"
        )
    if plan.private:
        for ext in config.extensions:
            unvouched = ext_lib.unvouched_hooks(ext)
            if unvouched:
                raise ValueError(ext_lib.refusal(ext, unvouched))
    if config.clip_method == "none" and math.isfinite(plan.l2_clip_norm):
        raise ValueError(
            "clip_method='none' computes no per-example gradients: it is for unclipped non-private "
            f"plans, this plan clips to {plan.l2_clip_norm!r}"
        )
    if plan.execution.random_stop:
        _check_iteration_run(config, plan)
    return plan


def guarantee(plan: DPPlan, extensions: Collection[Extension] = ()) -> str:
    """The one line every driver reports: :meth:`~dpprep.plan.DPPlan.describe`, and, for a
    private plan, what the guarantee rests on besides dpprep's checks — each extension that
    vouches for a mechanism hook dpprep does not verify
    (:func:`dpprep.extensions.reliance`: "rests on an unverified extension: … vouches for …")."""
    text = plan.describe()
    if not plan.private:
        return text
    return "; ".join([text, *ext_lib.reliance(tuple(extensions))])


def _check_iteration_run(config: TrainConfig, plan: DPPlan) -> None:
    """Amplification by iteration (Feldman et al. 2018) covers plain projected SGD with contractive
    steps: no optimizer state, the last iterate only, ``η ≤ 2/β`` (checked per learning rate by
    :func:`check_hyper`), no privatizer of an extension's own."""
    if config.optimizer is not None and config.optimizer != optimizers.optimizer("sgd"):
        refuse_iteration_optimizer(
            "config.optimizer="
            + (
                repr(config.optimizer)
                if isinstance(config.optimizer, optimizers.NamedOptimizer)
                else type(config.optimizer).__name__
            ),
            "leave config.optimizer None: plain SGD at hyper.learning_rate, checked ≤ 2/β",
        )
    if config.iterates != "last":
        raise ValueError(
            "DP-SGD by iteration hides the intermediate iterates: it releases the last one only "
            f"(iterates='last'), got {config.iterates!r}"
        )
    for ext in config.extensions:
        if (
            type(ext).privatizer is not Extension.privatizer
            or type(ext).clipped_grad is not Extension.clipped_grad
        ):
            raise ValueError(
                f"DP-SGD by iteration: extension {type(ext).__name__} replaces the clipped sum or"
                " the privatizer, which amplification by iteration does not cover"
            )


def add_gradient_of(penalty: Callable[[Params], Array]) -> optax.GradientTransformation:
    """Adds ``∇penalty(params)`` to the updates: a data-independent regulariser enters the
    objective after the noise, since it carries no information about any example."""

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("add_gradient_of needs the params (pass them to tx.update)")
        return jax.tree_util.tree_map(jnp.add, updates, jax.grad(penalty)(params)), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def update_transform(
    config: TrainConfig, plan: ExecutionPlan, values: Traced, noise_key: Array
) -> optax.GradientTransformation:
    """The optax chain a run applies to each step's clipped gradient sum: the privatizer (the
    Gaussian noise and the plan's normaliser, or an extension's), the model's regulariser, the
    unit-rate optimizer and the learning rate; then the extensions' wrappers and, for
    ``iterates != "last"``, :func:`dpprep.optimizers.average_iterates` around it all."""
    exts = config.extensions
    options = dict(
        key=noise_key,
        l2_clip_norm=jnp.asarray(values.l2_clip_norm, jnp.float32),
        noise_multiplier=values.noise_multiplier,
        normalize_by=plan.normalize_by,
    )
    privatizer = ext_lib.the_one(
        exts,
        "privatizer",
        lambda ext: ext.privatizer(ext_lib.values_for(ext, values.extra), **options),
    )
    links = [
        (
            privatizer
            if privatizer is not None
            else noise_lib.privatizer(
                noise_key, options["l2_clip_norm"], values.noise_multiplier, None, plan.normalize_by
            )
        )
    ]
    if config.model.regularizer is not None:
        links.append(add_gradient_of(config.model.regularizer))
    links += [
        config.optimizer if config.optimizer is not None else optax.sgd(1.0),
        optax.scale(jnp.asarray(values.learning_rate, jnp.float32)),
    ]
    tx = optax.chain(*links)
    for ext in exts:
        tx = ext.wrap(tx, ext_lib.values_for(ext, values.extra))
    return tx if config.iterates == "last" else optimizers.average_iterates(tx)


def run_model(config: TrainConfig, values: Traced) -> Model:
    """The model as the run sees it: ``config.model`` through its extensions' views (e.g. on
    transformed features); what the loss metric and the sweeps' evaluation use."""
    model = config.model
    for ext in config.extensions:
        model = ext.model(model, ext_lib.values_for(ext, values.extra))
    return model


class _Invariants(NamedTuple):
    """What every step of a run reads and none changes: the sampler's prepared draws (e.g. the
    shuffled permutations) and the random stop."""

    prepared: Any
    stop: Array


def _with_precision(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(config, ...)`` under ``config.matmul_precision`` (a context of the trace)."""

    @functools.wraps(fn)
    def wrapped(config: TrainConfig, *args: Any, **kwargs: Any) -> Any:
        if config.matmul_precision is None:
            return fn(config, *args, **kwargs)
        with jax.default_matmul_precision(config.matmul_precision):
            return fn(dataclasses.replace(config, matmul_precision=None), *args, **kwargs)

    return wrapped


@_with_precision
def _begin(
    config: TrainConfig, plan: ExecutionPlan, values: Traced, params0: Params, key: Array
) -> tuple[tuple[Params, optax.OptState], _Invariants]:
    """A run's start: the carry ``(params0, optimizer state)`` and its :class:`_Invariants`."""
    tx = update_transform(config, plan, values, streams.stream(key, streams.NOISE))
    prepared = plan.impl.prepare(streams.stream(key, streams.BATCH), plan)
    stop = (
        sampling.stopping_time(streams.stream(key, streams.STOP), plan.n, plan.kappa)
        if plan.random_stop
        else jnp.int32(plan.steps)
    )
    return (params0, tx.init(params0)), _Invariants(prepared, stop)


@_with_precision
def _advance(
    config: TrainConfig,
    plan: ExecutionPlan,
    values: Traced,
    x: Inputs,
    y: Array,
    key: Array,
    carry: tuple[Params, optax.OptState],
    invariants: _Invariants,
    t0: ArrayLike,
    count: int,
    unroll: bool,
) -> tuple[tuple[Params, optax.OptState], dict[str, Array]]:
    """Steps ``t0 .. t0 + count − 1`` of the run from ``carry``: the new carry and the steps'
    metrics (leading axis ``count``); one ``lax.scan``, fully unrolled when ``unroll``."""
    sampler = plan.impl
    model = run_model(config, values)
    k_batch, k_model = streams.stream(key, streams.BATCH), streams.stream(key, streams.MODEL)
    clip = jnp.asarray(values.l2_clip_norm, jnp.float32)
    grad_fn = ext_lib.the_one(
        config.extensions,
        "clipped_grad",
        lambda ext: ext.clipped_grad(
            config.model,
            ext_lib.values_for(ext, values.extra),
            l2_clip_norm=clip,
            method=config.clip_method,
        ),
    )
    if grad_fn is None:
        grad_fn = clipping.clipped_grad(
            model,
            l2_clip_norm=clip,
            method=config.clip_method,
            microbatch_size=config.microbatch_size,
        )
    tx = update_transform(config, plan, values, streams.stream(key, streams.NOISE))

    def step(carry, t):
        params, opt_state = carry
        idx, mask, size, overflow = sampler.select(k_batch, plan, t, invariants.prepared)
        xb, yb = sampling.gather((x, y), idx, mask)  # padded slots zeros: no record
        step_grad_fn = grad_fn
        if config.model.stochastic:  # this step's key, split per example by the clipping
            step_grad_fn = functools.partial(grad_fn, key=jax.random.fold_in(k_model, t))
        new_params, new_opt_state, clipped = apply_step(
            params, opt_state, (xb, yb), grad_fn=step_grad_fn, tx=tx, mask=mask
        )
        # After the random stop the run keeps its parameters (and the iterate sum its count).
        active = t < invariants.stop
        keep = lambda new, old: jax.tree_util.tree_map(  # noqa: E731
            lambda a, b: jnp.where(active, a, b), new, old
        )
        new_params, new_opt_state = keep(new_params, params), keep(new_opt_state, opt_state)
        out = {"batch_size": size, "overflow": overflow}
        if clipped.nonfinite is not None:  # skipped examples of the steps that updated
            out["nonfinite"] = jnp.where(active, clipped.nonfinite, 0)
        if config.track_clip_fraction:
            clipped_rows = (clipped.norms > clip).astype(jnp.float32)
            real = jnp.ones_like(clipped_rows) if mask is None else mask
            out["clip_fraction"] = jnp.sum(clipped_rows * real) / jnp.maximum(jnp.sum(real), 1.0)
        if config.track_loss:
            losses = model.per_example_loss(params, xb, yb)
            real = jnp.ones_like(losses) if mask is None else mask
            loss = jnp.sum(losses * real) / jnp.maximum(jnp.sum(real), 1.0)
            out["loss"] = loss + (
                model.regularizer(params) if model.regularizer is not None else 0.0
            )
        if config.track_params:
            out["params"] = new_params
        return (new_params, new_opt_state), out

    if not unroll:
        return jax.lax.scan(
            step, carry, jnp.asarray(t0, jnp.int32) + jnp.arange(count, dtype=jnp.int32)
        )
    # Straight-line steps: no XLA while loop (lax.scan of length 1 still emits one), whose body
    # XLA:CPU compiles with slower convolution layouts.
    outs = []
    for i in range(count):
        carry, out = step(carry, jnp.asarray(t0, jnp.int32) + i)
        outs.append(out)
    return carry, jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *outs)


def _end(
    config: TrainConfig,
    carry: tuple[Params, optax.OptState],
    invariants: _Invariants,
    metrics: dict[str, Array],
) -> tuple[Params, dict[str, Array]]:
    """A run's output from its last carry: the iterate(s) ``config.iterates`` asks for, and the
    metrics with the stopping time."""
    last, opt_state = carry
    metrics = {**metrics, "stopping_time": invariants.stop}
    if config.iterates == "last":
        return last, metrics
    mean = optimizers.averaged_params(opt_state)
    return ({"last": last, "average": mean} if config.iterates == "both" else mean), metrics


def _run(
    config: TrainConfig,
    plan: ExecutionPlan,
    values: Traced,
    params0: Params,
    x: Inputs,
    y: Array,
    key: Array,
) -> tuple[Params, dict[str, Array]]:
    """The pure training function (``config``/``plan`` static; everything else traceable): the
    whole run as one ``lax.scan``, for callers that ``jit``/``vmap`` it themselves."""
    carry, invariants = _begin(config, plan, values, params0, key)
    carry, metrics = _advance(
        config, plan, values, x, y, key, carry, invariants, 0, plan.steps, False
    )
    return _end(config, carry, invariants, metrics)


class _RunState(NamedTuple):
    """A run between two host calls: its carry, invariants and the metrics of every step so far
    (a buffer with the run's leading steps axis, filled chunk by chunk)."""

    carry: tuple[Params, optax.OptState]
    invariants: _Invariants
    metrics: dict[str, Array]


def _begin_state(
    config: TrainConfig,
    plan: ExecutionPlan,
    values: Traced,
    params0: Params,
    x: Inputs,
    y: Array,
    key: Array,
) -> _RunState:
    carry, invariants = _begin(config, plan, values, params0, key)
    shapes = jax.eval_shape(
        lambda: _advance(config, plan, values, x, y, key, carry, invariants, 0, 1, True)[1]
    )
    buffer = jax.tree_util.tree_map(
        lambda s: jnp.zeros((plan.steps, *s.shape[1:]), s.dtype), shapes
    )
    return _RunState(carry, invariants, buffer)


def _advance_state(
    config: TrainConfig,
    plan: ExecutionPlan,
    values: Traced,
    x: Inputs,
    y: Array,
    key: Array,
    state: _RunState,
    t0: ArrayLike,
    count: int,
) -> _RunState:
    carry, metrics = _advance(
        config, plan, values, x, y, key, state.carry, state.invariants, t0, count, True
    )
    buffer = jax.tree_util.tree_map(
        lambda b, m: jax.lax.dynamic_update_slice_in_dim(b, m, t0, axis=0), state.metrics, metrics
    )
    return _RunState(carry, state.invariants, buffer)


def _end_state(config: TrainConfig, state: _RunState) -> tuple[Params, dict[str, Array]]:
    return _end(config, state.carry, state.invariants, state.metrics)


_run_jit = jax.jit(_run, static_argnums=(0, 1))


# Steps per compiled call of a run whose step convolves (measured with the tanh CNN on XLA:CPU:
# 2 unrolled steps per call beat a Python loop over its jitted step, 1 step per call does not, and
# 4-8 steps are no faster and longer to compile).
CONV_STEPS_PER_CALL = 2


def _primitives(jaxpr: Any) -> set[str]:
    """The names of the primitives in ``jaxpr`` and every jaxpr nested in its equations."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    names |= _primitives(inner)
    return names


def convolves(model: Model, params0: Params, x: Inputs) -> bool:
    """Whether ``model``'s forward pass on one example of ``x`` has a convolution (traced, not
    run)."""
    jaxpr = jax.make_jaxpr(model.apply)(params0, _example_structs(x, 1))
    return "conv_general_dilated" in _primitives(jaxpr.jaxpr)


def steps_per_call(config: TrainConfig, params0: Params, x: Inputs) -> int | None:
    """How many steps :func:`train` and the sweeps run per compiled call: None runs the whole run
    as one compiled loop (``lax.scan``); ``k`` runs a host loop over a compiled call of ``k``
    straight-line steps (the result is the same run; only its speed differs).

    ``config.steps_per_call="auto"`` takes ``CONV_STEPS_PER_CALL`` when the model's forward pass
    convolves — XLA:CPU compiles the convolutions inside a loop body with layouts its fast
    convolution routine cannot take (a scanned tanh CNN step is much slower than its jitted step) —
    and one
    scan otherwise, where a step is too cheap for a host call per step (the GLM fast path, MLPs)."""
    per_call = config.steps_per_call
    if not isinstance(per_call, str):
        return per_call
    fast = (
        config.model.has_fast_path and config.clip_method in ("auto", "fast")
    ) or config.clip_method == "none"
    return None if fast or not convolves(config.model, params0, x) else CONV_STEPS_PER_CALL


def run_in_calls(
    begin: Callable[[], Any],
    advance: Callable[..., Any],
    end: Callable[[Any], Any],
    steps: int,
    per_call: int,
) -> Any:
    """``end(advance(... advance(begin(), 0, k) ..., t0, k'))``: a run of ``steps`` steps as a host
    loop over compiled calls of ``k = per_call`` steps (the last call takes the remainder)."""
    state = begin()
    for t0 in range(0, steps, per_call):
        state = advance(state, np.int32(t0), min(per_call, steps - t0))
    return end(state)


@functools.lru_cache(maxsize=64)
def _host_fns(config: TrainConfig, plan: ExecutionPlan) -> tuple[Callable[..., Any], ...]:
    """The jitted pieces of :func:`train`'s host loop for one static config and plan layout."""
    return (
        jax.jit(functools.partial(_begin_state, config, plan)),
        jax.jit(
            functools.partial(_advance_state, config, plan),
            static_argnames="count",
            donate_argnames="state",
        ),
        jax.jit(functools.partial(_end_state, config)),
    )


def static_config(config: TrainConfig) -> TrainConfig:
    """The compilation key of ``config``: everything but the traced values and the plan (whose
    layout, an :class:`~dpprep.plan.ExecutionPlan`, is passed on its own; ``z`` and ``C`` are
    traced, so runs of one layout at any noise share a compilation)."""
    return dataclasses.replace(config, hyper=None, plan=None)


def engine_fn(config: TrainConfig) -> Callable[..., tuple[Params, dict[str, Array]]]:
    """The engine's pure function ``(values, params0, x, y, key) -> (params, metrics)`` of
    ``config``'s layout, **unchecked**: ``values`` (:class:`Traced`) may hold any noise, so what
    it runs is not what the plan charges unless the caller makes it so. For the library's own
    drivers and audits (e.g. an audit that plants too little noise on purpose) and benchmarks;
    a user's code takes :func:`make_train_fn` or :func:`train`."""
    plan = checked_plan(config)
    return functools.partial(_run, static_config(config), plan.execution)


def make_train_fn(
    config: TrainConfig, params0: Params
) -> Callable[..., tuple[Params, dict[str, Array]]]:
    """The pure function ``(params0, x, y, key) -> (params, metrics)`` of ``config``'s run — its
    plan's noise and clip bound, its hyper's values and its extensions, checked here against the
    plan as :func:`train` checks them (``params0`` gives the parameters' shapes) — for callers
    that ``jit``/``vmap`` it themselves (e.g. over data or keys). Each call checks, at trace time,
    that the data has the plan's ``n`` rows; the values of the data are not checked (use
    :func:`check_data` first)."""
    plan = checked_plan(config)
    values = traced(config)
    _check_charged(
        plan,
        check_hyper(
            values, params0, plan=plan, extensions=config.extensions, clip_method=config.clip_method
        ),
    )
    run = functools.partial(_run, static_config(config), plan.execution)

    def fn(params0: Params, x: Inputs, y: Array, key: Array) -> tuple[Params, dict[str, Array]]:
        n = {np.shape(leaf)[0] for leaf in jax.tree_util.tree_leaves((x, y))}
        if n != {plan.n}:
            raise ValueError(f"the data has {sorted(n)} rows but the plan was made for n={plan.n}")
        return run(values, params0, x, y, key)

    return fn


def _numeric(value: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got {value!r}")
    arr = arr.astype(np.float64)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN")
    return arr


def check_hyper(
    values: Traced,
    params: Params,
    *,
    plan: DPPlan,
    swept: Collection[str] = (),
    num_features: int | None = None,
    extensions: tuple[Extension, ...] = (),
    clip_method: str = "auto",
) -> dict[str, Any]:
    """Host-side checks of a run's (or a grid's) traced values against ``plan``; raises ValueError
    naming the field. Returns what the plan must account: ``{"noise_multiplier": z per point}``
    (the plan's multiplier times the extensions' noise factor, per point when anything swept
    changes it; empty for a non-private plan).

    Fields named in ``swept`` hold grid values along a leading axis shared by all of them (a
    flat axis of points; a pytree field: every leaf carries it), every value of which is
    checked; every other scalar field must be a scalar (it would otherwise broadcast silently).
    A private plan needs every noise multiplier and clip bound finite and > 0 and every
    extension's noise covered (:meth:`~dpprep.extensions.Extension.noise_factor` > 0); a
    non-private plan takes no multiplier. DP-SGD by iteration also needs ``η ≤ 2/β``.
    ``extensions``: the config's, which check their own fields in ``values.extra``;
    ``num_features``: the data's ``d``, for fields shaped by it.
    """
    if not isinstance(values, Traced):
        raise TypeError(f"values must be a Traced, got {type(values).__name__}")
    specs = _extension_fields(extensions)
    known = (*SCALAR_FIELDS, *specs)
    unknown = sorted(set(swept) - set(known))
    if unknown:
        raise ValueError(f"cannot sweep {unknown}; sweepable fields are {list(known)}")
    extra = values.extra or {}
    if not isinstance(extra, dict):
        raise TypeError(f"hyper.extra must be a dict {{field: value}}, got {type(extra).__name__}")
    unknown = sorted(set(extra) - set(specs))
    if unknown:
        raise ValueError(
            f"hyper.extra sets {unknown}, which no extension of the config declares "
            f"(declared: {sorted(specs)}); add the extension to TrainConfig.extensions"
        )
    lengths = set()
    for name in SCALAR_FIELDS:
        shape = np.shape(getattr(values, name))
        if name in swept:
            if len(shape) != 1 or shape[0] == 0:
                raise ValueError(
                    f"{name} values must be a non-empty 1-D sequence, got shape {shape}"
                )
            lengths.add(shape[0])
        elif shape != ():
            raise ValueError(
                f"{name} must be a scalar, got shape {shape}; "
                "to vary it, make it an axis of the sweep"
            )
    arrays = {name: _numeric(getattr(values, name), name) for name in SCALAR_FIELDS}
    if clip_method == "none" and np.any(np.isfinite(arrays["l2_clip_norm"])):
        raise ValueError(
            "clip_method='none' computes no per-example gradients: every l2_clip_norm must be inf, "
            f"got {values.l2_clip_norm!r}"
        )
    lr = arrays["learning_rate"]
    if np.any(~np.isfinite(lr)) or np.any(lr < 0):
        raise ValueError(f"learning_rate must be finite and >= 0, got {values.learning_rate!r}")
    if plan.private:
        noise_lib.check_noise(arrays["noise_multiplier"], arrays["l2_clip_norm"])
        lipschitz = getattr(plan.accountant, "lipschitz", None)
        if lipschitz is not None and np.any(arrays["l2_clip_norm"] != float(lipschitz)):
            raise ValueError(
                "the plan's accountant assumes per-example gradients bounded by"
                f" lipschitz={lipschitz!r}: every clip bound must be that number, got"
                f" {values.l2_clip_norm!r}"
            )
    else:
        if np.any(arrays["noise_multiplier"] != 0):
            raise ValueError(
                "a non-private plan takes no noise_multiplier (it claims no guarantee); make a"
                " private plan with DPPlan.create(..., noise_multiplier=z) to add the Gaussian"
                " mechanism"
            )
        if np.any(~(arrays["l2_clip_norm"] > 0)):
            raise ValueError(
                f"l2_clip_norm must be > 0 (inf: no clipping), got {values.l2_clip_norm!r}"
            )
    if plan.execution.random_stop:
        check_iteration_learning_rate(values.learning_rate, plan.smoothness)
    for ext in extensions:
        own = ext_lib.values_for(ext, extra)
        lengths |= ext.check(
            own, params, swept=[name for name in swept if name in own], num_features=num_features
        )
    if len(lengths) > 1:
        raise ValueError(
            f"swept fields must share one leading (points) axis, got lengths {sorted(lengths)}"
        )
    if not plan.private:
        return {}
    size = lengths.pop() if lengths else 1
    factors = np.ones(size)
    events: list[tuple[Any, ...]] = [() for _ in range(size)]
    for ext in extensions:
        own = ext_lib.values_for(ext, extra)
        points = ext_lib.per_point(ext, own, [name for name in swept if name in own])
        factors = factors * np.array([ext.noise_factor(point) for point in points])
        events = [
            tuple(e) + tuple(ext.fixed_events(point))
            for e, point in zip(events, points if len(points) == size else points * size)
        ]
    if np.any(~(factors > 0)):
        raise ValueError(
            "an extension takes the noise away on some coordinate (its noise factor is 0): the run "
            "would release them without noise, which no epsilon covers; use scales > 0, or a "
            "non-private plan (DPPlan.non_private) for a mechanism that claims no guarantee"
        )
    z = np.broadcast_to(arrays["noise_multiplier"], (size,)) * factors
    return {"noise_multiplier": z, "fixed_events": events}


def _extension_fields(exts: tuple[Extension, ...]) -> dict[str, Field]:
    return {name: spec for name, (_, spec) in ext_lib.field_specs(exts, SCALAR_FIELDS).items()}


def check_data(
    data: tuple[Inputs, ArrayLike], params0: Params, model: Model | None = None
) -> tuple[Array, Array]:
    """Host-side checks of ``(x, y)`` and ``params0``; returns them as JAX arrays. ``x`` has a
    leading example axis and any example shape (``(n, d)`` for GLMs, e.g. ``(n, 28, 28, 1)`` for
    a CNN). With ``model``, ``params0`` must fit ``model.init``, ``model.apply`` must take x's
    examples and return a scalar loss per example, and ``y`` must suit ``model.target``
    (:func:`dpprep.models.check_targets`); all checked abstractly, before any compilation."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data must be a pair (x, y)")
    x = check_inputs(data[0])
    y = check_finite_array(data[1], "y", ndim=1, float32=True)
    if rows(x) != y.shape[0]:
        raise ValueError(
            f"x and y must have the same number of rows, got {rows(x)} and {y.shape[0]}"
        )
    check_float_params(params0, "params0")
    for leaf in jax.tree_util.tree_leaves(params0):
        check_finite_array(leaf, "params0")
    if model is None or model.has_fast_path:
        # GLMs (and model-less callers): params["w"] is (d, k) and x is (n, d).
        first = next((p for p in jax.tree_util.tree_leaves(params0) if np.ndim(p) == 2), None)
        if first is not None and (
            isinstance(x, dict) or x.ndim != 2 or np.shape(first)[0] != x.shape[1]
        ):
            has = (
                f"{x.shape[1]} features"
                if not isinstance(x, dict) and x.ndim == 2
                else f"examples of shape {example_shape(x)}"
            )
            raise ValueError(f"x has {has} but the params expect {np.shape(first)[0]}")
    # the params and the examples first: reading y's classes applies the model
    if model is not None:
        check_params(model, params0)
        check_model_fits(model, params0, x, _label_dtype(model, y))
    targets = check_targets(model, params0, x, y)
    return _as_jax(x), jnp.asarray(targets)


def check_inputs(x: Inputs, name: str = "x") -> Inputs:
    """The examples' inputs, checked on the host: an array with a leading example axis (any example
    shape: ``(n, d)`` for GLMs, e.g. ``(n, 28, 28, 1)`` for a CNN; float32 range) or a dict of such
    arrays sharing that axis (a model with several inputs; integer leaves, e.g. token ids, stay
    integers). Returned as numpy (a dict of numpy arrays); a ``jax.Array`` stays the array it is,
    on its device, and is scanned once however many calls it is passed to (convert a data set once
    with ``jnp.asarray`` and a loop of ``train`` calls neither rescans nor copies it)."""
    if isinstance(x, dict):
        if not x:
            raise ValueError(f"{name} is an empty dict: it needs at least one input array")
        out = {}
        for key, leaf in x.items():
            arr = check_finite_values(leaf, f"{name}[{key!r}]", float32=True)
            if arr.ndim < 1:
                raise ValueError(
                    f"{name}[{key!r}] is a scalar; every input needs a leading example axis"
                )
            out[key] = arr
        sizes = {k: a.shape[0] for k, a in out.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"the inputs of {name} disagree on the example axis: {sizes}")
        if next(iter(sizes.values())) == 0:
            raise ValueError(f"{name} must contain at least one example")
        return out
    arr = check_finite_values(x, name, float32=True)
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have a leading example axis and the examples' axes (e.g. (n, d)), "
            f"got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must contain at least one example")
    return arr


def rows(x: Inputs) -> int:
    """The number of examples of checked inputs (:func:`check_inputs`)."""
    return int(np.shape(next(iter(x.values())) if isinstance(x, dict) else x)[0])


def example_shape(x: Inputs) -> tuple[int, ...] | dict[str, tuple[int, ...]]:
    """One example's shape: a tuple, or a dict of them for dict inputs."""
    if isinstance(x, dict):
        return {k: tuple(np.shape(a)[1:]) for k, a in x.items()}
    return tuple(np.shape(x)[1:])


def num_features(x: Inputs) -> int | None:
    """``d`` of ``(n, d)`` array inputs (what feature-shaped extension fields are checked
    against); None for other inputs."""
    return int(np.shape(x)[-1]) if not isinstance(x, dict) and np.ndim(x) >= 2 else None


def _as_jax(x: Inputs) -> Inputs:
    """Inputs on the device: floating (and array) inputs as float32, integer leaves of dict inputs
    as int32."""
    if not isinstance(x, dict):
        return jnp.asarray(x, jnp.float32)
    return {
        k: jnp.asarray(a, jnp.int32 if a.dtype.kind in "iub" else jnp.float32) for k, a in x.items()
    }


def _example_structs(
    x: Inputs, count: int
) -> jax.ShapeDtypeStruct | dict[str, jax.ShapeDtypeStruct]:
    """``count`` abstract examples of ``x``'s shape and dtype (for abstract evaluation)."""
    if isinstance(x, dict):
        return {
            k: jax.ShapeDtypeStruct(
                (count, *np.shape(a)[1:]),
                jnp.int32 if np.asarray(a).dtype.kind in "iub" else jnp.float32,
            )
            for k, a in x.items()
        }
    return jax.ShapeDtypeStruct((count, *np.shape(x)[1:]), jnp.float32)


def _label_dtype(model: Model, y: np.ndarray) -> DTypeLike:
    """The dtype :func:`dpprep.models.check_targets` gives ``y`` for ``model`` (without applying
    it)."""
    if model.target == "class" or (model.target is None and y.dtype.kind in "iub"):
        return jnp.int32
    return jnp.float32


def check_model_fits(
    model: Model, params0: Params, x: Inputs, label_dtype: DTypeLike | None = None
) -> None:
    """Host-side check (abstract evaluation, nothing computed) that ``model.apply`` takes x's
    examples and ``model.per_example_loss`` returns one scalar per example, on labels of the
    dtype the run will feed it (``label_dtype``; default: int32 for class targets, else
    float32); ValueError naming the problem."""
    example = _example_structs(x, 2)
    try:
        out = jax.eval_shape(model.apply, params0, example)
    except Exception as err:  # any tracing error of user code: say where it came from
        raise ValueError(
            f"model {model.name!r} cannot be applied to examples of shape {example_shape(x)} "
            f"with these params: {type(err).__name__}: {err}"
        ) from err
    if label_dtype is None:
        label_dtype = jnp.int32 if model.target == "class" else jnp.float32
    labels = jax.ShapeDtypeStruct((2,), label_dtype)
    try:
        losses = jax.eval_shape(model.per_example_loss, params0, example, labels)
    except Exception as err:
        raise ValueError(
            f"model {model.name!r}: per_example_loss fails on outputs of shape "
            f"{getattr(out, 'shape', None)}: {type(err).__name__}: {err}"
        ) from err
    if getattr(losses, "shape", None) != (2,):
        raise ValueError(
            f"model {model.name!r}: per_example_loss must return one scalar per example "
            f"(shape (b,)), got shape {getattr(losses, 'shape', None)} for a batch of 2"
        )


def check_params(model: Model, params0: Params) -> None:
    """Host-side check that ``params0`` has the tree structure and leaf shapes ``model.init``
    gives (traced abstractly, nothing is computed); raises ValueError naming the mismatch."""
    expected = jax.eval_shape(model.init, jax.random.key(0))
    want, got = jax.tree_util.tree_structure(expected), jax.tree_util.tree_structure(params0)
    if want != got:  # type: ignore[operator]  # jax's PyTreeDef stub
        raise ValueError(
            f"params0 does not fit model {model.name!r}: its structure is {got}, "
            f"the model's is {want} (build it with model.init)"
        )
    for path, e, p in zip(
        jax.tree_util.tree_leaves_with_path(expected),
        jax.tree_util.tree_leaves(expected),
        jax.tree_util.tree_leaves(params0),
    ):
        if np.shape(p) != e.shape:
            raise ValueError(
                f"params0{jax.tree_util.keystr(path[0])} has shape {np.shape(p)}, "
                f"model {model.name!r} expects {e.shape}"
            )


def warn_on_overflow(metrics: dict[str, Array], plan: DPPlan) -> None:
    """Warn when a Poisson draw exceeded the padded batch (see :mod:`dpprep.sampling`)."""
    count = int(np.sum(np.asarray(metrics["overflow"])))
    if count:
        warnings.warn(
            f"{count} Poisson draw(s) exceeded the padded batch and were truncated; the run is"
            " within the documented TV bound"
            f" (max_overflow_prob={plan.execution.max_overflow_prob}) of ideal Poisson sampling,"
            " whose δ slack (1 + e^ε)·max_overflow_prob the plan's epsilon already charges: add"
            " nothing more to delta (if you accounted the run another way, add"
            " sampling.overflow_delta(epsilon, max_overflow_prob) to its delta)",
            RuntimeWarning,
            stacklevel=3,
        )


def warn_on_nonfinite(metrics: dict[str, Array]) -> None:
    """Warn when some per-example gradients were not finite (``metrics["nonfinite"]``): those
    examples contributed nothing (:func:`dpprep.clipping.nan_safe`), so the release is as
    private as planned, but they did not train the model."""
    if "nonfinite" not in metrics:
        return
    count = int(np.sum(np.asarray(metrics["nonfinite"])))
    if count:
        warnings.warn(
            f"{count} per-example gradient(s) were not finite (a NaN or inf in a record, or a loss"
            " that is NaN on it, e.g. the log of a negative number) and contributed nothing to"
            " their steps' clipped sums: the release keeps its guarantee (such an example counts"
            " as a zero gradient) but those examples did not train the model. metrics['nonfinite']"
            " counts them per step (a non-private diagnostic: do not release it)",
            RuntimeWarning,
            stacklevel=3,
        )


def warn_if_not_finite(tree: PyTree, what: str) -> None:
    """Warn when a run ended with non-finite values (a learning rate or noise too large for
    float32, a diverging loss): a NaN model should never pass silently."""
    bad = sum(
        int(np.size(leaf) - np.count_nonzero(np.isfinite(np.asarray(leaf))))
        for leaf in jax.tree_util.tree_leaves(tree)
        if np.asarray(leaf).dtype.kind == "f"
    )
    if bad:
        warnings.warn(
            f"{bad} non-finite value(s) in the {what}: the run diverged or overflowed float32 "
            "(learning rate, noise or feature scale too large?)",
            RuntimeWarning,
            stacklevel=3,
        )


def check_run(
    config: TrainConfig, params0: Params, data: tuple[Inputs, ArrayLike]
) -> tuple[DPPlan, Traced, Array, Array]:
    """Every host-side check of one run, before anything is compiled: the config against its plan,
    the data (``plan.n`` rows) and the values; returns the plan, the values and the data as arrays.
    An extension that lowers the noise below the plan's (a noise factor < 1) is refused: the
    plan's epsilon would not cover the run."""
    plan = checked_plan(config)
    x, y = check_data(data, params0, config.model)
    checked_plan(config, rows(x))
    values = traced(config)
    charged = check_hyper(
        values,
        params0,
        plan=plan,
        num_features=num_features(x),
        extensions=config.extensions,
        clip_method=config.clip_method,
    )
    _check_charged(plan, charged)
    return plan, values, x, y


def _check_charged(plan: DPPlan, charged: dict[str, Any]) -> None:
    """One run must be what its plan charges: no extension lowering the noise below the plan's
    (a noise factor < 1), no private statistic declared by an extension that the plan does not
    account (put it in the plan's ``fixed_events``)."""
    if not plan.private:
        return
    if float(np.min(charged["noise_multiplier"])) < plan.noise_multiplier:
        factor = float(np.min(charged["noise_multiplier"])) / plan.noise_multiplier
        raise ValueError(
            f"an extension scales the noise by {factor:.4g} < 1 on some coordinate: the run adds"
            f" less noise than the plan charges (z = {plan.noise_multiplier:.6g}); keep the factors"
            f" >= 1 or make the plan with z/{factor:.4g}"
        )
    if any(charged["fixed_events"]):
        raise ValueError(
            "an extension declares a private statistic the run depends on (e.g. a private mean):"
            " give its event to the plan (DPPlan.create(..., fixed_events=...)), which then"
            " accounts it"
        )


def train(
    config: TrainConfig, params0: Params, data: tuple[Inputs, ArrayLike], key: Array
) -> tuple[Params, dict[str, Any]]:
    """Run ``config.plan``'s run once; returns ``(params, metrics)``.

    Only ``params`` is the differentially private output (with ``iterates="both"`` a dict of
    the last and the averaged iterate), at ``metrics["epsilon"]``, ``metrics["delta"]`` (the
    plan's: ``inf``/None for a non-private plan) and ``metrics["guarantee"]`` (one line:
    :func:`guarantee`, the plan's :meth:`~dpprep.plan.DPPlan.describe` and any unverified
    extension it rests on). The other ``metrics`` are non-private diagnostics
    computed
    from the data and the secret sampling without noise: they must not be released as part of
    the DP output. They hold per-step arrays ``batch_size`` (realised), ``overflow`` (Poisson
    draw larger than the pad), optionally ``clip_fraction`` (share of real examples with norm >
    C; ``track_clip_fraction``), ``loss`` (batch objective before the step; ``track_loss``) and
    ``params`` (iterates; ``track_params``), ``nonfinite`` (real examples whose gradient was not
    finite and which so contributed nothing: a NaN arising in the loss; a warning says when there
    were any; absent for ``clip_method="none"``), and the scalar ``stopping_time`` (the number
    of steps that updated the parameters). Bad inputs raise ``TypeError``/``ValueError`` before
    anything is compiled; refusing non-finite data there is a convenience, not what the
    guarantee rests on (:func:`dpprep.clipping.nan_safe`). Data given as JAX arrays are checked
    once however many calls they are passed to, and not copied again (numpy data are checked and
    copied to the device at every call: convert a data set once with ``jnp.asarray`` for a loop).
    """
    key = check_key(key)
    plan, values, x, y = check_run(config, params0, data)
    static, layout = static_config(config), plan.execution
    per_call = steps_per_call(config, params0, x)
    if per_call is None or per_call >= layout.steps:
        params, metrics = _run_jit(static, layout, values, params0, x, y, key)
    else:
        begin, advance, end = _host_fns(static, layout)
        params, metrics = run_in_calls(
            lambda: begin(values, params0, x, y, key),
            lambda state, t0, count: advance(values, x, y, key, state, t0, count=count),
            end,
            layout.steps,
            per_call,
        )
    warn_on_overflow(metrics, plan)
    warn_on_nonfinite(metrics)
    warn_if_not_finite(params, "trained parameters")
    metrics = {
        **metrics,
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "guarantee": guarantee(plan, config.extensions),
    }
    return params, metrics


@dataclasses.dataclass(frozen=True)
class FitResult:
    """What :func:`fit` returns: the private ``params``, the ``epsilon`` spent at ``delta``, the
    ``plan`` that was run (its :meth:`~dpprep.plan.DPPlan.describe` says everything it rests on)
    and the non-private diagnostics ``metrics`` (see :func:`train`)."""

    params: Params
    epsilon: float
    delta: float | None
    plan: DPPlan
    metrics: dict[str, Any]

    @property
    def guarantee(self) -> str:
        """The run's guarantee in one line (:func:`guarantee`: the plan's, and any unverified
        extension it rests on)."""
        return str(self.metrics["guarantee"])


def fit(
    model: Model,
    params0: Params,
    data: tuple[Inputs, ArrayLike],
    key: Array,
    *,
    target_epsilon: float,
    delta: float,
    l2_clip_norm: float,
    learning_rate: float,
    sampling: str = "poisson",
    batch_size: int | None = None,
    epochs: float | None = None,
    steps: int | None = None,
    optimizer: optax.GradientTransformation | str | None = None,
    **options: Any,
) -> FitResult:
    """Ask for ``(ε, δ)``, get a trained model and the ε it spent, in one call: makes the
    :class:`~dpprep.plan.DPPlan` (sampler, ``n`` from the data, batch size, steps or epochs, clip
    bound, noise calibrated to ``(target_epsilon, delta)``) and runs it with :func:`train`.
    ``options`` go to the plan when :meth:`~dpprep.plan.DPPlan.create` takes them (e.g.
    ``neighboring_relation``, ``smoothness``, ``options``, ``fixed_events``,
    ``allow_large_delta``), else to :class:`TrainConfig` (e.g. ``iterates``, ``extensions``).
    ``delta`` must be below ``1/n`` (``n``: the data's rows) unless ``allow_large_delta=True``,
    which the guarantee then states. ``optimizer``: a unit-rate optax transformation or a name
    :func:`dpprep.optimizers.optimizer` accepts (``"adam"``); None: SGD.

    >>> import jax, numpy as np
    >>> from dpprep import models
    >>> x = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    >>> y = (x[:, 0] > 0).astype(np.float32)
    >>> model = models.logistic_regression(3)
    >>> out = fit(model, model.init(None), (x, y), jax.random.key(0),
    ...           target_epsilon=1.0, delta=1e-5, l2_clip_norm=1.0, learning_rate=0.5,
    ...           batch_size=100, epochs=5)
    >>> out.epsilon <= 1.0, out.plan.steps
    (True, 50)
    """
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data must be a pair (x, y)")
    # before the calibration below (seconds): a wrong optimizer or dtype fails at once
    optimizer = optimizers.as_optimizer(optimizer)
    check_float_params(params0, "params0")
    n = rows(check_inputs(data[0]))
    plan_names = set(inspect.signature(DPPlan.create).parameters) - {"cls", "sampling", "n"}
    plan_options = {k: v for k, v in options.items() if k in plan_names}
    plan = DPPlan.create(
        sampling,
        n,
        batch_size=batch_size,
        epochs=epochs,
        steps=steps,
        l2_clip_norm=l2_clip_norm,
        target_epsilon=target_epsilon,
        delta=delta,
        **plan_options,
    )
    config = TrainConfig(
        model,
        Hyper(learning_rate),
        plan,
        optimizer=optimizer,
        **{k: v for k, v in options.items() if k not in plan_names},
    )
    params, metrics = train(config, params0, data, key)
    return FitResult(params, plan.epsilon, plan.delta, plan, metrics)
