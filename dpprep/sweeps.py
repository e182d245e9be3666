"""Many runs as one compiled call: ``vmap`` over seeds and over a flat axis of points.

Batching runs pays where it turns many small products into wide ones (the GLM fast path, any
model on an accelerator); a network's per-example gradients already fill a CPU, so there a sweep
runs its seeds × points one after the other through one compiled run (:func:`vmaps_runs`; the
same runs and results either way, and still one compilation).

:func:`sweep_points` trains ``keys × points``: each point is a set of
:class:`~dpprep.algorithms.Hyper` values (learning rate, noise level, clip norm, and the traced
fields of the config's extensions, e.g. a feature transform or noise scales) given as arrays with
a shared leading axis, so paired values (e.g. a private mean's noise with the matching z) are one
point, not a product. It returns results stacked
with leading axes ``(seeds, points)``, equal (to float rounding of batched matrix products) to
calling :func:`dpprep.algorithms.train` once per seed and point with the same key. Runs that
share a key share their batches and noise draws (common random numbers), exactly as the separate
calls would; with a GLM and per-point feature transforms (:mod:`dpprep.features`), one gathered
batch and one matrix product serve every point of a seed.

* ``per_seed=(name, …)``: those fields' values carry a leading seed axis before the point axis
  (``(seeds, points, …)``), e.g. a private feature mean, whose noise differs per seed but which
  still enters the shared batch as a rank-1 correction per (seed, point).
* ``eval_data=(x_test, y_test)`` evaluates every trained model inside the compiled call (mean
  loss, and accuracy for classifiers, of the model as the run sees it:
  :func:`dpprep.algorithms.run_model`, e.g. on transformed test features).
* The point axis is cut into chunks that fit ``memory_budget`` (or ``chunk_size``); every chunk
  has the same shape, so one compilation serves them all.
* ``max_steps`` and ``first_chunk_only`` are for checking that a large grid runs before paying
  for it (``run_all.py --validate``): the real plan, chunk size and compiled shapes, fewer steps
  and one chunk; the values they return are meaningless.
* ``devices`` shards each chunk's points over several devices (a 1-D ``jax.sharding`` mesh with
  Auto axes); the result equals the one-device result.
* :func:`sweep` is the Cartesian grid ``keys × axis_1 × axis_2 × …`` as a thin layer over it;
  :class:`Group` names one static group (batch size, epochs, sampler) of a grid; the experiments
  drive many through their results store (``experiments.results.run_groups``).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.typing import ArrayLike
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from dpprep import algorithms, models
from dpprep.algorithms import (
    TrainConfig,
    Traced,
    _run,
    check_data,
    check_hyper,
    checked_plan,
    current_names,
    run_model,
    static_config,
    sweepable_fields,
    traced,
    warn_if_not_finite,
    warn_on_nonfinite,
    warn_on_overflow,
    with_values,
)
from dpprep.extensions import field_specs
from dpprep.models import Array, Inputs, Params, PyTree
from dpprep.plan import DPPlan, ExecutionPlan
from dpprep.validation import check_finite_array, check_key, check_positive_int

#: Default memory a chunk of points may use (bytes); see :func:`points_per_chunk`.
MEMORY_BUDGET = 2 * 2**30


class SweepResult(NamedTuple):
    """Leading axes ``(seeds, points)`` on every leaf. ``params`` is the private output, each
    point's at ``epsilon[p]`` (``(points,)``: the plan's account of that point's noise, ``(seeds,
    points)`` when a per-seed field carries the noise; ``inf`` for a non-private plan) and
    ``delta`` (the plan's); ``metrics`` are the non-private
    diagnostics of :func:`dpprep.algorithms.train`; ``evaluation`` (with ``eval_data``) holds
    ``loss`` and, for classifiers, ``accuracy`` (under ``"last"``/``"average"`` keys when the
    config asks for both iterates). ``guarantee``: one line, the plan's
    (:func:`dpprep.algorithms.guarantee`: what every point's ε rests on, any unverified extension
    included; a point that sets the noise or clip bound is accounted at its ``epsilon[p]``)."""

    params: Params
    metrics: dict[str, Array]
    evaluation: dict[str, Any] | None
    epsilon: np.ndarray | None = None
    delta: float | None = None
    guarantee: str | None = None


def evaluate(model: models.Model, params: Params, x: Array, y: Array) -> dict[str, Array]:
    """Mean loss (and accuracy for classifiers) of ``params`` on ``(x, y)``."""
    losses = model.per_example_loss(params, x, y)
    out = {"loss": jnp.mean(losses)}
    if model.task == "classification":
        logits = model.apply(params, x)
        pred = jnp.argmax(logits, axis=-1) if logits.ndim == 2 else (logits > 0).astype(jnp.int32)
        out["accuracy"] = jnp.mean(pred == y)
    return out


def _as_values(config: TrainConfig, points: Mapping[str, Any]) -> dict[str, Any]:
    """``points`` with every name checked against the config's sweepable fields and sequences made
    arrays (a list is a pytree of scalars); pytree fields (e.g. noise scales) are kept as given."""
    points = current_names(points, config.extensions, "points: ")
    known = sweepable_fields(config)
    unknown = sorted(set(points) - set(known))
    if unknown:
        raise ValueError(
            f"cannot sweep {unknown}; sweepable fields of this config are {list(known)}"
        )
    pytrees = {name for name, (_, spec) in field_specs(config.extensions).items() if spec.pytree}
    return {name: value if name in pytrees else np.asarray(value) for name, value in points.items()}


def _point_count(points: Mapping[str, Any]) -> int:
    leaves = [leaf for value in points.values() for leaf in jax.tree_util.tree_leaves(value)]
    return int(np.shape(leaves[0])[0]) if leaves and np.ndim(leaves[0]) else 0


def point_epsilons(plan: DPPlan, charged: dict[str, Any], total: int) -> np.ndarray:
    """Each point's ε: the plan's account at the point's (noise-factor adjusted) multiplier, once
    per distinct value; ``inf`` everywhere for a non-private plan."""
    if not plan.private:
        return np.full(total, np.inf)
    z = np.broadcast_to(np.asarray(charged["noise_multiplier"], np.float64), (total,)).tolist()
    events = charged["fixed_events"]
    events = events if len(events) == total else events * total
    return np.array([plan.epsilon_at(value, fixed_events=e) for value, e in zip(z, events)])


def vmaps_runs(
    config: TrainConfig, mesh: jax.sharding.Mesh | None = None, *, convolves: bool = True
) -> bool:
    """Whether a sweep batches (``vmap``) its runs into one computation (True) or runs them one
    after the other through one compiled run (False; the same runs, results and compilations).

    Batching pays where it turns many small products into wide ones: the GLM fast path and
    unclipped runs (much faster than a loop of runs), any model on an accelerator, a sweep sharded
    over ``devices`` (whose points must be batched to be split), and on a CPU a network without
    convolutions clipped by layer taps (:mod:`dpprep.taps`: a flax MLP's 16-run sweep took 0.30 s
    batched against 0.82 s for a loop of :func:`~dpprep.algorithms.train` calls,
    ``benchmarks/real_models.py``). A network that ``convolves``, or one clipped by ``vmap(grad)``,
    already fills a CPU's cores with one run (the tanh CNN's batched sweep: 6.04 s against 4.71 s
    in the same run; the MLP's on the vmap path, measured before the taps: 3.56 s against 1.69 s),
    so there the runs go one after the other."""
    if mesh is not None or jax.default_backend() != "cpu":
        return True
    if (
        config.model.has_fast_path and config.clip_method in ("auto", "fast")
    ) or config.clip_method == "none":
        return True
    return not convolves and config.clip_method in ("auto", "taps")


class _PointFns(NamedTuple):
    """One sweep point's run (``values``: the swept names' values) as the whole run, and as the
    pieces of a host loop over its steps (:func:`dpprep.algorithms.run_in_calls`)."""

    whole: Callable[..., Any]  # (base, params0, x, y, key, values, x_eval, y_eval) -> outputs
    begin: Callable[..., Any]  # (base, params0, x, y, key, values) -> state
    advance: Callable[..., Any]  # (base, x, y, key, values, state, t0, count) -> state
    end: Callable[..., Any]  # (base, values, state, x_eval, y_eval) -> outputs


def _point_fns(
    config: TrainConfig,
    plan: ExecutionPlan,
    names: tuple[str, ...],
    with_eval: bool,
    with_params: bool,
) -> _PointFns:
    def outputs(hyper, params, metrics, x_eval, y_eval):
        evaluation = None
        if with_eval:
            score = lambda p: evaluate(run_model(config, hyper), p, x_eval, y_eval)  # noqa: E731
            evaluation = (
                {k: score(v) for k, v in params.items()}
                if config.iterates == "both"
                else score(params)
            )
        return (params if with_params else None), metrics, evaluation

    hyper_of = lambda base, values: with_values(base, dict(zip(names, values)))  # noqa: E731

    def whole(base, params0, x, y, key, values, x_eval, y_eval):
        hyper = hyper_of(base, values)
        return outputs(hyper, *_run(config, plan, hyper, params0, x, y, key), x_eval, y_eval)

    def begin(base, params0, x, y, key, values):
        return algorithms._begin_state(config, plan, hyper_of(base, values), params0, x, y, key)

    def advance(base, x, y, key, values, state, t0, count):
        return algorithms._advance_state(
            config, plan, hyper_of(base, values), x, y, key, state, t0, count
        )

    def end(base, values, state, x_eval, y_eval):
        return outputs(
            hyper_of(base, values), *algorithms._end_state(config, state), x_eval, y_eval
        )

    return _PointFns(whole, begin, advance, end)


class _Compiled(NamedTuple):
    """A sweep group's compiled runner and the jitted functions it calls (whose compilations
    :meth:`_cache_size` counts)."""

    run: Callable[..., Any]
    jitted: tuple[Any, ...]

    def __call__(self, *args: Any) -> Any:
        return self.run(*args)

    def _cache_size(self) -> int:
        return sum(fn._cache_size() for fn in self.jitted)


def _compiled(
    config: TrainConfig,
    plan: ExecutionPlan,
    names: tuple[str, ...],
    with_eval: bool,
    with_params: bool,
    per_seed: tuple[bool, ...] | None = None,
    params0_per_seed: bool = False,
    per_call: int | None = None,
    batched: bool = True,
) -> _Compiled:
    """The ``(hyper_base, params0, x, y, keys, values, x_eval, y_eval) -> results`` of one static
    group, results with leading axes ``(seeds, points)`` (cached: groups that share a config, plan
    and swept names share a compilation). ``batched``: the runs batched (``vmap``) into one
    computation,
    else one compiled run called per seed and point (:func:`vmaps_runs`); ``per_call``: steps
    per compiled call (:func:`dpprep.algorithms.steps_per_call`)."""
    return _compiled_group(
        config, plan, names, with_eval, with_params, per_seed, params0_per_seed, per_call, batched
    )


@functools.lru_cache(maxsize=64)
def _compiled_group(
    config: TrainConfig,
    plan: ExecutionPlan,
    names: tuple[str, ...],
    with_eval: bool,
    with_params: bool,
    per_seed: tuple[bool, ...] | None,
    params0_per_seed: bool,
    per_call: int | None,
    batched: bool,
) -> _Compiled:
    fns = _point_fns(config, plan, names, with_eval, with_params)
    seeded = tuple(0 if flag else None for flag in per_seed or (False,) * len(names))
    p0 = 0 if params0_per_seed else None

    def over(fn, point_axes, seed_axes):
        return jax.vmap(jax.vmap(fn, in_axes=point_axes), in_axes=seed_axes) if batched else fn

    whole = jax.jit(
        over(
            fns.whole, (None,) * 5 + (0, None, None), (None, p0, None, None, 0, seeded, None, None)
        )
    )
    begin = jax.jit(over(fns.begin, (None,) * 5 + (0,), (None, p0, None, None, 0, seeded)))
    advance = jax.jit(
        lambda base, x, y, key, values, state, t0, count: over(
            functools.partial(fns.advance, count=count),
            (None, None, None, None, 0, 0, None),
            (None, None, None, 0, seeded, 0, None),
        )(base, x, y, key, values, state, t0),
        static_argnames="count",
        donate_argnames="state",
    )
    end = jax.jit(over(fns.end, (None, 0, 0, None, None), (None, seeded, 0, None, None)))

    def run(base, params0, x, y, key, values, x_eval, y_eval):
        if per_call is None or per_call >= plan.steps:
            return whole(base, params0, x, y, key, values, x_eval, y_eval)
        return algorithms.run_in_calls(
            lambda: begin(base, params0, x, y, key, values),
            lambda state, t0, count: advance(base, x, y, key, values, state, t0, count=count),
            lambda state: end(base, values, state, x_eval, y_eval),
            plan.steps,
            per_call,
        )

    def batched_run(base, params0, x, y, keys, values, x_eval, y_eval):
        # ``values`` as a tuple, whatever sequence the caller passes, to match the in_axes prefix.
        return run(base, params0, x, y, keys, tuple(values), x_eval, y_eval)

    def one_by_one(base, params0, x, y, keys, values, x_eval, y_eval):
        points = {
            np.shape(leaf)[1 if flag is not None else 0]
            for value, flag in zip(values, seeded)
            for leaf in jax.tree_util.tree_leaves(value)
        }
        (count,) = points
        outs = []
        for s in range(keys.shape[0]):
            start = jax.tree_util.tree_map(lambda a: a[s], params0) if params0_per_seed else params0
            for p in range(count):
                point = tuple(
                    jax.tree_util.tree_map(lambda v: v[s, p] if flag is not None else v[p], value)
                    for value, flag in zip(values, seeded)
                )
                outs.append(run(base, start, x, y, keys[s], point, x_eval, y_eval))
        stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *outs)
        return jax.tree_util.tree_map(
            lambda a: a.reshape(keys.shape[0], count, *a.shape[1:]), stacked
        )

    return _Compiled(batched_run if batched else one_by_one, (whole, begin, advance, end))


def points_per_chunk(
    config: TrainConfig,
    plan: ExecutionPlan,
    params0: Params,
    num_features: int | tuple[int, ...] | dict[str, Any],
    num_seeds: int,
    *,
    memory_budget: float = MEMORY_BUDGET,
    eval_rows: int = 0,
) -> int:
    """How many points of ``num_seeds`` seeds fit in ``memory_budget`` bytes (at least 1;
    ``num_features``:
    an example's shape, or for dict inputs a dict of one abstract example of each input): a
    float32 estimate of the per-point working set (logits/residuals of the padded batch, a
    handful of parameter-sized buffers, tracked iterates, per-example gradients on the vmap path,
    test logits) against what each seed shares (the gathered batch, shuffled permutations)."""
    memory_budget = _check_budget(memory_budget)
    size = sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params0))
    # dict inputs: one abstract example of each (their shape and dtype)
    if isinstance(num_features, dict):
        example: Any = num_features
        num_features = sum(int(np.prod(leaf.shape[1:])) for leaf in num_features.values())
    else:
        example_shape = tuple(num_features) if isinstance(num_features, tuple) else (num_features,)
        example = jax.ShapeDtypeStruct((1, *example_shape), jnp.float32)
        num_features = int(np.prod(example_shape))  # values per example
    out = jax.eval_shape(config.model.apply, params0, example)
    k = int(np.prod(out.shape[1:])) or 1
    per_point = 4 * (6 * plan.pad * k + 10 * size + 2 * eval_rows * k + 8 * plan.steps)
    if config.track_params:
        per_point += 4 * plan.steps * size
    fast = (
        config.model.has_fast_path and config.clip_method in ("auto", "fast")
    ) or config.clip_method == "none"
    if not fast:
        per_point += 4 * 3 * plan.pad * size
    shared = 4 * (2 * plan.pad * num_features + plan.epochs * plan.n)
    room = memory_budget / num_seeds - shared
    return max(1, int(room // per_point))


def _check_budget(memory_budget: float) -> float:
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, float, np.number)):
        raise TypeError(
            f"memory_budget must be a number of bytes, got {type(memory_budget).__name__}"
        )
    if not (np.isfinite(memory_budget) and memory_budget > 0):
        raise ValueError(
            f"memory_budget must be a finite number of bytes > 0, got {memory_budget!r}"
        )
    return float(memory_budget)


def _check_on_chunk(on_chunk: Callable[[int, int], None] | None) -> None:
    if on_chunk is not None and not callable(on_chunk):
        raise TypeError(
            "on_chunk must be a callable on_chunk(done, chunks) or None, got"
            f" {type(on_chunk).__name__}"
        )


def _replicate(tree: PyTree, sharding: NamedSharding) -> PyTree:
    """``jax.device_put(tree, sharding)``, except that PRNG key arrays travel as their key data.

    Why: with several processes the mesh holds other processes' devices, and jax 0.10's
    ``device_put`` onto such a sharding accepts numpy arrays and uncommitted ``ArrayImpl`` only;
    a typed key array is refused ("must be a Device or a Sharding which represents addressable
    devices"). Its uint32 key data goes through, and re-wrapping it is exact."""

    def put(leaf: ArrayLike) -> Array:
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            data = jax.device_put(jax.random.key_data(leaf), sharding)
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
        return jax.device_put(leaf, sharding)

    return jax.tree_util.tree_map(put, tree)


def _mesh(devices: int | Sequence[Any] | None) -> jax.sharding.Mesh | None:
    if devices is None:
        return None
    if isinstance(devices, int):
        available = jax.devices()
        if not 1 <= devices <= len(available):
            raise ValueError(
                f"devices must be between 1 and {len(available)} (jax.devices()), got {devices}"
            )
        devices = available[:devices]
    devices = list(devices)
    if len(devices) < 2:
        return None
    # Auto axes: with Explicit ones jax 0.10 refuses the batch gather under sharding-in-types.
    return jax.make_mesh((len(devices),), ("points",), axis_types=(AxisType.Auto,), devices=devices)


def _limit_steps(plan: ExecutionPlan, max_steps: int | None) -> ExecutionPlan:
    """``plan`` cut to at most ``max_steps`` steps (None: unchanged); its batch size, padding and
    sampler stay, so the compiled call has the same array shapes (a shorter loop)."""
    if max_steps is None:
        return plan
    return dataclasses.replace(
        plan, steps=min(plan.steps, check_positive_int(max_steps, "max_steps"))
    )


def _check_eval_data(
    eval_data: tuple[Inputs, ArrayLike] | None,
    params0: Params,
    model: models.Model,
    example_shape: tuple[int, ...] | dict[str, tuple[int, ...]],
    data_name: str,
):
    """``(x_eval, y_eval)`` checked against the model and the training examples' shape, or ``(None,
    None)``."""
    if eval_data is None:
        return None, None
    models.check_has_rows(eval_data[0], "eval_data's x")
    x_eval, y_eval = check_data(eval_data, params0, model)
    if algorithms.example_shape(x_eval) != example_shape:
        raise ValueError(
            f"eval_data has examples of shape {algorithms.example_shape(x_eval)}, {data_name} has "
            f"{example_shape}"
        )
    return x_eval, y_eval


def _over_chunks(
    call: Callable[[np.ndarray], PyTree],
    total: int,
    chunk_size: int,
    *,
    axis: int,
    on_chunk: Callable[[int, int], None] | None,
    first_chunk_only: bool = False,
) -> PyTree:
    """``call(take)`` on fixed-size chunks of the indices ``0..total−1`` (the last chunk padded
    with copies of its last index, dropped from the result: one shape, one compilation), results
    concatenated along ``axis``; ``on_chunk(done, chunks)`` before the first call and after each.
    ``first_chunk_only``: ``call`` runs once; every later chunk repeats the first one's output
    (every chunk has the same shape, so the first one stands for the compilation and memory of all;
    the result keeps its full shape so the caller's code after the sweep runs too)."""
    results = []
    chunks = -(-total // chunk_size)
    if on_chunk is not None:
        on_chunk(0, chunks)
    first = None
    for start in range(0, total, chunk_size):
        take = np.minimum(np.arange(start, start + chunk_size), total - 1)
        keep = (slice(None),) * axis + (slice(0, min(chunk_size, total - start)),)
        out = first if first is not None else call(take)
        if first_chunk_only:
            first = out
        results.append(jax.tree_util.tree_map(lambda a: np.asarray(a)[keep], out))
        if on_chunk is not None:
            on_chunk(len(results), chunks)
    return jax.tree_util.tree_map(lambda *parts: np.concatenate(parts, axis=axis), *results)


def sweep_points(
    config: TrainConfig,
    params0: Params,
    data: tuple[Inputs, ArrayLike],
    keys: Array,
    points: Mapping[str, Any],
    *,
    eval_data: tuple[Inputs, ArrayLike] | None = None,
    chunk_size: int | None = None,
    memory_budget: float = MEMORY_BUDGET,
    devices: int | Sequence[Any] | None = None,
    return_params: bool = True,
    per_seed: Sequence[str] = (),
    params0_per_seed: bool = False,
    on_chunk: Callable[[int, int], None] | None = None,
    max_steps: int | None = None,
    first_chunk_only: bool = False,
) -> SweepResult:
    """Train ``keys × points`` as compiled, vmapped calls (one per chunk of points).

    Args:
      config: the static config; ``config.hyper`` gives every field not in ``points``.
      params0, data: shared initial parameters and ``(x, y)``.
      keys: stacked PRNG keys, one per seed (e.g. ``jax.random.split(key, 10)``).
      points: ``{field: values}`` for core Hyper fields and the extensions' fields
        (:func:`dpprep.algorithms.sweepable_fields`), every value with the same leading length
        ``P`` (a pytree field: every leaf carries it; e.g. ``feature_shift``: ``(P, d)``).
      eval_data: optional ``(x_test, y_test)`` evaluated inside the call (:func:`evaluate`).
      chunk_size: points per compiled call (default: as many as fit ``memory_budget``).
      devices: shard each chunk's points over this many devices (or these devices).
      return_params: False drops the trained parameters from the result (evaluation only).
      per_seed: names in ``points`` whose values have leading axes ``(len(keys), P)``: seed ``s``
        of point ``p`` uses ``values[s, p]`` (e.g. a per-seed private feature shift).
      params0_per_seed: every ``params0`` leaf carries a leading seed axis: seed ``s`` starts
        from ``params0[s]`` (e.g. a network initialised from each seed's key).
      on_chunk: called as ``on_chunk(done, chunks)`` before the first compiled call (``done=0``)
        and after each (e.g. :meth:`experiments.results.Progress.chunk`, for a progress bar).
      max_steps: train at most this many steps (same batch size, padding and chunk size), and
      first_chunk_only: compute the first chunk only (later chunks repeat its output): a check that
        the full sweep compiles and fits, for ``run_all.py --validate``; the results are
        meaningless.

    Returns:
      a :class:`SweepResult` with leading axes ``(len(keys), P)``.
    """
    keys = check_key(keys, "keys", stacked=True)
    _check_on_chunk(on_chunk)
    memory_budget = _check_budget(memory_budget)
    dp_plan = checked_plan(config)
    stacked_params0 = params0
    if params0_per_seed:
        lead = {np.shape(leaf)[:1] for leaf in jax.tree_util.tree_leaves(params0)}
        if lead != {(keys.shape[0],)}:
            raise ValueError(
                f"params0_per_seed needs a leading axis of {keys.shape[0]} seeds on every "
                f"params0 leaf, got leading shapes {sorted(lead)}"
            )
        # one seed's, for the checks
        params0 = jax.tree_util.tree_map(lambda p: np.asarray(p)[0], params0)
        for leaf in jax.tree_util.tree_leaves(stacked_params0):
            check_finite_array(leaf, "params0")
    x, y = check_data(data, params0, config.model)
    checked_plan(config, algorithms.rows(x))
    if not isinstance(points, Mapping) or not points:
        raise ValueError("points must be a non-empty mapping {Hyper field: values}")
    points = _as_values(config, points)
    names = tuple(points)
    per_seed = tuple(current_names(dict.fromkeys(per_seed), config.extensions, "per_seed: "))
    unknown = sorted(set(per_seed) - set(names))
    if unknown:
        raise ValueError(f"per_seed names {unknown} are not swept in points")
    privacy = {name for name, (_, spec) in field_specs(config.extensions).items() if spec.privacy}
    # each seed's point its own noise, own ε
    noisy = bool(set(per_seed) & (privacy | {"noise_multiplier"}))
    seeded = tuple(name in per_seed for name in names)
    for name in per_seed:
        lead = {np.shape(leaf)[:1] for leaf in jax.tree_util.tree_leaves(points[name])}
        if lead != {(keys.shape[0],)}:
            raise ValueError(
                f"per_seed field {name} needs a leading axis of {keys.shape[0]} seeds, "
                f"got leading shapes {sorted(lead)}"
            )
    first_seed = {
        name: (
            jax.tree_util.tree_map(lambda v: np.asarray(v)[0], value) if name in per_seed else value
        )
        for name, value in points.items()
    }
    base_values = traced(config)
    check = functools.partial(
        check_hyper,
        params=params0,
        plan=dp_plan,
        swept=names,
        num_features=algorithms.num_features(x),
        extensions=config.extensions,
        clip_method=config.clip_method,
    )
    charged = check(with_values(base_values, first_seed))
    per_seed_charged = None
    # every seed's values checked (and, when they carry the noise, accounted), not only the first's
    if per_seed:
        per_seed_charged = [
            check(
                with_values(
                    base_values,
                    {
                        name: (
                            jax.tree_util.tree_map(lambda v, s=s: np.asarray(v)[s], value)
                            if name in per_seed
                            else value
                        )
                        for name, value in points.items()
                    },
                )
            )
            for s in range(keys.shape[0])
        ]
    for name in per_seed:  # every seed's values, not only the first one's
        for leaf in jax.tree_util.tree_leaves(points[name]):
            if not np.all(np.isfinite(np.asarray(leaf, np.float64))):
                raise ValueError(f"{name} values must be finite")
    x_eval, y_eval = _check_eval_data(
        eval_data, params0, config.model, algorithms.example_shape(x), "data"
    )
    plan = dp_plan.execution
    static = static_config(config)
    total = _point_count(first_seed)
    epsilons = (
        np.stack([point_epsilons(dp_plan, c, total) for c in per_seed_charged])
        if noisy and per_seed_charged is not None
        else point_epsilons(dp_plan, charged, total)
    )
    # Chunk size from the full plan (its tracked iterates and step count), as the real run's.
    full_plan, plan = plan, _limit_steps(plan, max_steps)
    if chunk_size is None:
        shape = (
            algorithms._example_structs(x, 1)
            if isinstance(x, dict)
            else algorithms.example_shape(x)
        )
        chunk_size = points_per_chunk(
            config,
            full_plan,
            params0,
            shape,
            keys.shape[0],
            memory_budget=memory_budget,
            eval_rows=0 if x_eval is None else algorithms.rows(x_eval),
        )
    chunk_size = min(check_positive_int(chunk_size, "chunk_size"), total)
    mesh = _mesh(devices)
    if mesh is not None:  # every device gets the same number of points
        chunk_size = -(-chunk_size // mesh.size) * mesh.size
    fn = _compiled(
        static,
        plan,
        names,
        x_eval is not None,
        return_params,
        seeded if any(seeded) else None,
        params0_per_seed,
        algorithms.steps_per_call(config, params0, x),
        vmaps_runs(config, mesh, convolves=algorithms.convolves(config.model, params0, x)),
    )
    base = with_values(base_values, {name: None for name in names})
    shared = (base, stacked_params0 if params0_per_seed else params0, x, y, keys)
    if mesh is not None:
        replicated = NamedSharding(mesh, PartitionSpec())
        shared = _replicate(shared, replicated)
        x_eval, y_eval = _replicate((x_eval, y_eval), replicated)
    values = [
        jax.tree_util.tree_map(lambda v: np.asarray(v, np.float32), points[name]) for name in names
    ]

    def call(take: np.ndarray) -> PyTree:
        chunk = [
            jax.tree_util.tree_map(
                lambda v, f=flag: jnp.asarray(v[:, take] if f else v[take]), value
            )
            for value, flag in zip(values, seeded)
        ]
        if mesh is not None:
            chunk = [
                jax.device_put(
                    c,
                    NamedSharding(
                        mesh, PartitionSpec(None, "points") if f else PartitionSpec("points")
                    ),
                )
                for c, f in zip(chunk, seeded)
            ]
        out = fn(*shared, tuple(chunk), x_eval, y_eval)
        if jax.process_count() > 1:  # shards on other hosts' devices: gather them first
            out = multihost_utils.process_allgather(out, tiled=True)
        return out

    params, metrics, evaluation = _over_chunks(
        call, total, chunk_size, axis=1, on_chunk=on_chunk, first_chunk_only=first_chunk_only
    )
    warn_on_overflow(metrics, dp_plan)
    warn_on_nonfinite(metrics)
    warn_if_not_finite(
        params if return_params else evaluation,
        "trained parameters" if return_params else "evaluation of the trained models",
    )
    return SweepResult(
        params,
        metrics,
        evaluation,
        epsilons,
        dp_plan.delta,
        algorithms.guarantee(dp_plan, config.extensions),
    )


def sweep(
    config: TrainConfig, params0: Params, data: tuple[Inputs, ArrayLike], keys: Array, **axes: Any
) -> SweepResult:
    """Train the Cartesian grid ``keys × axes`` (a thin layer over :func:`sweep_points`).

    Args:
      config: the static config; ``config.hyper`` gives the values of the axes not swept.
      params0, data: shared initial parameters and ``(x, y)``.
      keys: stacked PRNG keys, one per seed (e.g. ``jax.random.split(key, 10)``).
      **axes: ``name=values`` for the fields to sweep (:func:`dpprep.algorithms.sweepable_fields`,
        in the order given; array and pytree fields take a leading axis of grid values).

    Returns:
      a :class:`SweepResult` with leading axes ``(len(keys), len(axis_1), …)`` on ``params`` and
      ``metrics`` and ``(len(axis_1), …)`` on ``epsilon`` (each grid point's ε).
    """
    axes = _as_values(config, axes)
    lengths = []
    for name, values in axes.items():  # each axis on its own first, for errors that name it
        if not isinstance(values, Mapping) and (np.ndim(values) == 0 or len(values) == 0):
            raise ValueError(
                f"{name} values must be a non-empty 1-D sequence, got shape {np.shape(values)}"
            )
        leading = {
            np.shape(leaf)[0] if np.ndim(leaf) else 0 for leaf in jax.tree_util.tree_leaves(values)
        }
        if len(leading) != 1 or 0 in leading:
            raise ValueError(f"every {name} leaf needs the same non-empty leading (grid) axis")
        lengths.append(leading.pop())
    grid = np.array(list(itertools.product(*[range(k) for k in lengths])), dtype=np.int64).reshape(
        -1, len(axes)
    )
    points = {
        name: jax.tree_util.tree_map(lambda v, i=i: np.asarray(v)[grid[:, i]], values)
        for i, (name, values) in enumerate(axes.items())
    }
    result = sweep_points(config, params0, data, keys, points)
    unflatten = lambda a: a.reshape(a.shape[:1] + tuple(lengths) + a.shape[2:])  # noqa: E731
    params, metrics = jax.tree_util.tree_map(unflatten, (result.params, result.metrics))
    return SweepResult(
        params,
        metrics,
        None,
        np.asarray(result.epsilon).reshape(tuple(lengths)),
        result.delta,
        result.guarantee,
    )


@dataclasses.dataclass(frozen=True)
class Group:
    """One static group of a grid: a config (batch size, epochs, sampler, …) and its points.

    ``key`` names the group's unit in the results store; it must change whenever anything that
    decides the results does (the store adds the package digest itself)."""

    key: str
    config: TrainConfig
    points: Mapping[str, Any]
    per_seed: tuple[str, ...] = ()


def sweep_datasets(
    config: TrainConfig,
    params0: Params,
    xs: ArrayLike,
    y: ArrayLike,
    keys: Array,
    unit_points: Mapping[str, Any],
    points: Mapping[str, Any],
    *,
    eval_data: tuple[Inputs, ArrayLike] | None = None,
    chunk_size: int | None = None,
    memory_budget: float = MEMORY_BUDGET,
    on_chunk: Callable[[int, int], None] | None = None,
    max_steps: int | None = None,
    first_chunk_only: bool = False,
) -> dict[str, Any]:
    """Train ``U`` units × ``P`` points where every unit has **its own dataset** ``xs[u]`` (e.g.
    data
    projected by a per-seed private PCA), key ``keys[u]`` and Hyper values ``unit_points`` (leading
    axis ``U``), crossed with the shared ``points`` (leading axis ``P``, e.g. learning rates): one
    compiled call per chunk of units (every chunk the same shape, so one compilation).

    ``xs``: ``(U, n, f)``; ``y``: ``(n,)`` shared labels. Each trained model is evaluated inside
    the call on ``eval_data`` (shared ``(x, y)`` with ``f`` features) or, without it, on its own
    training data. Returns ``{"loss": (U, P)}`` (and ``"accuracy"`` for classifiers; the
    evaluation is non-private: it reads the data, like every metric of :func:`sweep_points`) and
    ``"epsilon"`` ``(U, P)``, each run's ε by the plan, and ``"guarantee"``, what it rests on
    (:func:`dpprep.algorithms.guarantee`).
    ``on_chunk(done, chunks)`` is told of each compiled call, and ``max_steps`` /
    ``first_chunk_only`` check the sweep cheaply, as in :func:`sweep_points`.
    """
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[0] == 0:
        raise ValueError(f"xs must have shape (units, n, features), got {xs.shape}")
    num_units = xs.shape[0]
    keys = check_key(keys, "keys", stacked=True)
    _check_on_chunk(on_chunk)
    memory_budget = _check_budget(memory_budget)
    dp_plan = checked_plan(config)
    if keys.shape[0] != num_units:
        raise ValueError(f"keys must hold one key per unit ({num_units}), got {keys.shape[0]}")
    x0, y = check_data((xs[0], y), params0, config.model)
    checked_plan(config, x0.shape[0])
    if not np.all(np.isfinite(xs)):
        raise ValueError("xs contains non-finite values")
    for name, mapping in (("unit_points", unit_points), ("points", points)):
        if not isinstance(mapping, Mapping) or not mapping:
            raise ValueError(f"{name} must be a non-empty mapping {{Hyper field: values}}")
        _as_values(config, mapping)
    if set(unit_points) & set(points):
        raise ValueError(
            "a field is either per unit or per point, not both:"
            f" {sorted(set(unit_points) & set(points))}"
        )
    unit_points = {k: np.asarray(v) for k, v in unit_points.items()}
    points = {k: np.asarray(v) for k, v in points.items()}
    if {np.shape(v)[0] if np.ndim(v) else None for v in unit_points.values()} != {num_units}:
        raise ValueError(f"unit_points values need a leading axis of {num_units} units")
    first = lambda m: {k: v[0] for k, v in m.items()}  # noqa: E731
    base_values = traced(config)
    check = functools.partial(
        check_hyper,
        params=params0,
        plan=dp_plan,
        num_features=x0.shape[1],
        extensions=config.extensions,
        clip_method=config.clip_method,
    )
    check(with_values(base_values, {**unit_points, **first(points)}), swept=tuple(unit_points))
    check(with_values(base_values, {**first(unit_points), **points}), swept=tuple(points))
    epsilon = _grid_epsilons(dp_plan, config, check, base_values, unit_points, points)
    x_eval, y_eval = _check_eval_data(eval_data, params0, config.model, tuple(xs.shape[2:]), "xs")
    plan = dp_plan.execution
    static = static_config(config)
    num_points = _point_count(points)
    if chunk_size is None:
        per_unit = 4 * (2 * xs.shape[1] * xs.shape[2]) + num_points * 4 * (
            6 * plan.pad
            + 10 * sum(int(np.size(p)) for p in jax.tree_util.tree_leaves(params0))
            + 8 * plan.steps
        )
        chunk_size = max(1, int(memory_budget // per_unit))
    chunk_size = min(check_positive_int(chunk_size, "chunk_size"), num_units)
    plan = _limit_steps(plan, max_steps)  # after the chunk size, which the full plan decides
    fn = _compiled_datasets(static, plan, tuple(unit_points), tuple(points), eval_data is not None)
    base = with_values(base_values, {name: None for name in (*unit_points, *points)})
    unit_values = [np.asarray(v, np.float32) for v in unit_points.values()]
    point_values = tuple(jnp.asarray(v, jnp.float32) for v in points.values())

    def call(take: np.ndarray) -> PyTree:
        return fn(
            base,
            params0,
            jnp.asarray(xs[take], jnp.float32),
            y,
            keys[take],
            tuple(jnp.asarray(v[take]) for v in unit_values),
            point_values,
            x_eval,
            y_eval,
        )

    out = _over_chunks(
        call, num_units, chunk_size, axis=0, on_chunk=on_chunk, first_chunk_only=first_chunk_only
    )
    return {
        **out,
        "epsilon": epsilon,
        "guarantee": algorithms.guarantee(dp_plan, config.extensions),
    }


def _grid_epsilons(
    plan: DPPlan,
    config: TrainConfig,
    check: Callable[..., dict[str, Any]],
    base: Traced,
    unit_points: dict[str, Any],
    points: dict[str, Any],
) -> np.ndarray:
    """``(units, points)`` ε of a :func:`sweep_datasets` grid: the plan's, or, where a field that
    carries the noise varies, each run's own (checked and accounted run by run)."""
    units, count = int(np.shape(next(iter(unit_points.values())))[0]), _point_count(points)
    if not plan.private:
        return np.full((units, count), np.inf)
    privacy = {name for name, (_, spec) in field_specs(config.extensions).items() if spec.privacy}
    if not (set(unit_points) | set(points)) & (privacy | {"noise_multiplier"}):
        return np.full((units, count), plan.epsilon)
    out = np.empty((units, count))
    for u in range(units):
        for p in range(count):
            charged = check(
                with_values(
                    base,
                    {
                        **{k: v[u] for k, v in unit_points.items()},
                        **{k: v[p] for k, v in points.items()},
                    },
                )
            )
            if any(charged["fixed_events"]):
                raise ValueError(
                    "sweep_datasets does not account points' private statistics; account them"
                    " per run"
                )
            out[u, p] = plan.epsilon_at(float(charged["noise_multiplier"][0]))
    return out


@functools.lru_cache(maxsize=16)
def _compiled_datasets(
    config: TrainConfig,
    plan: ExecutionPlan,
    unit_names: tuple[str, ...],
    point_names: tuple[str, ...],
    with_eval: bool,
) -> Callable[..., Any]:
    def point(base, params0, x, y, key, unit_values, point_values, x_eval, y_eval):
        hyper = with_values(
            base, {**dict(zip(unit_names, unit_values)), **dict(zip(point_names, point_values))}
        )
        params, _ = _run(config, plan, hyper, params0, x, y, key)
        model = run_model(config, hyper)
        return (
            evaluate(model, params, x_eval, y_eval) if with_eval else evaluate(model, params, x, y)
        )

    over_points = jax.vmap(point, in_axes=(None, None, None, None, None, None, 0, None, None))
    over_units = jax.vmap(over_points, in_axes=(None, None, 0, None, 0, 0, None, None, None))
    return jax.jit(
        lambda base, params0, xs, y, keys, unit_values, point_values, x_eval, y_eval: over_units(
            base, params0, xs, y, keys, tuple(unit_values), tuple(point_values), x_eval, y_eval
        )
    )
