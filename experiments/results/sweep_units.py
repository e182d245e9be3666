"""Grid units whose work is sweeps (:class:`SweepUnit`, :func:`run_groups`): one compiled call per
group of ``dpprep.sweeps`` points, run at their real shapes with few steps by ``run_all
--validate``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import numpy as np

from dpprep import sweeps
from dpprep.files import (
    atomic_write_bytes,  # noqa: F401 (re-exported)
)
from dpprep.models import Array, Params

# --------------------------------------------------------------------------------------------------
# Grids of static groups (one resumable unit per group)


@dataclasses.dataclass(frozen=True)
class SweepUnit:
    """A grid unit whose work is sweeps of :mod:`dpprep.sweeps`: ``unit()`` computes it (what a
    store's ``run_many`` calls); ``unit(max_steps=2, first_chunk_only=True)`` runs the same sweeps
    at the same compiled shapes (seeds, chunk size, batch padding, features) with fewer steps and
    one chunk each, which ``run_all --validate`` uses (:class:`experiments.planning.ValidateStore`)
    to check a large profile before paying for it; those values are meaningless and never saved.
    ``compute`` takes the two as keywords and passes them to every sweep it runs. ``shape``: what
    decides its compiled program once the steps are cut (units with equal shapes are validated
    once), or None (always run)."""

    compute: Callable[..., dict]
    shape: Any = None

    def __call__(self, **limits: Any) -> dict:
        return self.compute(**limits)


def run_groups(
    groups: Sequence[sweeps.Group],
    params0: Params,
    data: tuple[Any, Any],
    keys: Array,
    store: Any,
    *,
    eval_data: tuple[Any, Any],
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Evaluate every group's ``keys × points`` through ``store.run_many`` (one unit per group:
    an interrupted grid resumes at the first unfinished group; with ``run_all --shard`` the
    groups are spread over machines). Groups that share a config shape reuse one compilation.
    Returns, per group, ``{"evaluation": nested lists with leading axes (seeds, points)}``.
    ``progress`` gets a line per group computed; one with a ``chunk`` method (a
    :class:`Progress`) is also told of each chunk, unless ``options`` give ``on_chunk``.
    ``options`` go to :func:`dpprep.sweeps.sweep_points` (``chunk_size``, ``memory_budget``,
    ``devices``, ``on_chunk``).
    ``store``: anything with ``run_many(items, costs=...)``; the costs (:func:`group_cost`) weight
    the ETA.
    Each item's callable is a :class:`SweepUnit` (``run_all --validate`` runs it cut short)."""
    if not groups:
        raise ValueError("groups must not be empty")
    if len({g.key for g in groups}) != len(groups):
        raise ValueError("group keys must be distinct")
    if "on_chunk" not in options and callable(getattr(progress, "chunk", None)):
        # getattr check above
        options = options | {"on_chunk": progress.chunk}  # type: ignore[union-attr]

    def unit(i: int, group: sweeps.Group, **limits: Any) -> dict[str, Any]:
        if progress is not None:
            progress(f"group {i + 1}/{len(groups)}: {group.key}")
        result = sweeps.sweep_points(
            group.config,
            params0,
            data,
            keys,
            group.points,
            eval_data=eval_data,
            return_params=False,
            per_seed=group.per_seed,
            **options,
            **limits,
        )
        return {
            "evaluation": jax.tree_util.tree_map(
                lambda a: np.asarray(a).tolist(), result.evaluation
            )
        }

    n = int(np.shape(jax.tree_util.tree_leaves(data[0])[0])[0])
    costs = [group_cost(g, n, int(np.shape(keys)[0])) for g in groups]
    return store.run_many(
        [
            (
                g.key,
                SweepUnit(
                    functools.partial(unit, i, g),
                    _sweep_shape(g, n, (data, eval_data), keys, options),
                ),
            )
            for i, g in enumerate(groups)
        ],
        costs=None if None in costs else costs,
    )


def _sweep_shape(
    group: sweeps.Group, n: int, data: Any, keys: Array, options: dict[str, Any]
) -> Any:
    """What decides ``group``'s compiled program once validation cuts its steps: its static config
    but the step count (steps, epochs), its plan but steps, the swept names and point count, the
    shapes of ``data`` (training and evaluation) and keys, and the sweep options; None when it
    cannot be told here (run it)."""
    try:
        plan = group.config.plan.execution
        config = tuple(
            (f.name, getattr(group.config, f.name))
            for f in dataclasses.fields(group.config)
            if f.name not in ("hyper", "plan")
        )
        shape = (
            config,
            tuple(
                (f.name, getattr(plan, f.name))
                for f in dataclasses.fields(plan)
                if f.name != "steps"
            ),
            tuple(group.points),
            max((int(np.shape(v)[0]) for v in group.points.values() if np.ndim(v) > 0), default=1),
            group.per_seed,
            tuple(np.shape(leaf) for leaf in jax.tree_util.tree_leaves(data)),
            np.shape(keys),
            tuple(sorted((k, repr(v)) for k, v in options.items() if k != "on_chunk")),
        )
        hash(shape)
    except (ValueError, TypeError, AttributeError):
        return None
    return shape


def group_cost(group: sweeps.Group, n: int, seeds: int) -> float | None:
    """A group's size, for progress estimates: seeds × points × steps × batch size, the examples its
    sweep passes through (groups of a grid differ in all four; time is about proportional to it
    once compiled). None when the group's plan cannot be made here (its sweep will say why)."""
    try:
        plan = group.config.plan.execution
    except (ValueError, TypeError, AttributeError):
        return None
    points = max((int(np.shape(v)[0]) for v in group.points.values() if np.ndim(v) > 0), default=1)
    return float(seeds * points * plan.steps * max(plan.batch_size, 1))
