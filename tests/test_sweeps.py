"""Sweeps: one vmapped call equals the individual runs; bad grids are rejected before compiling."""

from __future__ import annotations

import dataclasses

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import models, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train
from experiments.results import run_groups  # the grid driver through a results store

RNG = np.random.default_rng(1)
X = RNG.normal(size=(80, 4)).astype(np.float32)
Y = RNG.integers(0, 3, size=80)
MODEL = models.softmax_regression(4, 3)
PARAMS0 = MODEL.init(None)
CONFIG = TrainConfig(MODEL, Hyper(0.5, noise_multiplier=1.0, clip_norm=1.0), sampling="poisson",
                     batch_size=16, steps=25, track_loss=True)


def _assert_close(a, b):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6, atol=1e-6)


def test_sweep_equals_individual_runs():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    lrs, zs = [0.1, 1.0, 3.0], [0.5, 2.0]
    params, metrics = sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=lrs, noise_multiplier=zs)
    assert params["w"].shape == (2, 3, 2, 4, 3) and metrics["loss"].shape == (2, 3, 2, 25)
    for i in range(2):
        for j, lr in enumerate(lrs):
            for k, z in enumerate(zs):
                cfg = dataclasses.replace(CONFIG, hyper=Hyper(lr, noise_multiplier=z, clip_norm=1.0))
                single, single_metrics = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))
                np.testing.assert_allclose(single_metrics["loss"], metrics["loss"][i, j, k], rtol=1e-6, atol=1e-6)
                np.testing.assert_array_equal(single_metrics["batch_size"], metrics["batch_size"][i, j, k])


def test_sweep_over_clip_norm_and_noise_scales():
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    clips = [0.1, 10.0]
    scales = {"w": np.stack([np.ones((4, 1)), np.array([[0.0], [0.0], [1.0], [2.0]])]),
              "b": np.array([1.0, 0.0])}
    params, _ = sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, clip_norm=clips, noise_scales=scales)
    assert params["w"].shape == (2, 2, 2, 4, 3)
    for i in range(2):
        for j, clip in enumerate(clips):
            for k in range(2):
                scale_k = jax.tree_util.tree_map(lambda a: a[k], scales)
                cfg = dataclasses.replace(CONFIG, hyper=Hyper(0.5, 1.0, clip, scale_k))
                single, _ = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))


def test_bad_sweeps_raise():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="cannot sweep"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, batch_size=[8, 16])
    with pytest.raises(ValueError, match="learning_rate"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=[0.1, -1.0])
    with pytest.raises(ValueError, match="clip_norm"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, clip_norm=[0.0, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=0.1)
    with pytest.raises(ValueError, match="keys"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), jnp.zeros(3), learning_rate=[0.1])
    with pytest.raises(ValueError, match="noise_scales"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.full((2, 4, 1), -1.0), "b": np.ones(2)})
    with pytest.raises(ValueError, match="same non-empty leading"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.ones((2, 4, 1)), "b": np.ones(3)})
    scales = {"w": np.stack([np.ones((4, 1)), -np.ones((4, 1))]), "b": np.ones(2)}  # 2nd value bad
    with pytest.raises(ValueError, match="noise_scales must be >= 0"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales=scales)
    with pytest.raises(ValueError, match="broadcast"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.ones((2, 5, 1)), "b": np.ones(2)})
    with pytest.raises(ValueError, match="x contains"):
        sweeps.sweep(CONFIG, PARAMS0, (np.full_like(X, np.nan), Y), keys, learning_rate=[0.1])


def test_fields_not_swept_must_be_scalars():
    """A stacked value of a field that is not an axis is rejected: 3 learning rates would otherwise
    broadcast silently against the 3 classes' columns of w and b."""
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    cfg = dataclasses.replace(CONFIG, hyper=Hyper(np.array([0.1, 0.5, 1.0]), 1.0, 1.0))
    with pytest.raises(ValueError, match="learning_rate must be a scalar"):
        sweeps.sweep(cfg, PARAMS0, (X, Y), keys, noise_multiplier=[0.5, 2.0])
    cfg = dataclasses.replace(CONFIG, hyper=Hyper(0.5, 1.0, np.array([1.0, 2.0])))
    with pytest.raises(ValueError, match="clip_norm must be a scalar"):
        sweeps.sweep(cfg, PARAMS0, (X, Y), keys, learning_rate=[0.1, 0.5])


def test_sweep_checks_labels_and_keys():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 3\)"):
        sweeps.sweep(CONFIG, PARAMS0, (X, np.where(np.arange(80) == 7, 3, Y)), keys, learning_rate=[0.1])
    for bad in (np.zeros((2, 2)), np.arange(2), jax.random.PRNGKey(0), 0):
        with pytest.raises(ValueError, match="keys must be a stack of PRNG keys"):
            sweeps.sweep(CONFIG, PARAMS0, (X, Y), bad, learning_rate=[0.1])


# ------------------------------------------------------------------------------------------------
# sweep_points: a flat axis of paired values, chunking, evaluation, one gather, groups.

D6, N40 = 6, 40
X6 = RNG.normal(size=(N40, D6)).astype(np.float32)
Y6 = RNG.integers(0, 3, size=N40)
X6_TEST = RNG.normal(size=(12, D6)).astype(np.float32)
Y6_TEST = RNG.integers(0, 3, size=12)
GLM6 = models.softmax_regression(D6, 3)
P6 = GLM6.init(None)
SMALL = TrainConfig(GLM6, Hyper(0.5, noise_multiplier=1.0, clip_norm=1.0), sampling="shuffle",
                    batch_size=8, steps=6, track_loss=True)
POINTS5 = {
    "learning_rate": np.array([0.1, 0.3, 0.5, 1.0, 2.0], np.float32),
    "noise_multiplier": np.array([0.5, 1.0, 2.0, 0.0, 3.0], np.float32),
    "feature_shift": RNG.normal(size=(5, D6)).astype(np.float32),
}


def _point(points, j):
    return {name: np.asarray(v)[j] for name, v in points.items()}


def test_sweep_points_equals_per_point_train():
    """A flat axis of paired values (learning rate, z and a per-point shift) in chunks of 2 (the
    last one padded) equals one train call per seed and point with the same key, and the
    evaluation inside the call equals evaluate() of the returned params."""
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    result = sweeps.sweep_points(SMALL, P6, (X6, Y6), keys, POINTS5, eval_data=(X6_TEST, Y6_TEST), chunk_size=2)
    assert result.params["w"].shape == (2, 5, D6, 3) and result.evaluation["loss"].shape == (2, 5)
    for i in range(2):
        for j in range(5):
            cfg = dataclasses.replace(SMALL, hyper=dataclasses.replace(SMALL.hyper, **_point(POINTS5, j)))
            single, single_metrics = train(cfg, P6, (X6, Y6), keys[i])
            _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j], result.params))
            np.testing.assert_allclose(single_metrics["loss"], result.metrics["loss"][i, j], rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(single_metrics["batch_size"], result.metrics["batch_size"][i, j])
            expected = sweeps.evaluate(GLM6, single, X6_TEST, Y6_TEST, None, POINTS5["feature_shift"][j])
            np.testing.assert_allclose(result.evaluation["loss"][i, j], expected["loss"], rtol=1e-5)
            np.testing.assert_allclose(result.evaluation["accuracy"][i, j], expected["accuracy"])
    # Lists are point values too (same shapes, so the same compilation); on_chunk hears of each
    # compiled call (0 before the first), for a progress bar, and changes nothing.
    chunks = []
    listed = sweeps.sweep_points(SMALL, P6, (X6, Y6), keys, {k: v.tolist() for k, v in POINTS5.items()},
                                 eval_data=(X6_TEST, Y6_TEST), chunk_size=2, on_chunk=lambda *a: chunks.append(a))
    _assert_close(listed.params, result.params)
    assert chunks == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_chunking_gives_identical_results_and_compiles_once(monkeypatch):
    """5 points in one chunk, in chunks of 2 (the last padded) and in chunks of 1 (a tiny memory
    budget) agree, and each call traces the training function at most once, however many
    chunks it runs (exactly once for a chunk shape not seen before)."""
    traces = []
    run = sweeps._run

    def counting_run(*args, **kwargs):
        traces.append(1)
        return run(*args, **kwargs)

    monkeypatch.setattr(sweeps, "_run", counting_run)
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    options = {"eval_data": (X6_TEST, Y6_TEST)}  # the compilation the test above made, if it ran
    results = {}
    for label, chunking in (("two", {"chunk_size": 2}), ("one", {"chunk_size": 5}),
                            ("budget", {"memory_budget": 1.0})):
        before = len(traces)
        results[label] = sweeps.sweep_points(SMALL, P6, (X6, Y6), keys, POINTS5, **options, **chunking)
        assert len(traces) - before <= 1, label
    assert len(traces) - before == 1  # chunks of 1: a new shape, traced once for 5 calls
    assert sweeps.points_per_chunk(SMALL, sweeps.make_plan(SMALL, N40), P6, D6, 2, memory_budget=1.0) == 1
    assert sweeps.points_per_chunk(SMALL, sweeps.make_plan(SMALL, N40), P6, D6, 2) >= 5
    for label in ("two", "budget"):
        assert results[label].params["w"].shape == (2, 5, D6, 3)
        _assert_close(results[label].params, results["one"].params)
        _assert_close(results[label].metrics, results["one"].metrics)
        _assert_close(results[label].evaluation, results["one"].evaluation)


def test_eval_of_both_iterates_equals_evaluate_of_the_params():
    keys = jax.random.split(jax.random.PRNGKey(7), 2)
    cfg = dataclasses.replace(SMALL, iterates="both")
    points = {"learning_rate": np.array([0.3, 1.0]), "feature_scale": np.array([0.5, 2.0]),
              "feature_shift": POINTS5["feature_shift"][:2]}
    result = sweeps.sweep_points(cfg, P6, (X6, Y6), keys, points, eval_data=(X6_TEST, Y6_TEST))
    assert set(result.evaluation) == {"last", "average"} and set(result.params) == {"last", "average"}
    for kind in ("last", "average"):
        evaluation, params = result.evaluation[kind], result.params[kind]
        assert set(evaluation) == {"loss", "accuracy"} and evaluation["loss"].shape == (2, 2)
        for i in range(2):
            for j in range(2):
                expected = sweeps.evaluate(GLM6, jax.tree_util.tree_map(lambda a: a[i, j], params),
                                           X6_TEST, Y6_TEST, points["feature_scale"][j],
                                           points["feature_shift"][j])
                np.testing.assert_allclose(evaluation["loss"][i, j],
                                           expected["loss"], rtol=1e-5)
                np.testing.assert_allclose(evaluation["accuracy"][i, j], expected["accuracy"])
    assert not np.allclose(result.evaluation["last"]["loss"], result.evaluation["average"]["loss"])


def _var_shapes(jaxpr):
    """Shapes of every variable an equation of ``jaxpr`` (and its sub-jaxprs) produces, with the
    shapes of the gathers' operands and outputs."""
    shapes, gathers = [], []

    def walk(jx):
        for eqn in jx.eqns:
            out = [tuple(v.aval.shape) for v in eqn.outvars if hasattr(v.aval, "shape")]
            shapes.extend(out)
            if eqn.primitive.name == "gather":
                gathers.append((tuple(eqn.invars[0].aval.shape), out[0]))
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    if isinstance(sub, jax.extend.core.ClosedJaxpr):
                        walk(sub.jaxpr)
                    elif isinstance(sub, jax.extend.core.Jaxpr):
                        walk(sub)

    walk(jaxpr.jaxpr)
    return shapes, gathers


@pytest.mark.parametrize("clip_method", ["auto", "vmap"])
def test_glm_sweep_gathers_the_batch_once_per_seed(clip_method):
    """With per-point feature transforms a GLM sweep gathers x[batch] once per seed (shape
    (S, pad, d), no points axis) and never forms a (P, pad, d) array of transformed batches,
    nor (P, m, d) test features. The vmap clipping path, which materialises the transformed
    batch per point, does form one (the inspection has power)."""
    S, P, pad, m = 2, 5, 8, X6_TEST.shape[0]
    cfg = dataclasses.replace(SMALL, hyper=None, clip_method=clip_method)
    plan = sweeps.make_plan(cfg, N40)
    assert plan.pad == pad
    names = ("feature_scale", "feature_shift")
    fn = sweeps._compiled(cfg, plan, names, True, True)
    values = [jnp.asarray(np.linspace(0.5, 2.0, P * D6).reshape(P, D6), jnp.float32),
              jnp.asarray(POINTS5["feature_shift"])]
    base = dataclasses.replace(SMALL.hyper, feature_scale=None, feature_shift=None)
    jaxpr = jax.make_jaxpr(fn)(base, P6, jnp.asarray(X6), jnp.asarray(Y6, jnp.int32),
                               jax.random.split(jax.random.PRNGKey(0), S), values,
                               jnp.asarray(X6_TEST), jnp.asarray(Y6_TEST, jnp.int32))
    shapes, gathers = _var_shapes(jaxpr)
    per_point = [s for s in shapes if len(s) >= 3 and s[-1] == D6 and s[-2] in (pad, m) and P in s[:-2]]
    if clip_method == "vmap":
        assert per_point, "the vmap path should materialise per-point batches"
        return
    x_gathers = [out for operand, out in gathers if operand == (N40, D6)]
    assert x_gathers and all(out == (S, pad, D6) for out in x_gathers), gathers
    assert not per_point, per_point


def test_sweep_points_bad_input_raises_before_compiling(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("compiled before validating")

    monkeypatch.setattr(sweeps, "_compiled", fail)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    data = (X6, Y6)
    bad_lr = dataclasses.replace(SMALL, hyper=Hyper("0.5", noise_multiplier=1.0, clip_norm=1.0))
    with pytest.raises(ValueError, match="learning_rate must be numeric"):
        sweeps.sweep_points(bad_lr, P6, data, keys, {"noise_multiplier": [1.0, 2.0]})
    with pytest.raises(ValueError, match="learning_rate must be numeric"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": np.array(["0.5", "1.0"])})
    mlp_params = models.mlp(D6, 4, 3).init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="params0 does not fit model"):
        sweeps.sweep_points(SMALL, mlp_params, data, keys, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match=r"params0\['w'\] has shape"):
        sweeps.sweep_points(SMALL, {"w": jnp.zeros((D6, 4)), "b": jnp.zeros(3)}, data, keys,
                            {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match="share one leading"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": [0.1, 0.2, 0.3], "noise_multiplier": [1.0, 2.0]})
    with pytest.raises(ValueError, match="share one leading"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": [0.1, 0.2],
                                                      "feature_shift": np.zeros((3, D6))})
    with pytest.raises(ValueError, match="non-empty mapping"):
        sweeps.sweep_points(SMALL, P6, data, keys, {})
    with pytest.raises(ValueError, match="non-empty 1-D"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": []})
    with pytest.raises(ValueError, match="feature_shift must be a vector of the 6 features"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"feature_shift": np.zeros((2, D6 + 1))})
    with pytest.raises(ValueError, match="feature_scale must be a scalar or a vector"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"feature_scale": np.ones((2, D6, D6))})
    with pytest.raises(ValueError, match="cannot sweep"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"batch_size": [8, 16]})
    with pytest.raises(ValueError, match="x has 5 features"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": [0.1]},
                            eval_data=(X6_TEST[:, :5], Y6_TEST))
    with pytest.raises(ValueError, match="chunk_size"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": [0.1]}, chunk_size=0)


class FakeStore:
    """``run_many(items, costs=...)``: each ``(key, compute)`` computed once, then served from memory."""

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
    points = {"learning_rate": np.array([0.3, 1.0]), "feature_shift": POINTS5["feature_shift"][:2]}
    return [sweeps.Group("b8", SMALL, points),
            sweeps.Group("b10", dataclasses.replace(SMALL, batch_size=10, steps=4), points)]


def test_run_groups_through_a_store():
    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    store, messages = FakeStore(), []
    groups = _groups()
    out = run_groups(groups, P6, (X6, Y6), keys, store, eval_data=(X6_TEST, Y6_TEST),
                            progress=messages.append)
    assert store.calls == [["b8", "b10"]] and store.computed == ["b8", "b10"]
    assert len(messages) == 2 and "b10" in messages[1]
    # Each group's size for the progress ETA: seeds × points × steps × batch size.
    assert store.costs == [[2 * 2 * 6 * 8, 2 * 2 * 4 * 10]]
    for group, record in zip(groups, out):
        expected = sweeps.sweep_points(group.config, P6, (X6, Y6), keys, group.points,
                                       eval_data=(X6_TEST, Y6_TEST), return_params=False)
        assert expected.params is None
        for name in ("loss", "accuracy"):
            np.testing.assert_allclose(np.asarray(record["evaluation"][name]), expected.evaluation[name],
                                       rtol=1e-6)
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
    run_groups(_groups()[:1], P6, (X6, Y6), keys, FakeStore(), eval_data=(X6_TEST, Y6_TEST),
                      progress=progress, chunk_size=1)
    assert heard == [(0, 2), (1, 2), (2, 2)]


def test_run_groups_with_a_unit_store_resumes(tmp_path):
    """The real results store: a second run reads the records back instead of training."""
    from experiments import results

    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    groups = _groups()[:1]
    first = run_groups(groups, P6, (X6, Y6), keys, results.UnitStore(tmp_path),
                              eval_data=(X6_TEST, Y6_TEST))
    assert len(list(tmp_path.iterdir())) == 1
    calls = []
    again = run_groups(groups, P6, (X6, Y6), keys, results.UnitStore(tmp_path),
                              eval_data=(X6_TEST, Y6_TEST), progress=calls.append)
    assert again == first and calls == []


def test_run_groups_rejects_bad_groups():
    keys = jax.random.split(jax.random.PRNGKey(8), 2)
    store = FakeStore()
    with pytest.raises(ValueError, match="groups must not be empty"):
        run_groups([], P6, (X6, Y6), keys, store, eval_data=(X6_TEST, Y6_TEST))
    group = _groups()[0]
    with pytest.raises(ValueError, match="group keys must be distinct"):
        run_groups([group, dataclasses.replace(group, config=dataclasses.replace(SMALL, steps=3))],
                          P6, (X6, Y6), keys, store, eval_data=(X6_TEST, Y6_TEST))
    assert store.calls == []


def test_per_seed_points_equal_individual_runs():
    """A per-seed field (e.g. DPSGD-F's private mean, whose noise differs per seed) takes
    values[s, p] for seed s and point p; every (seed, point) equals its own train call."""
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    shifts = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    points = {"learning_rate": [0.1, 1.0, 2.0], "feature_scale": [1.0, 3.0, 0.5], "feature_shift": shifts}
    result = sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, points, per_seed=("feature_shift",),
                                 chunk_size=2, eval_data=(X, Y))
    assert result.params["w"].shape == (2, 3, 4, 3)
    for s in range(2):
        for p in range(3):
            hyper = Hyper(points["learning_rate"][p], noise_multiplier=1.0, clip_norm=1.0,
                          feature_scale=points["feature_scale"][p], feature_shift=shifts[s, p])
            single, _ = train(dataclasses.replace(CONFIG, hyper=hyper), PARAMS0, (X, Y), keys[s])
            _assert_close(single, jax.tree_util.tree_map(lambda a: a[s, p], result.params))
    with pytest.raises(ValueError, match="per_seed"):
        sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, points, per_seed=("radius",))
    with pytest.raises(ValueError, match="feature_shift needs a leading axis of 2 seeds"):
        sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, {**points, "feature_shift": shifts[:1]},
                            per_seed=("feature_shift",))


def test_configs_built_the_same_way_share_one_compilation():
    """The compilation cache is keyed on the config, whose model and optimizer compare by identity:
    the cached model factories and :func:`dpprep.optimizers.optimizer` make two configs built
    the same way equal, so the second sweep compiles nothing."""
    from dpprep import optimizers

    def config():
        return TrainConfig(models.softmax_regression(4, 3), Hyper(0.1, noise_multiplier=1.0, clip_norm=1.0),
                           sampling="poisson", batch_size=16, steps=3, optimizer=optimizers.optimizer("adam"))

    first, second = config(), config()
    assert first == second and hash(first) == hash(second)
    keys = jnp.stack([jax.random.key(0)])
    params0 = first.model.init(jax.random.key(1))
    sweeps.sweep_points(first, params0, (X, Y), keys, {"learning_rate": [0.1, 0.2]})
    misses = sweeps._compiled.cache_info().misses
    sweeps.sweep_points(second, params0, (X, Y), keys, {"learning_rate": [0.1, 0.2]})
    assert sweeps._compiled.cache_info().misses == misses
    # A hand-built optimizer is another object, so another config (and compilation).
    import optax

    assert dataclasses.replace(first, optimizer=optax.adam(1.0)) != first
