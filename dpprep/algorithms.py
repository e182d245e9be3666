"""Private (and non-private) gradient learners as one pure, jit-once ``lax.scan`` engine.

``train(config, params0, (x, y), key) -> (params, metrics)`` runs, per step ``t``:

1. select a batch (``config.sampling``, see :mod:`dpprep.sampling`):
   - ``"full"``: every example: DP-GD (Hu et al. §2 ``A_GD``; with ``hyper.radius`` and
     ``average_iterates=True`` exactly their projected, averaged DP-GD);
   - ``"poisson"``: each example independently with rate ``q = batch_size/n``: DP-SGD (Abadi et
     al.) as the PLD/RDP accountants analyse it; ``batch_size=1`` is Hu et al.'s
     ``A_SGD-samp`` regime under Poisson sampling;
   - ``"replacement"``: ``batch_size`` indices uniform with replacement (Sun et al.'s
     Algorithm 1; Hu et al.'s analysed ``A_SGD-samp`` is ``batch_size=1``);
   - ``"shuffle"``: a fresh permutation per epoch cut into ``⌈n/B⌉`` batches of size ``B``, the
     last one padded (and still divided by ``B``) when ``B`` does not divide ``n`` (common DP-SGD
     practice and non-private SGD; Poisson amplification does not apply to it);
   - ``"fixed_order"``: record ``t`` at step ``t`` (Hu et al.'s DP-FGD when ``steps`` is given;
     DP-SGD by iteration when ``steps`` is None: stop at ``T ~ Unif{1..n−κ+1}``). Their
     amplification-by-iteration analysis (contractive noisy iteration) assumes plain projected
     SGD with contractive steps: a convex, L-Lipschitz, β-smooth loss (β including the
     regulariser), learning rate ``η ≤ 2/β`` and no binding clipping (``C ≥ L``); momentum, Adam
     or any other stateful ``config.optimizer`` voids it, as does ``η > 2/β``;
2. sum the clipped per-example gradients (:mod:`dpprep.clipping`; ``clip_norm = inf``: none);
3. add Gaussian noise to the sum (:mod:`dpprep.noise` for the std convention, per-coordinate
   scales included) and divide by the fixed normaliser ``N``: the *expected* batch size
   ``q·n = batch_size`` (poisson), ``batch_size`` (replacement, shuffle), ``n`` (full), 1
   (fixed_order); then add the gradient of the model's (data-independent) regulariser;
4. update with an optax transformation scaled by the learning rate, then project onto the L2
   ball of radius ``hyper.radius`` (``inf``: no projection).

Non-private training is the same code with ``noise_multiplier=0`` and ``clip_norm=inf``.

**Only the returned parameters are the private output.** ``metrics`` are diagnostics computed
from the data and the secret randomness without noise: ``loss`` and ``clip_fraction`` (opt-in,
``track_loss`` / ``track_clip_fraction``) are plain functions of the batch, ``batch_size`` and
``overflow`` expose the Poisson draws whose secrecy amplification relies on, ``params`` are the
intermediate iterates (hidden in the amplification-by-iteration and averaged-iterate analyses) and
``stopping_time`` is the random stop those analyses average over. None of them may be released as
part of the DP output.

Static choices (shapes, steps, sampling, optimizer) live in the frozen :class:`TrainConfig`; the
floats that can be swept live in :class:`Hyper`, a pytree whose leaves are traced, so
:func:`dpprep.sweeps.sweep` can ``vmap`` over seeds, learning rates, noise multipliers, clip norms
and noise scales in one compiled call.

**Optimizer convention.** ``config.optimizer`` gives the update *direction* at unit learning
rate (default ``optax.sgd(1.0)``); the applied update is ``hyper.learning_rate × updates``. Build
optimizers with ``learning_rate=1.0`` (e.g. ``optax.adam(1.0)``): for optax's SGD, momentum, Adam
and AdamW the learning rate is a final multiplicative factor, so this is exactly the optimizer at
``learning_rate`` while keeping the rate traceable.

Privacy accounting is separate (:mod:`dpprep.accounting.dp`): the step count is
:func:`num_steps`, the Poisson rate ``batch_size/n``; with Poisson sampling add
``sampling.overflow_delta(ε, max_overflow_prob)`` to δ (see :mod:`dpprep.sampling`).
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

from dpprep import clipping, sampling
from dpprep import noise as noise_lib
from dpprep.models import Array, Model, Params, check_targets
from dpprep.validation import (
    check_finite_array,
    check_positive_int,
    check_probability,
    check_same_length,
)

SAMPLINGS = ("full", "poisson", "replacement", "shuffle", "fixed_order")
SCALAR_FIELDS = ("learning_rate", "noise_multiplier", "clip_norm", "radius")  # Hyper's float fields


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Hyper:
    """Hyperparameters that may be traced (and so vmapped over by sweeps).

    Attributes:
      learning_rate: step size (multiplies the optimizer's unit-rate update).
      noise_multiplier: ``z``; noise std on the clipped-gradient sum is ``z·C̄·scale``.
      clip_norm: per-example clip bound ``C`` (``inf``: no clipping).
      noise_scales: ``None`` (isotropic) or a pytree matching the params (see :mod:`dpprep.noise`).
      radius: radius of the L2 ball (global norm over all parameter leaves, bias included) the
        iterates are projected onto after each step (``inf``: none).
    """

    learning_rate: Any
    noise_multiplier: Any = 0.0
    clip_norm: Any = math.inf
    noise_scales: Any = None
    radius: Any = math.inf


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static description of a run (hashable; one compilation per config and data shape).

    Attributes:
      model: the :class:`~dpprep.models.Model`. Compilations are cached on the config, whose
        model and optimizer hash by identity: reuse the same objects to reuse a compilation.
      hyper: the traced hyperparameters.
      sampling: one of ``SAMPLINGS`` (module docstring).
      batch_size: expected (poisson) or fixed (replacement, shuffle) batch size.
      steps: number of steps; for "fixed_order", the fixed ``T <= n`` (DP-FGD), or None for the
        random stopping time of DP-SGD by iteration (both analysed for plain SGD with contractive
        steps only: convex, smooth loss, ``η ≤ 2/β``; see the module docstring).
      epochs: alternative to ``steps``: ``⌈E·n/B⌉`` steps (poisson, replacement), ``E·⌈n/B⌉``
        (shuffle, integer E), ``E`` (full).
      optimizer: unit-learning-rate optax transformation (default ``optax.sgd(1.0)``).
      average_iterates: return the mean of the iterates ``θ_1..θ_T`` instead of ``θ_T``.
      clip_method: "auto", "fast" or "vmap" (:func:`dpprep.clipping.clipped_grad_sum`).
      track_loss: record the (masked) batch loss per step (one extra forward pass).
      track_clip_fraction: record the share of the batch's real examples whose gradient norm
        exceeded ``C``. Like every metric it is not private (module docstring).
      track_params: record every iterate ``θ_t`` (memory ``T × |θ|``; for tests and analysis).
      kappa: ``κ`` of the stopping time ``T ~ Unif{1..n−κ+1}`` (fixed_order with steps=None).
      max_overflow_prob: bound on the probability that any Poisson draw of the run exceeds the
        padded batch (:func:`dpprep.sampling.poisson_pad_size`).
    """

    model: Model
    hyper: Hyper | None = None
    sampling: str = "poisson"
    batch_size: int | None = None
    steps: int | None = None
    epochs: float | None = None
    optimizer: optax.GradientTransformation | None = None
    average_iterates: bool = False
    clip_method: str = "auto"
    track_loss: bool = False
    track_clip_fraction: bool = False
    track_params: bool = False
    kappa: int = 1
    max_overflow_prob: float = 1e-10


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Host-side quantities derived from a config and the dataset size (all static)."""

    n: int
    steps: int  # scan length
    normaliser: float
    pad: int  # padded batch size (poisson), batch size (replacement, shuffle), unused otherwise
    epochs: int  # permutations to draw (shuffle)


def num_steps(config: TrainConfig, n: int) -> int:
    """Scan length of a run on ``n`` examples (for fixed_order with random stop: ``n − κ + 1``)."""
    return _plan(config, n).steps


def _plan(config: TrainConfig, n: int) -> _Plan:
    n = check_positive_int(n, "n")
    if config.sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {config.sampling!r}")
    clipping.check_method(config.clip_method, "clip_method")
    check_probability(config.max_overflow_prob, "max_overflow_prob")
    if config.steps is not None and config.epochs is not None:
        raise ValueError("give steps or epochs, not both")
    s = config.sampling
    if s in ("poisson", "replacement", "shuffle"):
        if config.batch_size is None:
            raise ValueError(f"batch_size is required for sampling={s!r}")
        b = check_positive_int(config.batch_size, "batch_size")
        if s != "replacement":
            check_probability(b / n, "q (= batch_size / n)")
    if s == "fixed_order":
        if config.epochs is not None:
            raise ValueError("fixed_order takes steps (or None for the random stopping time), not epochs")
        if config.steps is None:
            kappa = check_positive_int(config.kappa, "kappa")
            if kappa > n:
                raise ValueError(f"kappa must be <= n = {n}, got {kappa}")
            return _Plan(n, n - kappa + 1, 1.0, 1, 0)
        steps = check_positive_int(config.steps, "steps")
        if steps > n:
            raise ValueError(f"steps must be <= n = {n} for fixed_order (one record per step), got {steps}")
        return _Plan(n, steps, 1.0, 1, 0)
    if config.steps is None and config.epochs is None:
        raise ValueError("give steps or epochs")
    if s == "full":
        steps = (check_positive_int(config.steps, "steps") if config.steps is not None
                 else check_positive_int(config.epochs, "epochs"))
        return _Plan(n, steps, float(n), n, 0)
    b = config.batch_size
    if s == "shuffle":
        per_epoch = sampling.steps_per_epoch(n, b)
        if config.epochs is not None:
            steps = check_positive_int(config.epochs, "epochs") * per_epoch
        else:
            steps = check_positive_int(config.steps, "steps")
        return _Plan(n, steps, float(b), b, -(-steps // per_epoch))
    steps = (check_positive_int(config.steps, "steps") if config.steps is not None
             else sampling.poisson_steps(n, b, config.epochs))
    if s == "replacement":
        return _Plan(n, steps, float(b), b, 0)
    pad = sampling.poisson_pad_size(n, b / n, steps, max_overflow_prob=config.max_overflow_prob)
    return _Plan(n, steps, float(b), pad, 0)


def _project(params: Params, radius: Array) -> Params:
    norm = jnp.sqrt(sum(jnp.sum(p * p) for p in jax.tree_util.tree_leaves(params)))
    factor = jnp.minimum(1.0, radius / jnp.maximum(norm, 1e-30))
    return jax.tree_util.tree_map(lambda p: p * factor, params)


def _run(config: TrainConfig, plan: _Plan, hyper: Hyper, params0: Params, x: Array, y: Array,
         key: Array) -> tuple[Params, dict[str, Array]]:
    """The pure training function (``config``/``plan`` static; everything else traceable)."""
    model, s, n = config.model, config.sampling, plan.n
    opt = config.optimizer if config.optimizer is not None else optax.sgd(1.0)
    k_sample, k_noise, k_stop = jax.random.split(key, 3)
    lr = jnp.asarray(hyper.learning_rate, jnp.float32)
    clip = jnp.asarray(hyper.clip_norm, jnp.float32)
    steps = jnp.arange(plan.steps, dtype=jnp.int32)
    if s == "shuffle":
        idx_all, mask_all = sampling.shuffled_batches(k_sample, n, plan.pad, plan.epochs)
        xs = (steps, idx_all[: plan.steps], mask_all[: plan.steps])
    else:
        xs = (steps, None, None)
    stop = (sampling.stopping_time(k_stop, n, config.kappa)
            if s == "fixed_order" and config.steps is None else jnp.int32(plan.steps))

    def select(t, idx, mask):
        """(xb, yb, mask or None, realised size, overflow flag)."""
        if s == "full":
            return x, y, None, jnp.int32(n), jnp.bool_(False)
        if s == "fixed_order":
            return x[t][None], y[t][None], None, jnp.int32(1), jnp.bool_(False)
        if s == "replacement":
            idx = jax.random.randint(jax.random.fold_in(k_sample, t), (plan.pad,), 0, n)
            return x[idx], y[idx], None, jnp.int32(plan.pad), jnp.bool_(False)
        if s == "poisson":
            idx, mask, size, overflow = sampling.poisson_batch(
                jax.random.fold_in(k_sample, t), n, plan.normaliser / n, plan.pad)
            return x[idx], y[idx], mask, size, overflow
        return x[idx], y[idx], mask, jnp.sum(mask).astype(jnp.int32), jnp.bool_(False)

    def step(carry, inputs):
        params, opt_state, iterate_sum = carry
        t, idx, mask = inputs
        xb, yb, mask, size, overflow = select(t, idx, mask)
        gsum, norms = clipping.clipped_grad_sum(model, params, xb, yb, clip, mask, method=config.clip_method)
        noisy = noise_lib.add_noise(jax.random.fold_in(k_noise, t), gsum, hyper.noise_multiplier,
                                    clip, hyper.noise_scales)
        grad = jax.tree_util.tree_map(lambda g: g / plan.normaliser, noisy)
        if model.regularizer is not None:
            grad = jax.tree_util.tree_map(jnp.add, grad, jax.grad(model.regularizer)(params))
        updates, new_opt_state = opt.update(grad, opt_state, params)
        new_params = jax.tree_util.tree_map(lambda p, u: p + lr * u, params, updates)
        new_params = _project(new_params, jnp.asarray(hyper.radius, jnp.float32))
        active = t < stop
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(active, a, b), new, old)
        new_params, new_opt_state = keep(new_params, params), keep(new_opt_state, opt_state)
        if config.average_iterates:
            iterate_sum = jax.tree_util.tree_map(
                lambda a, p: a + jnp.where(active, p, 0.0), iterate_sum, new_params)
        out = {"batch_size": size, "overflow": overflow}
        if config.track_clip_fraction:
            clipped = (norms > clip).astype(jnp.float32)
            real = jnp.ones_like(clipped) if mask is None else mask
            out["clip_fraction"] = jnp.sum(clipped * real) / jnp.maximum(jnp.sum(real), 1.0)
        if config.track_loss:
            out["loss"] = model.loss(params, xb, yb, mask)
        if config.track_params:
            out["params"] = new_params
        return (new_params, new_opt_state, iterate_sum), out

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params0) if config.average_iterates else None
    (last, _, iterate_sum), metrics = jax.lax.scan(step, (params0, opt.init(params0), zeros), xs)
    metrics["stopping_time"] = stop
    if config.average_iterates:
        return jax.tree_util.tree_map(lambda a: a / stop, iterate_sum), metrics
    return last, metrics


_run_jit = jax.jit(_run, static_argnums=(0, 1))


def make_train_fn(config: TrainConfig, n: int) -> Callable[..., tuple[Params, dict[str, Array]]]:
    """The pure function ``(hyper, params0, x, y, key) -> (params, metrics)`` of a run on ``n``
    examples, for callers that ``jit``/``vmap`` it themselves (e.g. over data as well). It does
    not validate its inputs: use :func:`check_data`, :func:`check_hyper` and :func:`check_key`
    first."""
    plan = _plan(config, n)
    return functools.partial(_run, dataclasses.replace(config, hyper=None), plan)


def check_hyper(hyper: Hyper, params: Params, *, swept: Collection[str] = ()) -> None:
    """Host-side checks of hyperparameter values; raises ValueError naming the field.

    Fields named in ``swept`` hold grid values (non-empty 1-D sequences; ``noise_scales``: a
    pytree whose leaves share a leading grid axis), every value of which is checked; every other
    float field must be a scalar (it would otherwise broadcast silently).
    """
    if not isinstance(hyper, Hyper):
        raise ValueError(f"config.hyper must be a Hyper, got {type(hyper).__name__}")
    for name in SCALAR_FIELDS:
        shape = np.shape(getattr(hyper, name))
        if name in swept and (len(shape) != 1 or shape[0] == 0):
            raise ValueError(f"{name} values must be a non-empty 1-D sequence, got shape {shape}")
        if name not in swept and shape != ():
            raise ValueError(f"{name} must be a scalar, got shape {shape}; "
                             "to vary it, make it an axis of dpprep.sweeps.sweep")

    def values(v, name):
        arr = np.asarray(v, dtype=np.float64)
        if np.any(np.isnan(arr)):
            raise ValueError(f"{name} must not be NaN")
        return arr

    lr = values(hyper.learning_rate, "learning_rate")
    if np.any(~np.isfinite(lr)) or np.any(lr < 0):
        raise ValueError(f"learning_rate must be finite and >= 0, got {hyper.learning_rate!r}")
    z = values(hyper.noise_multiplier, "noise_multiplier")
    if np.any(~np.isfinite(z)) or np.any(z < 0):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {hyper.noise_multiplier!r}")
    for name in ("clip_norm", "radius"):
        v = values(getattr(hyper, name), name)
        if np.any(v <= 0):
            raise ValueError(f"{name} must be > 0 (inf allowed), got {getattr(hyper, name)!r}")
    scales = hyper.noise_scales
    if "noise_scales" in swept:
        lengths = {np.shape(leaf)[0] if np.ndim(leaf) else 0 for leaf in jax.tree_util.tree_leaves(scales)}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError("every noise_scales leaf needs the same non-empty leading (grid) axis")
        for i in range(lengths.pop()):  # each grid value must match the params on its own
            noise_lib.check_scales(params, jax.tree_util.tree_map(lambda v: np.asarray(v)[i], scales))
    else:
        noise_lib.check_scales(params, scales)


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
    """Host-side checks of ``(x, y)`` and ``params0``; returns them as JAX arrays. With ``model``,
    ``y`` is also checked against ``model.target`` (:func:`dpprep.models.check_targets`)."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise ValueError("data must be a pair (x, y)")
    x = check_finite_array(data[0], "x", ndim=2)
    y = check_finite_array(data[1], "y", ndim=1)
    check_same_length(x, y, "x", "y")
    if x.shape[0] == 0:
        raise ValueError("x must contain at least one example")
    for leaf in jax.tree_util.tree_leaves(params0):
        check_finite_array(leaf, "params0")
    first = next((p for p in jax.tree_util.tree_leaves(params0) if np.ndim(p) == 2), None)
    if first is not None and np.shape(first)[0] != x.shape[1]:
        raise ValueError(f"x has {x.shape[1]} features but the params expect {np.shape(first)[0]}")
    return jnp.asarray(x, jnp.float32), jnp.asarray(check_targets(model, params0, x, y))


def warn_on_overflow(metrics: dict[str, Array], config: TrainConfig) -> None:
    """Warn when a Poisson draw exceeded the padded batch (see :mod:`dpprep.sampling`)."""
    count = int(np.sum(np.asarray(metrics["overflow"])))
    if count:
        warnings.warn(
            f"{count} Poisson draw(s) exceeded the padded batch and were truncated; the run is within "
            f"the documented TV bound (max_overflow_prob={config.max_overflow_prob}) of ideal Poisson "
            "sampling, so add sampling.overflow_delta(epsilon, max_overflow_prob) to delta",
            RuntimeWarning, stacklevel=3)


def train(config: TrainConfig, params0: Params, data: tuple[Any, Any], key: Array
          ) -> tuple[Params, dict[str, Array]]:
    """Run one training run; returns ``(params, metrics)``.

    Only ``params`` is the differentially private output. ``metrics`` are non-private
    diagnostics computed from the data and the secret sampling without noise: they must not be
    released as part of the DP output. They hold per-step arrays ``batch_size`` (realised),
    ``overflow`` (Poisson draw larger than the pad), optionally ``clip_fraction`` (share of real
    examples with norm > C; ``track_clip_fraction``), ``loss`` (batch objective before the step;
    ``track_loss``) and ``params`` (iterates; ``track_params``), and the scalar
    ``stopping_time`` (the number of steps that updated the parameters).
    Bad inputs raise ``ValueError`` before anything is compiled.
    """
    key = check_key(key)
    x, y = check_data(data, params0, config.model)
    if config.hyper is None:
        raise ValueError("config.hyper is required")
    check_hyper(config.hyper, params0)
    plan = _plan(config, x.shape[0])
    static = dataclasses.replace(config, hyper=None)
    params, metrics = _run_jit(static, plan, config.hyper, params0, x, y, key)
    warn_on_overflow(metrics, config)
    return params, metrics
