"""The training engine: DP-GD projection and averaging, DP-SGD by iteration, convergence of the
non-private path, normalisation, optimizers, determinism, and bad input rejected before compiling.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpprep import algorithms, models, sampling, streams, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.corrdp.sgd import CoordinateNoise
from dpprep.extensions import Extension, Field
from dpprep.features import AffineFeatures
from dpprep.optimizers import L2BallProjection
from dpprep.plan import DPPlan

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 3)).astype(np.float32)
Y_REG = (X @ np.array([1.0, -2.0, 0.5]) + 0.3 + 0.1 * RNG.normal(size=64)).astype(np.float32)
Y_BIN = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32)
LINEAR = models.linear_regression(3)
LOGISTIC = models.logistic_regression(3)
KEY = jax.random.PRNGKey(0)
N = 64


def _private(sampling_name, *, l2_clip_norm, noise_multiplier, n=N, **layout):
    """The private plan of a run that used to give ``Hyper(lr, noise_multiplier, l2_clip_norm)``."""
    return DPPlan.create(
        sampling_name,
        n,
        l2_clip_norm=l2_clip_norm,
        noise_multiplier=noise_multiplier,
        delta=1e-5,
        **layout,
    )


def _norm(tree):
    return math.sqrt(sum(float(jnp.sum(leaf**2)) for leaf in jax.tree_util.tree_leaves(tree)))


def test_nonprivate_gd_converges_to_least_squares_solution():
    cfg = TrainConfig(LINEAR, Hyper(0.2), DPPlan.non_private("full", N, steps=500))
    params, _ = train(cfg, LINEAR.init(KEY), (X, Y_REG), KEY)
    design = np.hstack([X, np.ones((64, 1))]).astype(np.float64)
    solution = np.linalg.lstsq(design, Y_REG.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(np.asarray(params["w"])[:, 0], solution[:3], atol=1e-4)
    np.testing.assert_allclose(np.asarray(params["b"]), solution[3:], atol=1e-4)


def test_ridge_gd_converges_to_closed_form():
    model = models.linear_regression(3, ridge=0.3, fit_intercept=False)
    cfg = TrainConfig(model, Hyper(0.1), DPPlan.non_private("full", N, steps=500))
    params, _ = train(cfg, model.init(KEY), (X, Y_REG), KEY)
    # Objective mean((y − Xw)²) + 0.3||w||²  =>  (XᵀX/n + 0.3 I) w = Xᵀy/n.
    x64, y64 = X.astype(np.float64), Y_REG.astype(np.float64)
    solution = np.linalg.solve(x64.T @ x64 / 64 + 0.3 * np.eye(3), x64.T @ y64 / 64)
    np.testing.assert_allclose(np.asarray(params["w"])[:, 0], solution, atol=1e-5)


def test_engine_matches_a_plain_optax_loop():
    """Non-private full-batch training == the textbook optax loop, for SGD and Adam."""
    for opt_unit, opt in ((None, optax.sgd(0.3)), (optax.adam(1.0), optax.adam(0.3))):
        cfg = TrainConfig(
            LOGISTIC, Hyper(0.3), DPPlan.non_private("full", N, steps=20), optimizer=opt_unit
        )
        params, _ = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)

        @jax.jit
        def reference_step(ref, state):
            grads = jax.grad(LOGISTIC.loss)(ref, jnp.asarray(X), jnp.asarray(Y_BIN))
            updates, state = opt.update(grads, state, ref)
            return optax.apply_updates(ref, updates), state

        ref = LOGISTIC.init(KEY)
        state = opt.init(ref)
        for _ in range(20):
            ref, state = reference_step(ref, state)
        for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(ref)):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_dp_gd_projection_stays_in_ball_and_average_is_mean_of_iterates():
    radius = 0.25
    cfg = TrainConfig(
        LOGISTIC,
        Hyper(2.0),
        _private("full", steps=30, l2_clip_norm=1.0, noise_multiplier=3.0),
        iterates="average",
        track_params=True,
        extensions=(L2BallProjection(radius),),
    )
    params, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
    iterates = metrics["params"]
    norms = [_norm(jax.tree_util.tree_map(lambda a: a[t], iterates)) for t in range(30)]
    assert max(norms) <= radius * (1 + 1e-6)
    assert max(norms) >= radius * (1 - 1e-6)  # the noise pushes it onto the boundary
    for leaf, stacked in zip(
        jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(iterates)
    ):
        np.testing.assert_allclose(leaf, np.mean(np.asarray(stacked), axis=0), rtol=1e-5, atol=1e-7)
    assert _norm(params) <= radius * (1 + 1e-6)


def test_dp_sgd_by_iteration_touches_records_in_order_and_stops_at_T():
    """Record t is e_t (one-hot) with no intercept, so step t can move only w[t]."""
    n, kappa = 12, 3
    x = np.eye(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    model = models.linear_regression(n, fit_intercept=False)
    cfg = TrainConfig(
        model, Hyper(0.1), DPPlan.non_private("fixed_order", n, kappa=kappa), track_params=True
    )
    assert cfg.plan.steps == n - kappa + 1
    seen = set()
    for seed in range(8):
        params, metrics = train(cfg, model.init(KEY), (x, y), jax.random.PRNGKey(seed))
        stop = int(metrics["stopping_time"])
        seen.add(stop)
        assert 1 <= stop <= n - kappa + 1
        w = np.asarray(metrics["params"]["w"])[:, :, 0]  # (steps, n)
        previous = np.zeros(n)
        for t in range(n - kappa + 1):
            changed = np.nonzero(w[t] != previous)[0]
            assert list(changed) == ([t] if t < stop else [])
            previous = w[t]
        np.testing.assert_array_equal(np.asarray(params["w"])[:, 0], w[-1])
        assert np.count_nonzero(w[-1]) == stop
    assert len(seen) > 1  # the stopping time is random


def test_fixed_order_with_given_steps_is_dp_fgd():
    cfg = TrainConfig(LOGISTIC, Hyper(0.1), DPPlan.non_private("fixed_order", N, steps=10))
    _, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
    assert int(metrics["stopping_time"]) == 10
    np.testing.assert_array_equal(metrics["batch_size"], 1)


def test_poisson_step_is_normalised_by_the_expected_batch_size():
    """One noiseless, unclipped Poisson step moves the params by lr·Σ_batch g_i / (q·n)."""
    cfg = TrainConfig(LINEAR, Hyper(0.5), DPPlan.non_private("poisson", N, batch_size=16, steps=1))
    params, metrics = train(cfg, LINEAR.init(KEY), (X, Y_REG), KEY)
    pad = sampling.poisson_pad_size(64, 16 / 64, 1)
    assert cfg.plan.pad == pad
    k_sample = streams.stream(KEY, streams.BATCH)
    idx, mask, size, _ = sampling.poisson_batch(jax.random.fold_in(k_sample, 0), 64, 16 / 64, pad)
    chosen = np.asarray(idx)[np.asarray(mask) > 0]
    assert int(metrics["batch_size"][0]) == len(chosen) == int(size)
    grad_sum = jax.grad(lambda p: jnp.sum(LINEAR.per_example_loss(p, X[chosen], Y_REG[chosen])))(
        LINEAR.init(KEY)
    )
    np.testing.assert_allclose(params["w"], -0.5 * grad_sum["w"] / 16, rtol=1e-5, atol=1e-7)


def test_same_key_is_bit_identical_and_metrics_are_sane():
    plan = _private("poisson", batch_size=8, steps=40, l2_clip_norm=0.5, noise_multiplier=1.1)
    cfg = TrainConfig(LOGISTIC, Hyper(0.5), plan, track_loss=True, track_clip_fraction=True)
    a, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), jax.random.PRNGKey(7))
    b, _ = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), jax.random.PRNGKey(7))
    c, _ = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), jax.random.PRNGKey(8))
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a["w"], c["w"])
    assert metrics["loss"].shape == (40,) and not metrics["overflow"].any()
    assert metrics["batch_size"].min() >= 0 and metrics["batch_size"].std() > 0
    assert np.all((metrics["clip_fraction"] >= 0) & (metrics["clip_fraction"] <= 1))


def test_clip_fraction_is_opt_in_and_exact():
    """At θ = 0 a logistic example's gradient norm is 0.5·sqrt(||x||² + 1) (residual ±1/2)."""
    norms = 0.5 * np.sqrt(np.sum(X.astype(np.float64) ** 2, axis=1) + 1)
    clip = float(np.quantile(norms, 0.3))
    cfg = TrainConfig(
        LOGISTIC, Hyper(0.1), _private("full", steps=1, l2_clip_norm=clip, noise_multiplier=1.0)
    )
    _, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
    assert "clip_fraction" not in metrics and "loss" not in metrics  # not private: only on request
    cfg = dataclasses.replace(cfg, track_clip_fraction=True)
    _, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
    assert float(metrics["clip_fraction"][0]) == pytest.approx(np.mean(norms > clip), abs=1e-6)


def test_poisson_batch_size_one():
    """Hu et al.'s regime: expected batch size 1, q = 1/n, normalised by 1."""
    # At z = 0.2 the run is only ε ≈ 188-DP, where the default pad's overflow slack (1 + e^ε)·p
    # would
    # exceed δ: the plan is stated with a pad that (almost) never truncates (the draws are the
    # same).
    plan = _private(
        "poisson",
        batch_size=1,
        steps=400,
        l2_clip_norm=1.0,
        noise_multiplier=0.2,
        max_overflow_prob=1e-200,
    )
    cfg = TrainConfig(LOGISTIC, Hyper(0.3), plan)
    params, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
    sizes = np.asarray(metrics["batch_size"])
    assert abs(sizes.mean() - 1.0) < 0.15 and sizes.max() >= 2 and (sizes == 0).any()
    assert float(models.accuracy(LOGISTIC, params, X, Y_BIN)) > 0.85


def test_shuffled_epochs_and_replacement_sampling_learn():
    layout = dict(batch_size=10, epochs=5)
    # Sampling with replacement has no accountant, so no private plan states it: its run adds the
    # same
    # noise (std z·C = 0.5·1) as a nominal std (CoordinateNoise's) in a non-private plan clipping to
    # 1.
    with pytest.raises(ValueError, match="no dp-accounting event"):
        _private("replacement", l2_clip_norm=1.0, noise_multiplier=0.5, **layout)
    runs = [
        (_private("shuffle", l2_clip_norm=1.0, noise_multiplier=0.5, **layout), None, ()),
        (
            DPPlan.non_private("replacement", N, l2_clip_norm=1.0, **layout),
            {"stddev": 0.5},
            (CoordinateNoise(),),
        ),
    ]
    for plan, extra, exts in runs:
        cfg = TrainConfig(LOGISTIC, Hyper(1.0, extra=extra), plan, extensions=exts)
        params, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
        assert float(models.accuracy(LOGISTIC, params, X, Y_BIN)) > 0.9
    assert metrics["batch_size"].shape == (32,)  # ⌈5·64/10⌉ steps with replacement


def test_mlp_uses_vmap_path_and_learns():
    model = models.mlp(3, 8, 2)
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int32)  # XOR-like: not linearly separable
    # ε ≈ 532 at z = 0.3: stated with a pad that never truncates (as in
    # test_poisson_batch_size_one).
    plan = _private(
        "poisson",
        batch_size=32,
        steps=150,
        l2_clip_norm=1.0,
        noise_multiplier=0.3,
        max_overflow_prob=1e-200,
    )
    cfg = TrainConfig(model, Hyper(0.5), plan, optimizer=optax.adam(1.0))
    params, _ = train(cfg, model.init(KEY), (X, y), KEY)
    assert float(models.accuracy(model, params, X, y)) > 0.85


def test_overflow_is_reported():
    """max_overflow_prob=1 pads at the level where a run overflows about once in expectation:
    every overflowing run warns and flags exactly the draws larger than the pad (and among 20
    keys some overflow: the chance that none does is below e^-20)."""
    cfg = TrainConfig(
        LOGISTIC,
        Hyper(0.1),
        DPPlan.non_private("poisson", N, batch_size=32, steps=50, max_overflow_prob=1.0),
    )
    pad = sampling.poisson_pad_size(64, 0.5, 50, max_overflow_prob=1.0)
    overflowed = 0
    for seed in range(20):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, metrics = train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), jax.random.PRNGKey(seed))
        over, sizes = np.asarray(metrics["overflow"]), np.asarray(metrics["batch_size"])
        np.testing.assert_array_equal(over, sizes > pad)
        assert any("overflow_delta" in str(w.message) for w in caught) == bool(over.any())
        # The plan already charges the slack: the warning must not tell the user to add it again.
        assert all(
            "already charge" in str(w.message) for w in caught if "overflow_delta" in str(w.message)
        )
        overflowed += bool(over.any())
    assert overflowed > 0


@pytest.fixture
def no_compile(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("compiled before validating")

    monkeypatch.setattr(algorithms, "_run_jit", fail)
    monkeypatch.setattr(algorithms, "_host_fns", fail)


def _base_plan(sampling_name="poisson", **change):
    options = dict(batch_size=8, steps=5, l2_clip_norm=1.0, noise_multiplier=1.0)
    options.update(change)
    return _private(sampling_name, **options)


BASE = TrainConfig(LOGISTIC, Hyper(0.1), _base_plan())


@pytest.mark.parametrize(
    "change,data,error,match",
    [
        ({}, (np.where(np.arange(64)[:, None] == 3, np.nan, X), Y_BIN), ValueError, "x contains"),
        ({}, (X, np.where(np.arange(64) == 3, np.inf, Y_BIN)), ValueError, "y contains"),
        ({}, (X[:10], Y_BIN), ValueError, "same number of rows"),
        ({}, (X[:, :2], Y_BIN), ValueError, "features"),
        ({}, (X[:, 0], Y_BIN), ValueError, "x must have a leading example axis"),
        (
            {},
            (X[:10], Y_BIN[:10]),
            ValueError,
            "the data has 10 rows but the plan was made for n=64",
        ),
        ({"hyper": Hyper(-0.1)}, (X, Y_BIN), ValueError, "learning_rate"),
        (
            {"hyper": Hyper(0.1, extra={"feature_scale": 2.0})},
            (X, Y_BIN),
            ValueError,
            r"hyper.extra sets \['feature_scale'\], which no extension of the config declares",
        ),
        (
            {"extensions": (AffineFeatures(), AffineFeatures())},
            (X, Y_BIN),
            ValueError,
            "field 'feature_scale' is declared twice",
        ),
        ({"extensions": [AffineFeatures()]}, (X, Y_BIN), TypeError, "extensions must be a tuple"),
        (
            {"extensions": ("features",)},
            (X, Y_BIN),
            TypeError,
            "extensions must be dpprep.extensions.Extension objects",
        ),
        ({"hyper": Hyper(np.array([0.1, 0.2]))}, (X, Y_BIN), ValueError, "sweep"),
        ({"clip_method": "loop"}, (X, Y_BIN), ValueError, "clip_method"),
        (
            {},
            (X, np.where(np.arange(64) == 3, 2.0, Y_BIN)),
            ValueError,
            r"y must hold binary labels in \{0, 1\}",
        ),
        (
            {},
            (X, np.where(np.arange(64) == 3, -1, Y_BIN.astype(int))),
            ValueError,
            "y must hold binary",
        ),
        (
            {"model": LINEAR},
            (X, np.where(np.arange(64) == 3, np.nan, Y_REG)),
            ValueError,
            "y contains",
        ),
    ],
)
def test_bad_input_raises_before_compiling(no_compile, change, data, error, match):
    cfg = dataclasses.replace(BASE, **change)
    with pytest.raises(error, match=match):
        train(cfg, cfg.model.init(KEY), data, KEY)


@pytest.mark.parametrize(
    "change,error,match",
    [
        ({"batch_size": 65}, ValueError, "batch_size must be <= n"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"l2_clip_norm": -1.0}, ValueError, "l2_clip_norm"),
        ({"noise_multiplier": -1.0}, ValueError, "noise_multiplier"),
        (
            {"noise_multiplier": "1"},
            TypeError,
            "noise_multiplier must be a number",
        ),  # used to surface from JAX
        ({"sampling_name": "bootstrap"}, ValueError, "sampling"),
        ({"steps": None}, ValueError, "steps or epochs"),
        ({"epochs": 2}, ValueError, "not both"),
        (
            {"sampling_name": "fixed_order", "steps": 65, "batch_size": None},
            ValueError,
            "steps must be <= n",
        ),
        ({"max_overflow_prob": 0.0}, ValueError, "max_overflow_prob"),
        (
            {"sampling_name": "full", "steps": None, "epochs": 2.5},
            ValueError,
            "epochs must be an integer",
        ),
    ],
)
def test_bad_plan_raises_before_compiling(no_compile, change, error, match):
    """What the run's layout, noise and clip bound must be is the plan's to check, when it is
    made."""
    with pytest.raises(error, match=match):
        train(
            dataclasses.replace(BASE, plan=_base_plan(**change)),
            LOGISTIC.init(KEY),
            (X, Y_BIN),
            KEY,
        )


SOFTMAX = models.softmax_regression(3, 4)
Y_CLASS = RNG.integers(0, 4, size=64)


@pytest.mark.parametrize(
    "model,labels,match",
    [
        (
            SOFTMAX,
            np.where(np.arange(64) == 5, 4, Y_CLASS),
            r"y must hold class labels in \[0, 4\)",
        ),
        (SOFTMAX, np.where(np.arange(64) == 5, -1, Y_CLASS), r"\[0, 4\)"),
        (SOFTMAX, Y_CLASS + 0.5, "integer class labels"),
        (
            models.mlp(3, 5, 3),
            np.where(np.arange(64) == 5, 3, Y_CLASS % 3),
            r"\[0, 3\)",
        ),  # K from the output
        (models.mlp(3, 5, 1, loss="logistic"), Y_CLASS, "binary"),
    ],
)
def test_labels_are_checked_against_the_model(no_compile, model, labels, match):
    cfg = dataclasses.replace(BASE, model=model)
    with pytest.raises(ValueError, match=match):
        train(cfg, model.init(KEY), (X, labels), KEY)


@pytest.mark.parametrize(
    "key", [0, np.zeros(2), np.zeros(2, np.uint32)[None], jax.random.split(KEY, 2)]
)
def test_key_is_checked(no_compile, key):
    with pytest.raises(TypeError, match="key must be a PRNG key"):
        train(BASE, LOGISTIC.init(KEY), (X, Y_BIN), key)


def test_integral_float_labels_and_typed_keys_are_accepted():
    """Float class labels with integral values train exactly like int labels, and a typed key
    (jax.random.key) like the raw key with the same bits (jax.random.PRNGKey)."""
    cfg = dataclasses.replace(BASE, model=SOFTMAX)
    a, _ = train(cfg, SOFTMAX.init(KEY), (X, Y_CLASS.astype(np.float32)), jax.random.key(0))
    b, _ = train(cfg, SOFTMAX.init(KEY), (X, Y_CLASS), jax.random.PRNGKey(0))
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(u, v)


# ------------------------------------------------------------------------------------------------
# Engine v2: bad input before compiling, feature transforms, batch clip, iterates, precision.

MLP = models.mlp(3, 4, 4)
SHIFT = np.array([0.5, -1.0, 0.25], np.float32)


@pytest.mark.parametrize(
    "hyper,match",
    [
        (Hyper("0.5"), "learning_rate must be numeric"),  # used to surface as a JAX TypeError
        (
            Hyper(0.1, extra={"feature_shift": np.ones(4)}),
            "feature_shift must be a vector of the 3 features",
        ),
        (Hyper(0.1, extra={"feature_shift": 1.0}), "feature_shift must be a vector"),
        (
            Hyper(0.1, extra={"feature_scale": np.ones((3, 3))}),
            "feature_scale must be a scalar or a vector",
        ),
        (
            Hyper(0.1, extra={"feature_scale": np.ones(2)}),
            "feature_scale must be a scalar or a vector of the 3",
        ),
        (
            Hyper(0.1, extra={"feature_scale": np.array([1.0, np.nan, 1.0])}),
            "feature_scale contains 1 non-finite value",
        ),
        (
            Hyper(0.1, extra={"feature_shift": np.array([1.0, np.inf, 1.0])}),
            "feature_shift contains",
        ),
        (Hyper(0.1, extra={"feature_scale": "2"}), "feature_scale must be numeric"),
        (Hyper(0.1, extra=[("feature_scale", 2.0)]), "hyper.extra must be a dict"),
    ],
)
def test_bad_hyper_raises_before_compiling(no_compile, hyper, match):
    """Core fields and an extension's own fields (checked by the extension) alike; a wrong type
    (a list for the dict of extra fields) is a TypeError."""
    cfg = dataclasses.replace(BASE, hyper=hyper, extensions=(AffineFeatures(),))
    error = TypeError if isinstance(hyper.extra, list) else ValueError
    with pytest.raises(error, match=match):
        train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)


@pytest.mark.parametrize(
    "params0,match",
    [
        (
            MLP.init(KEY),
            "params0 does not fit model 'softmax_regression'",
        ),  # another model's params
        ({"w": jnp.zeros((3, 5)), "b": jnp.zeros(4)}, r"params0\['w'\] has shape \(3, 5\)"),
        ({"w": jnp.zeros((3, 4)), "b": jnp.zeros(3)}, r"params0\['b'\] has shape \(3,\)"),
        ({"w": jnp.zeros((3, 4))}, "params0 does not fit"),  # intercept missing
    ],
)
def test_params0_of_another_model_raises_before_compiling(no_compile, params0, match):
    cfg = dataclasses.replace(BASE, model=SOFTMAX)
    with pytest.raises(ValueError, match=match):
        train(cfg, params0, (X, Y_CLASS), KEY)


@pytest.mark.parametrize(
    "change,match",
    [
        ({"matmul_precision": "fp64"}, "matmul_precision must be one of"),
        ({"matmul_precision": "HIGHEST"}, "matmul_precision must be one of"),
        ({"matmul_precision": 32}, "matmul_precision must be one of"),
        ({"iterates": "best"}, "iterates must be one of"),
    ],
)
def test_bad_precision_or_iterates_raise_before_compiling(no_compile, change, match):
    with pytest.raises(ValueError, match=match):
        train(dataclasses.replace(BASE, **change), LOGISTIC.init(KEY), (X, Y_BIN), KEY)


def _assert_trees_close(a, b, rtol=1e-5, atol=1e-6):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    "model,labels,scale",
    [
        (LOGISTIC, Y_BIN, np.array([0.5, 2.0, 1.5], np.float32)),
        (MLP, Y_CLASS, np.array([0.5, 2.0, 1.5], np.float32)),  # vmap path
    ],
)
def test_training_with_a_feature_transform_equals_training_on_transformed_data(
    model, labels, scale
):
    """Same key: same noise, so the runs agree to float rounding (params and the tracked loss),
    with the transform applied (it differs from the untransformed run)."""
    plan = _private("full", steps=4, l2_clip_norm=0.5, noise_multiplier=0.8)
    cfg = TrainConfig(model, None, plan, track_loss=True, extensions=(AffineFeatures(),))
    hyper = dict(learning_rate=0.3)
    params0 = model.init(KEY)
    transform = {"feature_scale": scale, "feature_shift": SHIFT}
    a, ma = train(
        dataclasses.replace(cfg, hyper=Hyper(**hyper, extra=transform)), params0, (X, labels), KEY
    )
    xt = (X.astype(np.float64) * scale - SHIFT).astype(np.float32)
    b, mb = train(dataclasses.replace(cfg, hyper=Hyper(**hyper)), params0, (xt, labels), KEY)
    _assert_trees_close(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ma["loss"], mb["loss"], rtol=1e-5, atol=1e-6)
    c, _ = train(dataclasses.replace(cfg, hyper=Hyper(**hyper)), params0, (X, labels), KEY)
    assert not np.allclose(
        jax.tree_util.tree_leaves(a)[0], jax.tree_util.tree_leaves(c)[0], rtol=1e-3
    )


@pytest.mark.parametrize("magnitude", [1e19, 1e30])
def test_huge_features_train_to_finite_parameters(magnitude):
    """Issue: the fast path returned NaN parameters for features around 1e19 (the vmap path
    was fine). Both paths now give finite parameters, equal in relative terms."""
    x = (X * magnitude).astype(np.float32)
    out = {}
    for method in ("fast", "vmap"):
        cfg = TrainConfig(
            LOGISTIC,
            Hyper(0.5),
            DPPlan.non_private("full", N, steps=5, l2_clip_norm=1.0),
            clip_method=method,
        )
        out[method], _ = train(cfg, LOGISTIC.init(KEY), (x, Y_BIN), KEY)
        for leaf in jax.tree_util.tree_leaves(out[method]):
            assert np.all(np.isfinite(leaf)), method
    assert float(np.max(np.abs(out["fast"]["w"]))) > 0
    _assert_trees_close(out["fast"], out["vmap"], rtol=1e-4, atol=1e-6)


def test_iterates_both_equals_separate_last_and_average_runs():
    cfg = TrainConfig(
        LOGISTIC,
        Hyper(0.5),
        _private("full", steps=6, l2_clip_norm=1.0, noise_multiplier=1.0),
        extensions=(L2BallProjection(0.5),),
    )
    both, metrics = train(
        dataclasses.replace(cfg, iterates="both"), LOGISTIC.init(KEY), (X, Y_BIN), KEY
    )
    assert set(both) == {"last", "average"}
    last, _ = train(dataclasses.replace(cfg, iterates="last"), LOGISTIC.init(KEY), (X, Y_BIN), KEY)
    average, m_avg = train(
        dataclasses.replace(cfg, iterates="average"), LOGISTIC.init(KEY), (X, Y_BIN), KEY
    )
    _assert_trees_close(both["last"], last, rtol=1e-6, atol=1e-7)
    _assert_trees_close(both["average"], average, rtol=1e-6, atol=1e-7)
    assert int(metrics["stopping_time"]) == int(m_avg["stopping_time"])
    assert not np.allclose(both["last"]["w"], both["average"]["w"])


@pytest.mark.backend_precision  # what the precision setting itself puts in the jaxpr
def test_matmul_precision_reaches_the_step():
    """matmul_precision="float32" puts HIGHEST precision on the step's dot_generals; None
    leaves the default on the model's own products (the logits), while the clipped sum asks for
    HIGHEST whatever the setting (``clipping.CLIPPED_SUM_PRECISION``: a GPU's TF32 default would
    let a contribution exceed C)."""

    def jaxpr(precision):
        plan = _private("poisson", batch_size=8, steps=2, l2_clip_norm=1.0, noise_multiplier=1.0)
        cfg = TrainConfig(SOFTMAX, Hyper(0.1), plan, matmul_precision=precision)
        fn = algorithms.make_train_fn(cfg, SOFTMAX.init(KEY))
        return str(
            jax.make_jaxpr(fn)(
                SOFTMAX.init(KEY), jnp.asarray(X), jnp.asarray(Y_CLASS, jnp.int32), KEY
            )
        )

    highest, default = jaxpr("float32"), jaxpr(None)
    dots = highest.count("dot_general")
    assert dots >= 2 and dots == default.count("dot_general")
    assert highest.count("precision=(Precision.HIGHEST, Precision.HIGHEST)") == dots
    pinned = default.count("precision=(Precision.HIGHEST, Precision.HIGHEST)")
    assert 1 <= pinned < dots  # the clipped sum only; the logits keep the default


def test_non_numeric_or_out_of_float32_data_is_refused_and_a_diverged_run_warns():
    mixed = np.array([[1.0, "a"], [2.0, None]], dtype=object)
    with pytest.raises(ValueError, match="x must be numeric, got dtype object"):
        train(
            TrainConfig(LOGISTIC, Hyper(0.1), DPPlan.non_private("full", 2, steps=1)),
            LOGISTIC.init(KEY),
            (mixed, np.zeros(2, np.float32)),
            KEY,
        )
    huge = np.array(X, np.float64)
    huge[0, 0] = 1e300
    with pytest.raises(ValueError, match="beyond float32's range"):
        train(
            TrainConfig(LOGISTIC, Hyper(0.1), DPPlan.non_private("full", N, steps=1)),
            LOGISTIC.init(KEY),
            (huge, Y_BIN),
            KEY,
        )
    with pytest.warns(RuntimeWarning, match="non-finite value"):
        train(
            TrainConfig(
                LOGISTIC,
                Hyper(1e38),
                _private("full", steps=3, l2_clip_norm=1.0, noise_multiplier=1e38),
            ),
            LOGISTIC.init(KEY),
            (X, Y_BIN),
            KEY,
        )


def test_l2_ball_projection_refuses_a_bad_radius():
    for radius in (0.0, -1.0, math.inf, math.nan, "1"):
        with pytest.raises(ValueError, match="radius must be a finite number > 0"):
            L2BallProjection(radius)


@dataclasses.dataclass(frozen=True)
class _Tilt(Extension):
    """A user's extension: a traced field that shifts every update (to check the plumbing)."""

    fields = {"tilt": Field(default=0.0)}

    def wrap(self, tx, values):
        def update_fn(updates, state, params=None):
            updates, state = tx.update(updates, state, params)
            return jax.tree_util.tree_map(lambda u: u + values["tilt"], updates), state

        return optax.GradientTransformation(tx.init, update_fn)


def test_a_user_extension_gets_its_traced_field_in_train_and_sweeps():
    """An extension the core does not know: its field is set in Hyper.extra by train, swept by
    name by sweep_points, and the default applies when it is not set."""
    from dpprep import sweeps

    cfg = TrainConfig(
        LINEAR, Hyper(0.0), DPPlan.non_private("full", N, steps=3), extensions=(_Tilt(),)
    )
    params0 = LINEAR.init(KEY)
    assert "tilt" in algorithms.sweepable_fields(cfg)
    plain, _ = train(cfg, params0, (X, Y_REG), KEY)
    _assert_trees_close(plain, params0)  # learning rate 0, tilt 0 by default
    tilted, _ = train(
        dataclasses.replace(cfg, hyper=Hyper(0.0, extra={"tilt": 0.5})), params0, (X, Y_REG), KEY
    )
    np.testing.assert_allclose(tilted["w"], np.full((3, 1), 1.5), rtol=1e-6)
    out = sweeps.sweep_points(
        cfg, params0, (X, Y_REG), jax.random.split(KEY, 2), {"tilt": [0.0, 1.0, -1.0]}
    )
    np.testing.assert_allclose(
        out.params["b"][:, :, 0], np.array([[0.0, 3.0, -3.0]] * 2), rtol=1e-6
    )
    with pytest.raises(ValueError, match="cannot sweep"):
        sweeps.sweep_points(
            dataclasses.replace(cfg, extensions=()),
            params0,
            (X, Y_REG),
            jax.random.split(KEY, 2),
            {"tilt": [0.0, 1.0]},
        )


# ------------------------------------------------------------------------------------------------
# Microbatching through the drivers: the same run, m per-example gradients in memory at a time.


def _mlp_run(microbatch_size, sampling_name="poisson"):
    model = models.mlp(3, 8, 2)
    plan = DPPlan.create(
        sampling_name,
        N,
        batch_size=16,
        steps=12,
        l2_clip_norm=0.5,
        noise_multiplier=1.0,
        delta=1e-5,
    )
    config = TrainConfig(
        model,
        Hyper(0.5),
        plan,
        optimizer=optax.adam(1.0),
        microbatch_size=microbatch_size,
        track_clip_fraction=True,
    )
    return config, model.init(jax.random.PRNGKey(1)), (X, Y_BIN.astype(np.int32))


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.parametrize("m", [1, 5, 16])
def test_train_and_sweeps_with_microbatches_run_the_same_private_run(m):
    """A Poisson MLP run (padded batches) in microbatches of m equals the run without, in `train`
    and in a sweep; metrics and the ε charged are the same."""
    ref_config, params0, data = _mlp_run(None)
    config = dataclasses.replace(ref_config, microbatch_size=m)
    ref, ref_metrics = train(ref_config, params0, data, KEY)
    got, metrics = train(config, params0, data, KEY)
    for a, b in zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(got)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["clip_fraction"], ref_metrics["clip_fraction"])
    assert metrics["epsilon"] == ref_metrics["epsilon"] == config.plan.epsilon

    keys = jax.random.split(KEY, 2)
    swept = sweeps.sweep_points(config, params0, data, keys, {"learning_rate": [0.5]})
    ref_swept = sweeps.sweep_points(ref_config, params0, data, keys, {"learning_rate": [0.5]})
    for a, b in zip(
        jax.tree_util.tree_leaves(ref_swept.params), jax.tree_util.tree_leaves(swept.params)
    ):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)


def test_own_loop_microbatches_through_the_plan():
    """`plan.clipped_grad(..., microbatch_size=m)` in a user's own loop: the same clipped sum."""
    config, params0, (x, y) = _mlp_run(None)
    plan = config.plan
    loss = lambda p, b: config.model.per_example_loss(p, b[0], b[1])[0]  # noqa: E731
    batch = plan.batch(KEY, 0, (jnp.asarray(x), jnp.asarray(y)))
    whole = plan.clipped_grad(loss)(params0, batch)
    micro = plan.clipped_grad(loss, microbatch_size=4)(params0, batch)
    for a, b in zip(jax.tree_util.tree_leaves(whole.grad), jax.tree_util.tree_leaves(micro.grad)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)


def test_poisson_padding_costs_at_most_one_microbatch():
    """The samplers put Poisson's padded slots last, so with microbatches of m only the last
    computed
    microbatch can hold padding: at B = 256 and m = 16 the computed slots stay within 1.15× the
    realised batch (the padded batch itself is `plan.pad`)."""
    plan = DPPlan.create(
        "poisson",
        60_000,
        batch_size=256,
        steps=200,
        l2_clip_norm=1.0,
        noise_multiplier=1.0,
        delta=1e-5,
    )
    x = jnp.zeros((60_000, 1))
    worst = 0.0
    for t in range(0, 200, 7):
        mask = plan.batch(KEY, t, x).mask
        mask = np.asarray(mask)
        size = int(mask.sum())
        assert np.all(mask[:size] == 1) and np.all(mask[size:] == 0)  # real slots first
        worst = max(worst, math.ceil(size / 16) * 16 / size)
    assert worst <= 1.15 < plan.pad / 256


def test_microbatch_size_is_checked_before_compiling():
    config, params0, data = _mlp_run(None)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="microbatch_size"):
            train(dataclasses.replace(config, microbatch_size=bad), params0, data, KEY)
    with pytest.raises(ValueError, match="microbatch_size is for the core"):
        algorithms.checked_plan(
            dataclasses.replace(config, microbatch_size=4, extensions=(AffineFeatures(),)), N
        )


# ------------------------------------------------------------------------------------------------
# Runs cut into compiled calls (steps_per_call): the same run, only its speed differs.


def _assert_same_run(ref, got, rtol=1e-5, atol=1e-6):
    (ref_params, ref_metrics), (params, metrics) = ref, got
    for a, b in zip(
        jax.tree_util.tree_leaves(ref_params), jax.tree_util.tree_leaves(params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=rtol, atol=atol)
    assert set(metrics) == set(ref_metrics)
    # The draws must be step for step the same: a skipped, repeated or restarted step shows here.
    for name in ("batch_size", "overflow", "stopping_time"):
        np.testing.assert_array_equal(np.asarray(metrics[name]), np.asarray(ref_metrics[name]))
    for name in set(metrics) - {
        "batch_size",
        "overflow",
        "stopping_time",
        "epsilon",
        "delta",
        "guarantee",
    }:
        for a, b in zip(
            jax.tree_util.tree_leaves(ref_metrics[name]),
            jax.tree_util.tree_leaves(metrics[name]),
            strict=True,
        ):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=rtol, atol=atol)
    assert metrics["epsilon"] == ref_metrics["epsilon"]


RUNS_IN_CALLS = {
    # Poisson MLP (padded batches, random sizes), Adam, every metric and both iterates.
    "poisson_mlp": lambda: (
        TrainConfig(
            models.mlp(3, 8, 2),
            Hyper(0.5),
            DPPlan.create(
                "poisson",
                N,
                batch_size=16,
                steps=12,
                l2_clip_norm=0.5,
                noise_multiplier=1.0,
                delta=1e-5,
            ),
            optimizer=optax.adam(1.0),
            iterates="both",
            track_loss=True,
            track_clip_fraction=True,
            track_params=True,
        ),
        models.mlp(3, 8, 2).init(jax.random.PRNGKey(1)),
        (X, Y_BIN.astype(np.int32)),
    ),
    # Shuffled epochs (the prepared permutations carried across calls), GLM fast path.
    "shuffle_glm": lambda: (
        TrainConfig(
            LOGISTIC,
            Hyper(0.3),
            _private("shuffle", l2_clip_norm=1.0, noise_multiplier=1.0, batch_size=10, epochs=2),
        ),
        LOGISTIC.init(KEY),
        (X, Y_BIN),
    ),
    # DP-SGD by iteration: a random stop, carried across calls.
    "iteration": lambda: (
        TrainConfig(
            LINEAR, Hyper(0.05), DPPlan.non_private("fixed_order", N, kappa=8), track_params=True
        ),
        LINEAR.init(KEY),
        (X, Y_REG),
    ),
}


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.parametrize("name", sorted(RUNS_IN_CALLS))
@pytest.mark.parametrize("per_call", [1, 5])
def test_a_run_cut_into_calls_is_the_same_run(name, per_call):
    """``steps_per_call=k`` (a host loop over calls of k straight-line steps; 5 does not divide the
    runs' steps, so the last call takes the remainder) runs what one scan runs: the same batches,
    step for step, the same noise, iterates and metrics, at the same ε."""
    config, params0, data = RUNS_IN_CALLS[name]()
    ref = train(dataclasses.replace(config, steps_per_call=None), params0, data, KEY)
    got = train(dataclasses.replace(config, steps_per_call=per_call), params0, data, KEY)
    _assert_same_run(ref, got)
    if name == "iteration":  # the stop was drawn and honoured: the iterates after it are frozen
        stop = int(got[1]["stopping_time"])
        assert 1 <= stop < N - 8 + 1
        w = np.asarray(got[1]["params"]["w"])
        assert np.all(w[stop:] == w[stop - 1]) and np.any(w[stop - 1] != w[0])


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_a_run_is_cut_where_asked(monkeypatch):
    """k steps per call means ceil(T/k) calls covering steps 0..T−1 exactly once, in order."""
    config, params0, data = RUNS_IN_CALLS["poisson_mlp"]()
    calls = []
    run_in_calls = algorithms.run_in_calls

    def spy(begin, advance, end, steps, per_call):
        def counted(state, t0, count):
            calls.append((int(t0), count))
            return advance(state, t0, count)

        return run_in_calls(begin, counted, end, steps, per_call)

    monkeypatch.setattr(algorithms, "run_in_calls", spy)
    train(dataclasses.replace(config, steps_per_call=5), params0, data, KEY)
    assert calls == [(0, 5), (5, 5), (10, 2)]
    calls.clear()
    train(dataclasses.replace(config, steps_per_call=None), params0, data, KEY)
    train(dataclasses.replace(config, steps_per_call=12), params0, data, KEY)  # one call: one scan
    assert calls == []


def test_auto_steps_per_call_keeps_one_scan_for_models_that_do_not_convolve():
    """A step that does not convolve is too cheap for a host call each: one scan (the CNN's cut is
    tested with the frameworks)."""
    plan = DPPlan.non_private("full", N, steps=2)
    mlp = models.mlp(3, 8, 2)
    assert not algorithms.convolves(mlp, mlp.init(KEY), X)
    assert algorithms.steps_per_call(TrainConfig(mlp, Hyper(0.1), plan), mlp.init(KEY), X) is None
    assert (
        algorithms.steps_per_call(TrainConfig(LOGISTIC, Hyper(0.1), plan), LOGISTIC.init(KEY), X)
        is None
    )
    assert (
        algorithms.steps_per_call(
            TrainConfig(mlp, Hyper(0.1), plan, steps_per_call=3), mlp.init(KEY), X
        )
        == 3
    )


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "fast"])
def test_steps_per_call_is_checked_before_compiling(no_compile, bad):
    with pytest.raises((TypeError, ValueError), match="steps_per_call"):
        train(dataclasses.replace(BASE, steps_per_call=bad), LOGISTIC.init(KEY), (X, Y_BIN), KEY)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_data_check_finds_every_non_finite_value_in_one_pass_per_extreme(dtype, bad):
    # check_finite_array reads only the smallest and largest value (NaN propagates through both,
    # ±inf shows): whatever the dtype, position or sign, a non-finite value is refused, counted.
    from dpprep.validation import check_finite_array

    for where in [(0, 0), (7, 2), (-1, -1)]:
        x = np.linspace(-3, 3, 60, dtype=dtype).reshape(20, 3)
        x[where] = bad
        x[3, 1] = bad
        with pytest.raises(ValueError, match="x contains 2 non-finite value"):
            check_finite_array(x, "x", float32=True)
    fine = np.linspace(-3, 3, 60, dtype=dtype).reshape(20, 3)
    assert check_finite_array(fine, "x", float32=True) is not None
    # float32's range, checked on both signs; integers always fit
    for big in (1e39, -1e39):
        wide = np.zeros((4, 2), np.float64)
        wide[1, 1] = big
        with pytest.raises(ValueError, match="beyond float32's range"):
            check_finite_array(wide, "x", float32=True)
        check_finite_array(wide, "x")  # the range only where float32 is asked for
    check_finite_array(np.array([[np.iinfo(np.int64).max]]), "x", float32=True)
    check_finite_array(np.zeros((0, 3), np.float32), "x", float32=True)  # empty: nothing to scan
