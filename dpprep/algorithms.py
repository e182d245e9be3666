"""Private (and non-private) gradient learners as one pure, jit-once ``lax.scan`` engine.

``train(config, params0, (x, y), key) -> (params, metrics)`` runs, per step ``t``:

1. select a batch (``config.sampling``, see :mod:`dpprep.sampling`):
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
     or any other stateful ``config.optimizer`` voids it, as does ``η > 2/β``;
2. sum the clipped per-example gradients (:mod:`dpprep.clipping`; ``clip_norm = inf``: none);
3. add Gaussian noise to the sum (:mod:`dpprep.noise` for the std convention) and divide by the
   fixed normaliser ``N``: the *expected* batch size ``q·n = batch_size`` (poisson),
   ``batch_size`` (replacement, shuffle), ``n`` (full), 1 (fixed_order); then add the gradient of
   the model's (data-independent) regulariser;
4. update with an optax transformation scaled by the learning rate.

Steps 2–4 are :func:`dpprep.step.dp_step`: the clipped sum comes from
:func:`dpprep.clipping.model_clipped_grad` (:func:`dpprep.clipping.clipped_grad` of the model's
loss, or the GLM fast path), and :func:`update_transform` is the optax chain that privatizes and
applies it (:func:`dpprep.noise.gaussian_privatizer`, regulariser, optimizer, learning rate); the
scan adds the sampler, the random stop and (``iterates``) the iterate average
(:func:`dpprep.optimizers.average_iterates`).

**Extensions.** ``config.extensions`` (:mod:`dpprep.extensions`) extend the step without the engine
knowing them: traced hyperparameters of their own (in ``Hyper.extra``, swept by name), a view of
the model, their own clipped sum or privatizer, a wrapper around the update. E.g.
:class:`dpprep.features.AffineFeatures` (train on per-point transformed features sharing one
batch) and :class:`dpprep.optimizers.L2BallProjection` (projected updates); the papers' modules
add theirs (e.g. :class:`dpprep.corrdp.sgd.CoordinateNoise`).
Non-private training is the same code with ``noise_multiplier=0`` and ``clip_norm=inf``.
Randomness comes from named streams of the run's key (:mod:`dpprep.streams`: ``"batch"``,
``"noise"``, ``"stop"``), so runs with the same key and sampler share their batches.

**Only the returned parameters are the private output.** ``metrics`` are diagnostics computed
from the data and the secret randomness without noise: ``loss`` and ``clip_fraction`` (opt-in,
``track_loss`` / ``track_clip_fraction``) are plain functions of the batch, ``batch_size`` and
``overflow`` expose the Poisson draws whose secrecy amplification relies on, ``params`` are the
intermediate iterates (hidden in the amplification-by-iteration and averaged-iterate analyses) and
``stopping_time`` is the random stop those analyses average over. None of them may be released as
part of the DP output.

Static choices (shapes, steps, sampling, optimizer) live in the frozen :class:`TrainConfig`; the
floats that can be swept live in :class:`Hyper`, a pytree whose leaves are traced, so
:mod:`dpprep.sweeps` can ``vmap`` over seeds and any set of points (learning rates, noise levels,
clip norms, noise scales, feature transforms) in one compiled call.

**Optimizer convention.** ``config.optimizer`` gives the update *direction* at unit learning
rate (default ``optax.sgd(1.0)``); the applied update is ``hyper.learning_rate × updates``. Build
optimizers with ``learning_rate=1.0`` (e.g. ``optax.adam(1.0)``, or
:func:`dpprep.optimizers.optimizer` ``("adam")``, which also returns one object per configuration
so that equal configs share a compilation): for optax's SGD, momentum, Adam and AdamW the learning
rate is a final multiplicative factor, so this is exactly the optimizer at ``learning_rate`` while
keeping the rate traceable.

**Privacy.** :func:`make_plan` gives the run's :class:`~dpprep.plan.ExecutionPlan`, the one
object both the scan and the accountant read: ``make_plan(config, n).calibrate(ε, δ)`` and
``.epsilon(z, δ)`` account exactly the steps :func:`train` takes (Poisson overflow slack
included).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any, Callable, Collection

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpprep import clipping, optimizers, sampling, streams
from dpprep import extensions as ext_lib
from dpprep import noise as noise_lib
from dpprep.extensions import Extension
from dpprep.models import Array, Model, Params, check_targets
from dpprep.plan import ExecutionPlan
from dpprep.step import dp_step
from dpprep.validation import check_finite_array, check_same_length

# Hyper's scalar float fields: the core's traced hyperparameters (extensions add theirs in ``extra``).
SCALAR_FIELDS = ("learning_rate", "noise_multiplier", "noise_std", "clip_norm")
ITERATES = ("last", "average", "both")
PRECISIONS = (None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Hyper:
    """Hyperparameters that may be traced (and so vmapped over by sweeps).

    Attributes:
      learning_rate: step size (multiplies the optimizer's unit-rate update).
      noise_multiplier: ``z``: noise std on the clipped-gradient sum is ``z·C·scale`` (needs a
        finite ``clip_norm``; see :mod:`dpprep.noise`).
      clip_norm: per-example clip bound ``C`` (``inf``: no clipping).
      noise_std: absolute noise std on the gradient sum (for unclipped runs); not with ``z > 0``.
      extra: ``{field: value}`` for the traced fields of ``config.extensions``
        (:mod:`dpprep.extensions`; e.g. ``{"feature_shift": mu}`` with
        :class:`dpprep.features.AffineFeatures`); None: their defaults.
    """

    learning_rate: Any
    noise_multiplier: Any = 0.0
    clip_norm: Any = math.inf
    # Keyword-only, so positional calls keep the order above.
    noise_std: Any = dataclasses.field(default=0.0, kw_only=True)
    extra: Any = dataclasses.field(default=None, kw_only=True)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static description of a run (hashable; one compilation per config and data shape).

    Attributes:
      model: the :class:`~dpprep.models.Model`. Compilations are cached on the config (with the
        plan and the swept names), and its model and optimizer compare by identity. Equal
        configs share a compilation when built from :mod:`dpprep.models`' factories (cached:
        the same arguments give the same model) and :func:`dpprep.optimizers.optimizer` (the same
        name and options give the same optimizer); a model or optax transformation built by
        hand (e.g. :mod:`dpprep.frameworks`, ``optax.adam(1.0)``) is reused only as the same object.
      hyper: the traced hyperparameters.
      sampling: a registered sampler (:data:`dpprep.sampling.SAMPLERS`; module docstring).
      batch_size: expected (poisson) or fixed (shuffle, without/with replacement) batch size.
      steps: number of steps; for "fixed_order", the fixed ``T <= n`` (DP-FGD), or None for the
        random stopping time of DP-SGD by iteration (both analysed for plain SGD with contractive
        steps only: convex, smooth loss, ``η ≤ 2/β``; see the module docstring).
      epochs: alternative to ``steps``: ``⌈E·n/B⌉`` steps (poisson, replacement,
        without_replacement), ``E·⌈n/B⌉`` (shuffle, integer E), ``E`` (full).
      optimizer: unit-learning-rate optax transformation (default ``optax.sgd(1.0)``), e.g.
        ``dpprep.optimizers.optimizer("adam")``.
      iterates: "last" (``θ_T``), "average" (mean of ``θ_1..θ_T``) or "both" (a dict
        ``{"last": …, "average": …}`` from the same run).
      clip_method: "auto", "fast", "vmap" or "none" (:func:`dpprep.clipping.clipped_grad_sum`;
        "none": the plain gradient of the batch loss, for runs with ``clip_norm = inf`` only).
      track_loss: record the (masked) batch loss per step (one extra forward pass).
      track_clip_fraction: record the share of the batch's real examples whose gradient norm
        exceeded ``C``. Like every metric it is not private (module docstring).
      track_params: record every iterate ``θ_t`` (memory ``T × |θ|``; for tests and analysis).
      kappa: ``κ`` of the stopping time ``T ~ Unif{1..n−κ+1}`` (fixed_order with steps=None).
      max_overflow_prob: bound on the probability that any Poisson draw of the run exceeds the
        padded batch (:func:`dpprep.sampling.poisson_pad_size`).
      neighbouring: relation of the run's guarantee (None: the sampler's own, see
        :class:`dpprep.plan.ExecutionPlan`).
      matmul_precision: JAX matmul precision inside the run (None: JAX's default, which on GPUs
        is TF32 for float32; "float32"/"highest" for final numbers).
      extensions: :class:`~dpprep.extensions.Extension` objects extending the step (module
        docstring); their traced fields are set in ``hyper.extra`` and swept by name.
    """

    model: Model
    hyper: Hyper | None = None
    sampling: str = "poisson"
    batch_size: int | None = None
    steps: int | None = None
    epochs: float | None = None
    optimizer: optax.GradientTransformation | None = None
    iterates: str = "last"
    clip_method: str = "auto"
    track_loss: bool = False
    track_clip_fraction: bool = False
    track_params: bool = False
    kappa: int = 1
    max_overflow_prob: float = 1e-10
    neighbouring: str | None = None
    matmul_precision: str | None = None
    extensions: tuple[Extension, ...] = ()


def sweepable_fields(config: TrainConfig) -> tuple[str, ...]:
    """The names a sweep may vary for ``config``: the core's traced fields, then its extensions'."""
    return SCALAR_FIELDS + tuple(ext_lib.field_specs(config.extensions, SCALAR_FIELDS))


def with_values(hyper: Hyper, values: Any) -> Hyper:
    """``hyper`` with ``values`` (``{field: value}``) set: core fields directly, extension fields
    in ``extra`` (any name that is not a core field)."""
    core = {name: value for name, value in values.items() if name in SCALAR_FIELDS}
    extra = {name: value for name, value in values.items() if name not in SCALAR_FIELDS}
    if extra:
        core["extra"] = {**(hyper.extra or {}), **extra}
    return dataclasses.replace(hyper, **core)


def make_plan(config: TrainConfig, n: int) -> ExecutionPlan:
    """The :class:`~dpprep.plan.ExecutionPlan` of ``config`` on ``n`` examples: what
    :func:`train` runs and what the accountant charges (``plan.epsilon`` / ``plan.calibrate``)."""
    clipping.check_method(config.clip_method, "clip_method")
    if config.iterates not in ITERATES:
        raise ValueError(f"iterates must be one of {ITERATES}, got {config.iterates!r}")
    if config.matmul_precision not in PRECISIONS:
        raise ValueError(f"matmul_precision must be one of {PRECISIONS}, got {config.matmul_precision!r}")
    if not isinstance(config.extensions, tuple):
        raise ValueError(f"extensions must be a tuple of Extension objects, got {type(config.extensions).__name__}")
    ext_lib.field_specs(config.extensions, SCALAR_FIELDS)
    return ExecutionPlan.create(
        config.sampling, n, batch_size=config.batch_size, steps=config.steps, epochs=config.epochs,
        kappa=config.kappa, max_overflow_prob=config.max_overflow_prob, neighbouring=config.neighbouring)


def add_gradient_of(penalty: Callable[[Params], Array]) -> optax.GradientTransformation:
    """Adds ``∇penalty(params)`` to the updates: a data-independent regulariser enters the
    objective after the noise, since it carries no information about any example."""

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("add_gradient_of needs the params (pass them to tx.update)")
        return jax.tree_util.tree_map(jnp.add, updates, jax.grad(penalty)(params)), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def update_transform(config: TrainConfig, plan: ExecutionPlan, hyper: Hyper, noise_key: Array
                     ) -> optax.GradientTransformation:
    """The optax chain a run applies to each step's clipped gradient sum: the privatizer (the
    Gaussian noise and the plan's normaliser, or an extension's), the model's regulariser, the
    unit-rate optimizer and the learning rate; then the extensions' wrappers and, for
    ``iterates != "last"``, :func:`dpprep.optimizers.average_iterates` around it all."""
    exts = config.extensions
    options = dict(key=noise_key, l2_clip_norm=jnp.asarray(hyper.clip_norm, jnp.float32),
                   noise_multiplier=hyper.noise_multiplier, stddev=hyper.noise_std, normalize_by=plan.normaliser)
    privatizer = ext_lib.the_one(exts, "privatizer",
                                    lambda ext: ext.privatizer(ext_lib.values_for(ext, hyper.extra), **options))
    links = [privatizer if privatizer is not None else noise_lib.gaussian_privatizer(**options)]
    if config.model.regularizer is not None:
        links.append(add_gradient_of(config.model.regularizer))
    links += [config.optimizer if config.optimizer is not None else optax.sgd(1.0),
              optax.scale(jnp.asarray(hyper.learning_rate, jnp.float32))]
    tx = optax.chain(*links)
    for ext in exts:
        tx = ext.wrap(tx, ext_lib.values_for(ext, hyper.extra))
    return tx if config.iterates == "last" else optimizers.average_iterates(tx)


def run_model(config: TrainConfig, hyper: Hyper) -> Model:
    """The model as the run sees it: ``config.model`` through its extensions' views (e.g. on
    transformed features); what the loss metric and the sweeps' evaluation use."""
    model = config.model
    for ext in config.extensions:
        model = ext.model(model, ext_lib.values_for(ext, hyper.extra))
    return model


def _run(config: TrainConfig, plan: ExecutionPlan, hyper: Hyper, params0: Params, x: Array, y: Array,
         key: Array) -> tuple[Params, dict[str, Array]]:
    """The pure training function (``config``/``plan`` static; everything else traceable)."""
    if config.matmul_precision is not None:
        with jax.default_matmul_precision(config.matmul_precision):
            return _run(dataclasses.replace(config, matmul_precision=None), plan, hyper, params0, x, y, key)
    sampler = plan.impl
    model = run_model(config, hyper)
    k_batch, k_noise = streams.stream(key, streams.BATCH), streams.stream(key, streams.NOISE)
    clip = jnp.asarray(hyper.clip_norm, jnp.float32)
    grad_fn = ext_lib.the_one(
        config.extensions, "clipped_grad",
        lambda ext: ext.clipped_grad(config.model, ext_lib.values_for(ext, hyper.extra), l2_clip_norm=clip,
                                     method=config.clip_method))
    if grad_fn is None:
        grad_fn = clipping.model_clipped_grad(model, l2_clip_norm=clip, method=config.clip_method)
    tx = update_transform(config, plan, hyper, k_noise)
    prepared = sampler.prepare(k_batch, plan)
    stop = (sampling.stopping_time(streams.stream(key, streams.STOP), plan.n, plan.kappa)
            if plan.random_stop else jnp.int32(plan.steps))

    def step(carry, t):
        params, opt_state = carry
        idx, mask, size, overflow = sampler.select(k_batch, plan, t, prepared)
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        new_params, new_opt_state, clipped = dp_step(params, opt_state, (xb, yb), grad_fn=grad_fn, tx=tx,
                                                     mask=mask)
        # After the random stop the run keeps its parameters (and the iterate sum its count).
        active = t < stop
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(active, a, b), new, old)  # noqa: E731
        new_params, new_opt_state = keep(new_params, params), keep(new_opt_state, opt_state)
        out = {"batch_size": size, "overflow": overflow}
        if config.track_clip_fraction:
            clipped_rows = (clipped.norms > clip).astype(jnp.float32)
            real = jnp.ones_like(clipped_rows) if mask is None else mask
            out["clip_fraction"] = jnp.sum(clipped_rows * real) / jnp.maximum(jnp.sum(real), 1.0)
        if config.track_loss:
            losses = model.per_example_loss(params, xb, yb)
            real = jnp.ones_like(losses) if mask is None else mask
            loss = jnp.sum(losses * real) / jnp.maximum(jnp.sum(real), 1.0)
            out["loss"] = loss + (model.regularizer(params) if model.regularizer is not None else 0.0)
        if config.track_params:
            out["params"] = new_params
        return (new_params, new_opt_state), out

    steps = jnp.arange(plan.steps, dtype=jnp.int32)
    (last, opt_state), metrics = jax.lax.scan(step, (params0, tx.init(params0)), steps)
    metrics["stopping_time"] = stop
    if config.iterates == "last":
        return last, metrics
    mean = optimizers.averaged_params(opt_state)
    return ({"last": last, "average": mean} if config.iterates == "both" else mean), metrics


_run_jit = jax.jit(_run, static_argnums=(0, 1))


def make_train_fn(config: TrainConfig, n: int) -> Callable[..., tuple[Params, dict[str, Array]]]:
    """The pure function ``(hyper, params0, x, y, key) -> (params, metrics)`` of a run on ``n``
    examples, for callers that ``jit``/``vmap`` it themselves (e.g. over data as well). It does
    not validate its inputs: use :func:`check_data`, :func:`check_hyper` and :func:`check_key`
    first."""
    plan = make_plan(config, n)
    return functools.partial(_run, dataclasses.replace(config, hyper=None), plan)


def _numeric(value: Any, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got {value!r}")
    arr = arr.astype(np.float64)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be NaN")
    return arr


def check_hyper(hyper: Hyper, params: Params, *, swept: Collection[str] = (), num_features: int | None = None,
                extensions: tuple[Extension, ...] = ()) -> None:
    """Host-side checks of hyperparameter values; raises ValueError naming the field.

    Fields named in ``swept`` hold grid values along a leading axis shared by all of them (a
    flat axis of points; a pytree field: every leaf carries it), every value of which is
    checked; every other scalar field must be a scalar (it would otherwise broadcast silently).
    ``extensions``: the config's, which check their own fields in ``hyper.extra``;
    ``num_features``: the data's ``d``, for fields shaped by it.
    """
    if not isinstance(hyper, Hyper):
        raise ValueError(f"config.hyper must be a Hyper, got {type(hyper).__name__}")
    specs = _extension_fields(extensions)
    known = (*SCALAR_FIELDS, *specs)
    unknown = sorted(set(swept) - set(known))
    if unknown:
        raise ValueError(f"cannot sweep {unknown}; sweepable fields are {list(known)}")
    extra = hyper.extra or {}
    if not isinstance(extra, dict):
        raise ValueError(f"hyper.extra must be a dict {{field: value}}, got {type(extra).__name__}")
    unknown = sorted(set(extra) - set(specs))
    if unknown:
        raise ValueError(f"hyper.extra sets {unknown}, which no extension of the config declares "
                         f"(declared: {sorted(specs)}); add the extension to TrainConfig.extensions")
    lengths = set()
    for name in SCALAR_FIELDS:
        shape = np.shape(getattr(hyper, name))
        if name in swept:
            if len(shape) != 1 or shape[0] == 0:
                raise ValueError(f"{name} values must be a non-empty 1-D sequence, got shape {shape}")
            lengths.add(shape[0])
        elif shape != ():
            raise ValueError(f"{name} must be a scalar, got shape {shape}; "
                             "to vary it, make it an axis of the sweep")
    values = {name: _numeric(getattr(hyper, name), name) for name in SCALAR_FIELDS}
    lr = values["learning_rate"]
    if np.any(~np.isfinite(lr)) or np.any(lr < 0):
        raise ValueError(f"learning_rate must be finite and >= 0, got {hyper.learning_rate!r}")
    if np.any(values["clip_norm"] <= 0):
        raise ValueError(f"clip_norm must be > 0 (inf allowed), got {hyper.clip_norm!r}")
    noise_lib.check_noise(values["noise_multiplier"], values["noise_std"], values["clip_norm"])
    for ext in extensions:
        own = ext_lib.values_for(ext, extra)
        lengths |= ext.check(own, params, swept=[name for name in swept if name in own], num_features=num_features)
    if len(lengths) > 1:
        raise ValueError(f"swept fields must share one leading (points) axis, got lengths {sorted(lengths)}")


def _extension_fields(exts: tuple[Extension, ...]) -> dict[str, Any]:
    return {name: spec for name, (_, spec) in ext_lib.field_specs(exts, SCALAR_FIELDS).items()}


def check_clip_method(config: TrainConfig, clip_norm: Any) -> None:
    """``clip_method="none"`` skips per-example clipping, so every clip norm must be ``inf``."""
    if config.clip_method == "none" and np.any(np.isfinite(np.asarray(clip_norm, np.float64))):
        raise ValueError("clip_method='none' computes no per-example gradients: clip_norm must be inf, "
                         f"got {clip_norm!r}")


def check_key(key: Any, name: str = "key", *, stacked: bool = False) -> Array:
    """Host-side check that ``key`` is a PRNG key (``jax.random.key`` or ``jax.random.PRNGKey``),
    or with ``stacked`` a 1-D stack of them (``jax.random.split``); raises ValueError naming it."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        ok = np.ndim(key) == int(stacked)
    else:
        ok = dtype == np.uint32 and np.ndim(key) == 1 + int(stacked)
    if not ok:
        what = "a stack of PRNG keys (jax.random.split)" if stacked else "a PRNG key"
        raise ValueError(f"{name} must be {what}, e.g. from jax.random.key(seed), got "
                         f"{type(key).__name__} of shape {np.shape(key)} and dtype {dtype}")
    return jnp.asarray(key)


def check_data(data: Any, params0: Params, model: Model | None = None) -> tuple[Array, Array]:
    """Host-side checks of ``(x, y)`` and ``params0``; returns them as JAX arrays. ``x`` has a
    leading example axis and any example shape (``(n, d)`` for GLMs, e.g. ``(n, 28, 28, 1)`` for
    a CNN). With ``model``, ``params0`` must fit ``model.init``, ``model.apply`` must take x's
    examples and return a scalar loss per example, and ``y`` must suit ``model.target``
    (:func:`dpprep.models.check_targets`); all checked abstractly, before any compilation."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data must be a pair (x, y)")
    x = check_finite_array(data[0], "x", float32=True)
    if x.ndim < 2:
        raise ValueError(f"x must have a leading example axis and the examples' axes (e.g. (n, d)), "
                         f"got shape {x.shape}")
    y = check_finite_array(data[1], "y", ndim=1, float32=True)
    check_same_length(x, y, "x", "y")
    if x.shape[0] == 0:
        raise ValueError("x must contain at least one example")
    for leaf in jax.tree_util.tree_leaves(params0):
        check_finite_array(leaf, "params0")
    if model is None or model.has_fast_path:
        # GLMs (and model-less callers): params["w"] is (d, k) and x is (n, d).
        first = next((p for p in jax.tree_util.tree_leaves(params0) if np.ndim(p) == 2), None)
        if first is not None and (x.ndim != 2 or np.shape(first)[0] != x.shape[1]):
            has = f"{x.shape[1]} features" if x.ndim == 2 else f"examples of shape {x.shape[1:]}"
            raise ValueError(f"x has {has} but the params expect {np.shape(first)[0]}")
    if model is not None:
        check_params(model, params0)
        check_model_fits(model, params0, x)
    return jnp.asarray(x, jnp.float32), jnp.asarray(check_targets(model, params0, x, y))


def check_model_fits(model: Model, params0: Params, x: Any) -> None:
    """Host-side check (abstract evaluation, nothing computed) that ``model.apply`` takes x's
    examples and ``model.per_example_loss`` returns one scalar per example; ValueError naming
    the problem."""
    example = jax.ShapeDtypeStruct((2, *np.shape(x)[1:]), jnp.float32)
    try:
        out = jax.eval_shape(model.apply, params0, example)
    except Exception as err:  # any tracing error of user code: say where it came from
        raise ValueError(f"model {model.name!r} cannot be applied to examples of shape {np.shape(x)[1:]} "
                         f"with these params: {type(err).__name__}: {err}") from err
    labels = jax.ShapeDtypeStruct((2,), jnp.int32 if model.target == "class" else jnp.float32)
    try:
        losses = jax.eval_shape(model.per_example_loss, params0, example, labels)
    except Exception as err:
        raise ValueError(f"model {model.name!r}: per_example_loss fails on outputs of shape "
                         f"{getattr(out, 'shape', None)}: {type(err).__name__}: {err}") from err
    if getattr(losses, "shape", None) != (2,):
        raise ValueError(f"model {model.name!r}: per_example_loss must return one scalar per example "
                         f"(shape (b,)), got shape {getattr(losses, 'shape', None)} for a batch of 2")


def check_params(model: Model, params0: Params) -> None:
    """Host-side check that ``params0`` has the tree structure and leaf shapes ``model.init``
    gives (traced abstractly, nothing is computed); raises ValueError naming the mismatch."""
    expected = jax.eval_shape(model.init, jax.random.key(0))
    want, got = jax.tree_util.tree_structure(expected), jax.tree_util.tree_structure(params0)
    if want != got:  # type: ignore[operator]  # jax's PyTreeDef stub
        raise ValueError(f"params0 does not fit model {model.name!r}: its structure is {got}, "
                         f"the model's is {want} (build it with model.init)")
    for path, e, p in zip(jax.tree_util.tree_leaves_with_path(expected), jax.tree_util.tree_leaves(expected),
                          jax.tree_util.tree_leaves(params0)):
        if np.shape(p) != e.shape:
            raise ValueError(f"params0{jax.tree_util.keystr(path[0])} has shape {np.shape(p)}, "
                             f"model {model.name!r} expects {e.shape}")


def warn_on_overflow(metrics: dict[str, Array], config: TrainConfig) -> None:
    """Warn when a Poisson draw exceeded the padded batch (see :mod:`dpprep.sampling`)."""
    count = int(np.sum(np.asarray(metrics["overflow"])))
    if count:
        warnings.warn(
            f"{count} Poisson draw(s) exceeded the padded batch and were truncated; the run is within "
            f"the documented TV bound (max_overflow_prob={config.max_overflow_prob}) of ideal Poisson "
            "sampling, whose δ slack (1 + e^ε)·max_overflow_prob make_plan(...).epsilon and .calibrate "
            "already charge: add nothing more to delta (if you accounted the run another way, add "
            "sampling.overflow_delta(epsilon, max_overflow_prob) to its delta)",
            RuntimeWarning, stacklevel=3)


def warn_if_not_finite(tree: Any, what: str) -> None:
    """Warn when a run ended with non-finite values (a learning rate or noise too large for
    float32, a diverging loss): a NaN model should never pass silently."""
    bad = sum(int(np.size(leaf) - np.count_nonzero(np.isfinite(np.asarray(leaf))))
              for leaf in jax.tree_util.tree_leaves(tree) if np.asarray(leaf).dtype.kind == "f")
    if bad:
        warnings.warn(f"{bad} non-finite value(s) in the {what}: the run diverged or overflowed float32 "
                      "(learning rate, noise or feature scale too large?)", RuntimeWarning, stacklevel=3)


def train(config: TrainConfig, params0: Params, data: tuple[Any, Any], key: Array
          ) -> tuple[Params, dict[str, Array]]:
    """Run one training run; returns ``(params, metrics)``.

    Only ``params`` is the differentially private output (with ``iterates="both"`` a dict of
    the last and the averaged iterate). ``metrics`` are non-private diagnostics computed from
    the data and the secret sampling without noise: they must not be released as part of the DP
    output. They hold per-step arrays ``batch_size`` (realised), ``overflow`` (Poisson draw
    larger than the pad), optionally ``clip_fraction`` (share of real examples with norm > C;
    ``track_clip_fraction``), ``loss`` (batch objective before the step; ``track_loss``) and
    ``params`` (iterates; ``track_params``), and the scalar ``stopping_time`` (the number of
    steps that updated the parameters). Its privacy is that of :func:`make_plan` ``(config, n)``.
    Bad inputs raise ``ValueError`` before anything is compiled.
    """
    key = check_key(key)
    x, y = check_data(data, params0, config.model)
    if config.hyper is None:
        raise ValueError("config.hyper is required")
    check_hyper(config.hyper, params0, num_features=x.shape[-1], extensions=config.extensions)
    check_clip_method(config, config.hyper.clip_norm)
    plan = make_plan(config, x.shape[0])
    static = dataclasses.replace(config, hyper=None)
    params, metrics = _run_jit(static, plan, config.hyper, params0, x, y, key)
    warn_on_overflow(metrics, config)
    warn_if_not_finite(params, "trained parameters")
    return params, metrics
