"""experiments.results.run_groups: the grid driver runs static groups of a sweep through a results
store (one resumable unit per group), each equal to its own sweep_points call."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from dpprep import models, sweeps
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.features import AffineFeatures
from dpprep.plan import DPPlan
from experiments.results import run_groups

RNG = np.random.default_rng(1)
D6, N40 = 6, 40
X6 = RNG.normal(size=(N40, D6)).astype(np.float32)
Y6 = RNG.integers(0, 3, size=N40)
X6_TEST = RNG.normal(size=(12, D6)).astype(np.float32)
Y6_TEST = RNG.integers(0, 3, size=12)
GLM6 = models.softmax_regression(D6, 3)
P6 = GLM6.init(None)


def _plan(batch_size: int, steps: int) -> DPPlan:
    """A private plan (C = 1, z = 1) of shuffled batches on the N40 rows."""
    return DPPlan.create(
        "shuffle",
        N40,
        batch_size=batch_size,
        steps=steps,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=1e-5,
    )


SMALL = TrainConfig(GLM6, Hyper(0.5), _plan(8, 6), track_loss=True, extensions=(AffineFeatures(),))
SHIFTS = RNG.normal(size=(2, D6)).astype(np.float32)


class FakeStore:
    """``run_many(items, costs=...)``: each ``(key, compute)`` computed once, then served from
    memory."""

    def __init__(self):
        self.cache, self.computed, self.calls, self.costs = {}, [], [], []

    def run_many(self, items, costs=None):
        items = list(items)
        self.calls.append([key for key, _ in items])
        self.costs.append(costs)
        out = []
        for key, compute in items:
            if key not in self.cache:
                self.computed.append(key)
                self.cache[key] = compute()
            out.append(self.cache[key])
        return out


def _groups():
    points = {"learning_rate": np.array([0.3, 1.0]), "feature_shift": SHIFTS}
    return [
        sweeps.Group("b8", SMALL, points),
        sweeps.Group("b10", dataclasses.replace(SMALL, plan=_plan(10, 4)), points),
    ]


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_run_groups_through_a_store():
    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    store, messages = FakeStore(), []
    groups = _groups()
    out = run_groups(
        groups, P6, (X6, Y6), keys, store, eval_data=(X6_TEST, Y6_TEST), progress=messages.append
    )
    assert store.calls == [["b8", "b10"]] and store.computed == ["b8", "b10"]
    assert len(messages) == 2 and "b10" in messages[1]
    # Each group's size for the progress ETA: seeds × points × steps × batch size.
    assert store.costs == [[2 * 2 * 6 * 8, 2 * 2 * 4 * 10]]
    for group, record in zip(groups, out):
        expected = sweeps.sweep_points(
            group.config,
            P6,
            (X6, Y6),
            keys,
            group.points,
            eval_data=(X6_TEST, Y6_TEST),
            return_params=False,
        )
        assert expected.params is None
        for name in ("loss", "accuracy"):
            np.testing.assert_allclose(
                np.asarray(record["evaluation"][name]), expected.evaluation[name], rtol=1e-6
            )
    assert out[0]["evaluation"] != out[1]["evaluation"]  # the batch size mattered
    again = run_groups(groups, P6, (X6, Y6), keys, store, eval_data=(X6_TEST, Y6_TEST))
    assert store.computed == ["b8", "b10"] and again == out  # the filled cache computes nothing


def test_run_groups_tells_a_progress_of_each_chunk():
    """A progress with a ``chunk`` method (a results.Progress) hears of every group's chunks."""
    from experiments import results

    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    progress = results.Progress("t", quiet=True)
    heard = []
    progress.chunk = lambda done, total: heard.append((done, total))
    run_groups(
        _groups()[:1],
        P6,
        (X6, Y6),
        keys,
        FakeStore(),
        eval_data=(X6_TEST, Y6_TEST),
        progress=progress,
        chunk_size=1,
    )
    assert heard == [(0, 2), (1, 2), (2, 2)]


def test_run_groups_with_a_unit_store_resumes(tmp_path):
    """The real results store: a second run reads the records back instead of training."""
    from experiments import results

    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    groups = _groups()[:1]
    first = run_groups(
        groups, P6, (X6, Y6), keys, results.UnitStore(tmp_path), eval_data=(X6_TEST, Y6_TEST)
    )
    assert len(list(tmp_path.iterdir())) == 1
    calls = []
    again = run_groups(
        groups,
        P6,
        (X6, Y6),
        keys,
        results.UnitStore(tmp_path),
        eval_data=(X6_TEST, Y6_TEST),
        progress=calls.append,
    )
    assert again == first and calls == []


def test_run_groups_rejects_bad_groups():
    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    store = FakeStore()
    with pytest.raises(ValueError, match="groups must not be empty"):
        run_groups([], P6, (X6, Y6), keys, store, eval_data=(X6_TEST, Y6_TEST))
    group = _groups()[0]
    with pytest.raises(ValueError, match="group keys must be distinct"):
        run_groups(
            [
                group,
                dataclasses.replace(group, config=dataclasses.replace(SMALL, plan=_plan(8, 3))),
            ],
            P6,
            (X6, Y6),
            keys,
            store,
            eval_data=(X6_TEST, Y6_TEST),
        )
    assert store.calls == []
