"""Sweeps: one vmapped call equals the individual runs; bad grids are rejected before compiling."""

from __future__ import annotations

import dataclasses

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import models, sweeps
from dpprep.algorithms import Hyper, TrainConfig, static_config, traced, train, with_values
from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.features import AffineFeatures
from dpprep.plan import DPPlan

RNG = np.random.default_rng(1)
X = RNG.normal(size=(80, 4)).astype(np.float32)
Y = RNG.integers(0, 3, size=80)
MODEL = models.softmax_regression(4, 3)
PARAMS0 = MODEL.init(None)
DELTA = 1e-5


def _plan(noise_multiplier=1.0, l2_clip_norm=1.0):
    """CONFIG's private plan (Poisson, B = 16, 25 steps on the 80 rows) at ``z`` and ``C``. The
    batch is padded to all 80 rows (``max_overflow_prob=1e-16``): at z = 0.5 the run is only
    ε ≈ 27-DP, where the default pad's overflow slack (1 + e^ε)·p would leave nothing of δ."""
    return DPPlan.create(
        "poisson",
        80,
        batch_size=16,
        steps=25,
        l2_clip_norm=l2_clip_norm,
        noise_multiplier=noise_multiplier,
        delta=DELTA,
        max_overflow_prob=1e-16,
    )


CONFIG = TrainConfig(
    MODEL, Hyper(0.5), _plan(), track_loss=True, extensions=(AffineFeatures(), CoordinateNoise())
)


def _assert_close(a, b):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6, atol=1e-6)


def test_sweep_equals_individual_runs():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    lrs, zs = [0.1, 1.0, 3.0], [0.5, 2.0]
    result = sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=lrs, noise_multiplier=zs)
    assert isinstance(result, sweeps.SweepResult)
    params, metrics = result.params, result.metrics
    assert params["w"].shape == (2, 3, 2, 4, 3) and metrics["loss"].shape == (2, 3, 2, 25)
    # Each grid point's ε (the grid's shape: learning rates × multipliers), the plan's at its z.
    assert result.epsilon.shape == (3, 2) and result.delta == DELTA
    for k, z in enumerate(zs):
        np.testing.assert_array_equal(result.epsilon[:, k], CONFIG.plan.epsilon_at(z))
    assert result.epsilon[0, 0] > result.epsilon[0, 1]  # less noise, more ε
    for i in range(2):
        for j, lr in enumerate(lrs):
            for k, z in enumerate(zs):
                cfg = dataclasses.replace(CONFIG, hyper=Hyper(lr), plan=_plan(noise_multiplier=z))
                single, single_metrics = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))
                np.testing.assert_allclose(
                    single_metrics["loss"], metrics["loss"][i, j, k], rtol=1e-6, atol=1e-6
                )
                np.testing.assert_array_equal(
                    single_metrics["batch_size"], metrics["batch_size"][i, j, k]
                )
                assert single_metrics["epsilon"] == pytest.approx(result.epsilon[j, k], rel=1e-12)


def test_sweep_over_clip_norm_and_noise_scales():
    """A private plan: clip bounds × per-coordinate noise scales (each scale >= 1, so every point
    adds at least the plan's noise and a single train call of it is allowed)."""
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    clips = [0.1, 10.0]
    scales = {
        "w": np.stack([np.ones((4, 1)), np.array([[1.0], [1.0], [1.5], [2.0]])]),
        "b": np.array([1.0, 1.5]),
    }
    result = sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, l2_clip_norm=clips, noise_scales=scales)
    params = result.params
    assert params["w"].shape == (2, 2, 2, 4, 3)
    # The least noisy coordinate gets z·C·1 at every point: each point is charged the plan's ε.
    assert result.epsilon.shape == (2, 2)
    np.testing.assert_array_equal(result.epsilon, CONFIG.plan.epsilon)
    for i in range(2):
        for j, clip in enumerate(clips):
            for k in range(2):
                scale_k = jax.tree_util.tree_map(lambda a: a[k], scales)
                cfg = dataclasses.replace(
                    CONFIG,
                    hyper=Hyper(0.5, extra={"noise_scales": scale_k}),
                    plan=_plan(l2_clip_norm=clip),
                )
                single, _ = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))


def test_non_private_sweep_over_clip_norm_and_noise_scales():
    """A non-private plan (it claims nothing, so zero scales are allowed): clip bounds × noise
    scales of a nominal mechanism's absolute noise std (CoordinateNoise's stddev), each point
    equal to its own train call and charged no ε."""
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    clips = [0.1, 10.0]
    scales = {
        "w": np.stack([np.ones((4, 1)), np.array([[0.0], [0.0], [1.0], [2.0]])]),
        "b": np.array([1.0, 0.0]),
    }

    def plan(clip):
        return DPPlan.non_private("poisson", 80, batch_size=16, steps=25, l2_clip_norm=clip)

    config = dataclasses.replace(CONFIG, hyper=Hyper(0.5, extra={"stddev": 1.0}), plan=plan(1.0))
    result = sweeps.sweep(config, PARAMS0, (X, Y), keys, l2_clip_norm=clips, noise_scales=scales)
    params = result.params
    assert params["w"].shape == (2, 2, 2, 4, 3)
    assert (
        result.epsilon.shape == (2, 2) and np.all(np.isinf(result.epsilon)) and result.delta is None
    )
    for i in range(2):
        for j, clip in enumerate(clips):
            for k in range(2):
                scale_k = jax.tree_util.tree_map(lambda a: a[k], scales)
                cfg = dataclasses.replace(
                    config,
                    hyper=Hyper(0.5, extra={"stddev": 1.0, "noise_scales": scale_k}),
                    plan=plan(clip),
                )
                single, _ = train(cfg, PARAMS0, (X, Y), keys[i])
                _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j, k], params))
    # The zero scales matter: the second scale's zero-noise coordinates differ from the first's.
    assert not np.allclose(params["w"][:, :, 0], params["w"][:, :, 1])


def test_bad_sweeps_raise():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="cannot sweep"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, batch_size=[8, 16])
    with pytest.raises(ValueError, match="learning_rate"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=[0.1, -1.0])
    with pytest.raises(ValueError, match="l2_clip_norm"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, l2_clip_norm=[0.0, 1.0])
    with pytest.raises(ValueError, match="1-D"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, learning_rate=0.1)
    with pytest.raises(TypeError, match="keys"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), jnp.zeros(3), learning_rate=[0.1])
    with pytest.raises(ValueError, match="noise_scales"):
        sweeps.sweep(
            CONFIG,
            PARAMS0,
            (X, Y),
            keys,
            noise_scales={"w": np.full((2, 4, 1), -1.0), "b": np.ones(2)},
        )
    with pytest.raises(ValueError, match="same non-empty leading"):
        sweeps.sweep(
            CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.ones((2, 4, 1)), "b": np.ones(3)}
        )
    scales = {"w": np.stack([np.ones((4, 1)), -np.ones((4, 1))]), "b": np.ones(2)}  # 2nd value bad
    with pytest.raises(ValueError, match="noise_scales must be >= 0"):
        sweeps.sweep(CONFIG, PARAMS0, (X, Y), keys, noise_scales=scales)
    with pytest.raises(ValueError, match="broadcast"):
        sweeps.sweep(
            CONFIG, PARAMS0, (X, Y), keys, noise_scales={"w": np.ones((2, 5, 1)), "b": np.ones(2)}
        )
    with pytest.raises(ValueError, match="x contains"):
        sweeps.sweep(CONFIG, PARAMS0, (np.full_like(X, np.nan), Y), keys, learning_rate=[0.1])


def test_fields_not_swept_must_be_scalars():
    """A stacked value of a field that is not an axis is rejected: 3 learning rates would otherwise
    broadcast silently against the 3 classes' columns of w and b."""
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    cfg = dataclasses.replace(CONFIG, hyper=Hyper(np.array([0.1, 0.5, 1.0])))
    with pytest.raises(ValueError, match="learning_rate must be a scalar"):
        sweeps.sweep(cfg, PARAMS0, (X, Y), keys, noise_multiplier=[0.5, 2.0])
    # The clip bound is the plan's: a stacked one is refused when the plan is made.
    with pytest.raises(TypeError, match="l2_clip_norm must be a scalar"):
        _plan(l2_clip_norm=np.array([1.0, 2.0]))


def test_sweep_checks_labels_and_keys():
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 3\)"):
        sweeps.sweep(
            CONFIG, PARAMS0, (X, np.where(np.arange(80) == 7, 3, Y)), keys, learning_rate=[0.1]
        )
    for bad in (np.zeros((2, 2)), np.arange(2), jax.random.PRNGKey(0), 0):
        with pytest.raises(TypeError, match="keys must be a stack of PRNG keys"):
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
SMALL_PLAN = DPPlan.create(
    "shuffle", N40, batch_size=8, steps=6, l2_clip_norm=1.0, noise_multiplier=1.0, delta=DELTA
)
SMALL = TrainConfig(GLM6, Hyper(0.5), SMALL_PLAN, track_loss=True, extensions=(AffineFeatures(),))
# The same run claiming no guarantee (no noise from the plan; clipped to the same C = 1).
SMALL_NP = dataclasses.replace(
    SMALL, plan=DPPlan.non_private("shuffle", N40, batch_size=8, steps=6, l2_clip_norm=1.0)
)


def _seen(model, scale, shift):
    """The model as a run with this feature transform sees it (what the sweep evaluates)."""
    return AffineFeatures().model(model, {"feature_scale": scale, "feature_shift": shift})


POINTS5 = {
    "learning_rate": np.array([0.1, 0.3, 0.5, 1.0, 2.0], np.float32),
    "noise_multiplier": np.array([0.5, 1.0, 2.0, 0.0, 3.0], np.float32),
    "feature_shift": RNG.normal(size=(5, D6)).astype(np.float32),
}


# A private plan refuses the zero-noise point (index 3): its four noisy points run in the private
# plan, and all five (learning rate and shift; no noise) in the non-private one, where point 3 is
# the run the zero-noise point was.
PRIVATE4 = {name: v[[0, 1, 2, 4]] for name, v in POINTS5.items()}
NONPRIVATE5 = {name: v for name, v in POINTS5.items() if name != "noise_multiplier"}


def _point(points, j):
    return {name: np.asarray(v)[j] for name, v in points.items()}


def _single(config, point):
    """``config`` for one point's own train call: its learning rate and extension fields in the
    Hyper, its noise multiplier and clip bound in a plan like ``config.plan`` (same layout)."""
    plan = config.plan
    z, clip = (
        point.get("noise_multiplier", plan.noise_multiplier),
        point.get("l2_clip_norm", plan.l2_clip_norm),
    )
    layout = dict(
        batch_size=plan.batch_size,
        steps=plan.steps,
        max_overflow_prob=plan.execution.max_overflow_prob,
    )
    run_plan = (
        DPPlan.create(
            plan.sampler,
            plan.n,
            l2_clip_norm=float(clip),
            noise_multiplier=float(z),
            delta=plan.delta,
            **layout,
        )
        if plan.private
        else DPPlan.non_private(plan.sampler, plan.n, l2_clip_norm=float(clip), **layout)
    )
    extra = {
        k: v
        for k, v in point.items()
        if k not in ("learning_rate", "noise_multiplier", "l2_clip_norm")
    }
    hyper = Hyper(point.get("learning_rate", config.hyper.learning_rate), extra=extra or None)
    return dataclasses.replace(config, hyper=hyper, plan=run_plan)


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.parametrize(
    "config, points, chunk_size, chunks",
    [
        (SMALL, PRIVATE4, 3, [(0, 2), (1, 2), (2, 2)]),
        (SMALL_NP, NONPRIVATE5, 2, [(0, 3), (1, 3), (2, 3), (3, 3)]),
    ],
    ids=["private", "non_private"],
)
def test_sweep_points_equals_per_point_train(config, points, chunk_size, chunks):
    """A flat axis of paired values (learning rate, z and a per-point shift) in chunks (the last
    one padded) equals one train call per seed and point with the same key, and the evaluation
    inside the call equals evaluate() of the returned params. Each point is charged the ε of its
    own run (the plan's account at its z; none in a non-private plan)."""
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    total = len(points["learning_rate"])
    result = sweeps.sweep_points(
        config, P6, (X6, Y6), keys, points, eval_data=(X6_TEST, Y6_TEST), chunk_size=chunk_size
    )
    assert result.params["w"].shape == (2, total, D6, 3) and result.evaluation["loss"].shape == (
        2,
        total,
    )
    assert result.epsilon.shape == (total,) and result.delta == config.plan.delta
    if config.plan.private:
        expected_eps = [config.plan.epsilon_at(float(z)) for z in points["noise_multiplier"]]
        np.testing.assert_array_equal(result.epsilon, expected_eps)
        assert len(set(expected_eps)) == total  # distinct multipliers, distinct ε
    else:
        assert np.all(np.isinf(result.epsilon)) and result.delta is None
    for i in range(2):
        for j in range(total):
            cfg = _single(config, _point(points, j))
            single, single_metrics = train(cfg, P6, (X6, Y6), keys[i])
            _assert_close(single, jax.tree_util.tree_map(lambda a: a[i, j], result.params))
            np.testing.assert_allclose(
                single_metrics["loss"], result.metrics["loss"][i, j], rtol=1e-6, atol=1e-6
            )
            np.testing.assert_array_equal(
                single_metrics["batch_size"], result.metrics["batch_size"][i, j]
            )
            assert single_metrics["epsilon"] == result.epsilon[j]
            expected = sweeps.evaluate(
                _seen(GLM6, None, points["feature_shift"][j]), single, X6_TEST, Y6_TEST
            )
            np.testing.assert_allclose(result.evaluation["loss"][i, j], expected["loss"], rtol=1e-5)
            np.testing.assert_allclose(result.evaluation["accuracy"][i, j], expected["accuracy"])
    # Lists are point values too (same shapes, so the same compilation); on_chunk hears of each
    # compiled call (0 before the first), for a progress bar, and changes nothing.
    heard = []
    listed = sweeps.sweep_points(
        config,
        P6,
        (X6, Y6),
        keys,
        {k: v.tolist() for k, v in points.items()},
        eval_data=(X6_TEST, Y6_TEST),
        chunk_size=chunk_size,
        on_chunk=lambda *a: heard.append(a),
    )
    _assert_close(listed.params, result.params)
    np.testing.assert_array_equal(listed.epsilon, result.epsilon)
    assert heard == chunks


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
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
    for label, chunking in (
        ("two", {"chunk_size": 2}),
        ("one", {"chunk_size": 5}),
        ("budget", {"memory_budget": 1.0}),
    ):
        before = len(traces)
        results[label] = sweeps.sweep_points(
            SMALL_NP, P6, (X6, Y6), keys, NONPRIVATE5, **options, **chunking
        )
        assert len(traces) - before <= 1, label
    assert len(traces) - before == 1  # chunks of 1: a new shape, traced once for 5 calls
    assert sweeps.points_per_chunk(SMALL, SMALL.plan.execution, P6, D6, 2, memory_budget=1.0) == 1
    assert sweeps.points_per_chunk(SMALL, SMALL.plan.execution, P6, D6, 2) >= 5
    for label in ("two", "budget"):
        assert results[label].params["w"].shape == (2, 5, D6, 3)
        _assert_close(results[label].params, results["one"].params)
        _assert_close(results[label].metrics, results["one"].metrics)
        _assert_close(results[label].evaluation, results["one"].evaluation)


def test_an_empty_eval_set_is_refused_before_compiling():
    keys = jax.random.split(jax.random.PRNGKey(7), 2)
    points = {"learning_rate": np.array([0.3, 1.0])}
    empty = (X6_TEST[:0], Y6_TEST[:0])
    with pytest.raises(ValueError, match="eval_data's x has 0 rows.*with_test_split"):
        sweeps.sweep_points(SMALL, P6, (X6, Y6), keys, points, eval_data=empty)


def test_eval_of_both_iterates_equals_evaluate_of_the_params():
    keys = jax.random.split(jax.random.PRNGKey(7), 2)
    cfg = dataclasses.replace(SMALL, iterates="both")
    points = {
        "learning_rate": np.array([0.3, 1.0]),
        "feature_scale": np.array([0.5, 2.0]),
        "feature_shift": POINTS5["feature_shift"][:2],
    }
    result = sweeps.sweep_points(cfg, P6, (X6, Y6), keys, points, eval_data=(X6_TEST, Y6_TEST))
    assert set(result.evaluation) == {"last", "average"} and set(result.params) == {
        "last",
        "average",
    }
    for kind in ("last", "average"):
        evaluation, params = result.evaluation[kind], result.params[kind]
        assert set(evaluation) == {"loss", "accuracy"} and evaluation["loss"].shape == (2, 2)
        for i in range(2):
            for j in range(2):
                expected = sweeps.evaluate(
                    _seen(GLM6, points["feature_scale"][j], points["feature_shift"][j]),
                    jax.tree_util.tree_map(lambda a: a[i, j], params),
                    X6_TEST,
                    Y6_TEST,
                )
                np.testing.assert_allclose(evaluation["loss"][i, j], expected["loss"], rtol=1e-5)
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
    plan = cfg.plan.execution
    assert plan.pad == pad
    names = ("feature_scale", "feature_shift")
    fn = sweeps._compiled(static_config(cfg), plan, names, True, True)
    values = [
        jnp.asarray(np.linspace(0.5, 2.0, P * D6).reshape(P, D6), jnp.float32),
        jnp.asarray(POINTS5["feature_shift"]),
    ]
    base = with_values(traced(SMALL), {"feature_scale": None, "feature_shift": None})
    jaxpr = jax.make_jaxpr(fn)(
        base,
        P6,
        jnp.asarray(X6),
        jnp.asarray(Y6, jnp.int32),
        jax.random.split(jax.random.PRNGKey(0), S),
        values,
        jnp.asarray(X6_TEST),
        jnp.asarray(Y6_TEST, jnp.int32),
    )
    shapes, gathers = _var_shapes(jaxpr)
    per_point = [
        s for s in shapes if len(s) >= 3 and s[-1] == D6 and s[-2] in (pad, m) and P in s[:-2]
    ]
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
    bad_lr = dataclasses.replace(SMALL, hyper=Hyper("0.5"))
    with pytest.raises(ValueError, match="learning_rate must be numeric"):
        sweeps.sweep_points(bad_lr, P6, data, keys, {"noise_multiplier": [1.0, 2.0]})
    with pytest.raises(ValueError, match="learning_rate must be numeric"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": np.array(["0.5", "1.0"])})
    mlp_params = models.mlp(D6, 4, 3).init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="params0 does not fit model"):
        sweeps.sweep_points(SMALL, mlp_params, data, keys, {"learning_rate": [0.1]})
    with pytest.raises(ValueError, match=r"params0\['w'\] has shape"):
        sweeps.sweep_points(
            SMALL,
            {"w": jnp.zeros((D6, 4)), "b": jnp.zeros(3)},
            data,
            keys,
            {"learning_rate": [0.1]},
        )
    with pytest.raises(ValueError, match="share one leading"):
        sweeps.sweep_points(
            SMALL,
            P6,
            data,
            keys,
            {"learning_rate": [0.1, 0.2, 0.3], "noise_multiplier": [1.0, 2.0]},
        )
    with pytest.raises(ValueError, match="share one leading"):
        sweeps.sweep_points(
            SMALL, P6, data, keys, {"learning_rate": [0.1, 0.2], "feature_shift": np.zeros((3, D6))}
        )
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
        sweeps.sweep_points(
            SMALL, P6, data, keys, {"learning_rate": [0.1]}, eval_data=(X6_TEST[:, :5], Y6_TEST)
        )
    with pytest.raises(ValueError, match="chunk_size"):
        sweeps.sweep_points(SMALL, P6, data, keys, {"learning_rate": [0.1]}, chunk_size=0)


def test_per_seed_points_equal_individual_runs():
    """A per-seed field (e.g. DPSGD-F's private mean, whose noise differs per seed) takes
    values[s, p] for seed s and point p; every (seed, point) equals its own train call."""
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    shifts = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    points = {
        "learning_rate": [0.1, 1.0, 2.0],
        "feature_scale": [1.0, 3.0, 0.5],
        "feature_shift": shifts,
    }
    result = sweeps.sweep_points(
        CONFIG,
        PARAMS0,
        (X, Y),
        keys,
        points,
        per_seed=("feature_shift",),
        chunk_size=2,
        eval_data=(X, Y),
    )
    assert result.params["w"].shape == (2, 3, 4, 3)
    for s in range(2):
        for p in range(3):
            hyper = Hyper(
                points["learning_rate"][p],
                extra={"feature_scale": points["feature_scale"][p], "feature_shift": shifts[s, p]},
            )
            single, _ = train(dataclasses.replace(CONFIG, hyper=hyper), PARAMS0, (X, Y), keys[s])
            _assert_close(single, jax.tree_util.tree_map(lambda a: a[s, p], result.params))
    with pytest.raises(ValueError, match="per_seed"):
        sweeps.sweep_points(CONFIG, PARAMS0, (X, Y), keys, points, per_seed=("l2_clip_norm",))
    with pytest.raises(ValueError, match="feature_shift needs a leading axis of 2 seeds"):
        sweeps.sweep_points(
            CONFIG,
            PARAMS0,
            (X, Y),
            keys,
            {**points, "feature_shift": shifts[:1]},
            per_seed=("feature_shift",),
        )


def test_configs_built_the_same_way_share_one_compilation():
    """The compilation cache is keyed on the config (its plan's layout aside): the model factories
    (models compare by spec) and :func:`dpprep.optimizers.optimizer` make two configs built the
    same way equal, so the second sweep compiles nothing."""
    from dpprep import optimizers

    def config():
        plan = DPPlan.create(
            "poisson",
            80,
            batch_size=16,
            steps=3,
            l2_clip_norm=1.0,
            noise_multiplier=1.0,
            delta=DELTA,
        )
        return TrainConfig(
            models.softmax_regression(4, 3),
            Hyper(0.1),
            plan,
            optimizer=optimizers.optimizer("adam"),
        )

    first, second = config(), config()
    assert first == second and hash(first) == hash(second)
    keys = jnp.stack([jax.random.key(0)])
    params0 = first.model.init(jax.random.key(1))
    sweeps.sweep_points(first, params0, (X, Y), keys, {"learning_rate": [0.1, 0.2]})
    misses = sweeps._compiled_group.cache_info().misses
    sweeps.sweep_points(second, params0, (X, Y), keys, {"learning_rate": [0.1, 0.2]})
    assert sweeps._compiled_group.cache_info().misses == misses
    # A hand-built optimizer is another object, so another config (and compilation).
    import optax

    assert dataclasses.replace(first, optimizer=optax.adam(1.0)) != first


# ------------------------------------------------------------------------------------------------
# Runs one after the other (a network's sweep on a CPU) or batched: the same runs.


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_a_network_sweep_runs_its_runs_one_by_one_on_cpu_and_they_are_the_batched_runs():
    """On a CPU a network's sweep runs its seeds × points one after the other through one compiled
    run when it convolves or is clipped by vmap (batching them was slower there); the GLM fast
    path, a network without convolutions on layer taps, an accelerator or a device mesh batch
    them. Either way a point is the run `train` makes: per-seed values and per-seed θ0 included."""
    mlp = models.mlp(4, 8, 3)
    cfg = TrainConfig(
        mlp, Hyper(0.5), _plan(), track_clip_fraction=True, iterates="both", clip_method="vmap"
    )
    assert sweeps.vmaps_runs(CONFIG) and sweeps.vmaps_runs(cfg, mesh=object())
    cpu = jax.default_backend() == "cpu"
    assert sweeps.vmaps_runs(cfg, convolves=False) == (not cpu)
    tapped = dataclasses.replace(cfg, clip_method="auto")
    assert sweeps.vmaps_runs(tapped, convolves=False)
    assert sweeps.vmaps_runs(tapped, convolves=True) == (not cpu)
    keys = jax.random.split(jax.random.PRNGKey(7), 3)
    params0 = jax.tree_util.tree_map(
        lambda *leaves: jnp.stack(leaves), *[mlp.init(jax.random.PRNGKey(s)) for s in range(3)]
    )
    lrs = np.array([[0.1, 0.5], [0.2, 0.6], [0.3, 0.7]], np.float32)  # (seeds, points)
    result = sweeps.sweep_points(
        cfg,
        params0,
        (X, Y),
        keys,
        {"learning_rate": lrs},
        per_seed=("learning_rate",),
        params0_per_seed=True,
        eval_data=(X, Y),
    )
    for s in range(3):
        for p in range(2):
            one = dataclasses.replace(cfg, hyper=Hyper(float(lrs[s, p])))
            params, metrics = train(
                one, jax.tree_util.tree_map(lambda a, s=s: a[s], params0), (X, Y), keys[s]
            )
            got = jax.tree_util.tree_map(lambda a, s=s, p=p: np.asarray(a)[s, p], result.params)
            _assert_close(got, params)
            np.testing.assert_array_equal(result.metrics["batch_size"][s, p], metrics["batch_size"])
    batched = sweeps._compiled(
        static_config(cfg),
        cfg.plan.execution,
        ("learning_rate",),
        True,
        True,
        (True,),
        True,
        None,
        True,
    )
    out = batched(
        with_values(traced(cfg), {"learning_rate": None}),
        params0,
        jnp.asarray(X),
        jnp.asarray(Y),
        keys,
        (jnp.asarray(lrs),),
        jnp.asarray(X),
        jnp.asarray(Y),
    )
    for a, b in zip(
        jax.tree_util.tree_leaves(result.params), jax.tree_util.tree_leaves(out[0]), strict=True
    ):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    for name in ("loss", "accuracy"):
        for it in ("last", "average"):
            np.testing.assert_allclose(
                np.asarray(out[2][it][name]), result.evaluation[it][name], rtol=1e-5, atol=1e-6
            )
