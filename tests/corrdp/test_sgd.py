"""CorrDP-SGD on the engine: per-coordinate noise on the averaged gradient (checked
statistically), Semi's exact zeros, Eq. 5 placement, one-call sweeps = separate runs, clipping
bounds, the quadratic sketch, per-seed initialisation, the DP diagnostic and bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from dpprep import algorithms, models, sweeps
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.accounting import dp
from dpprep.corrdp import noise, sgd
from dpprep.plan import DPPlan


def _zero_data(n, d):
    return np.zeros((n, d), np.float32), np.zeros(n, np.float32)


def test_noise_on_the_mean_has_std_sigma_sqrt_f_per_coordinate():
    """One full-batch GD step on zero gradients moves coordinate i by −α·N(0, σ²·f_i) with
    σ² = C·K_δ/ε², whatever n (the noise is on the mean, not the sum)."""
    d, n = 3000, 7
    model = models.linear_regression(d, fit_intercept=False)
    p0 = model.init(None)
    s = list(range(0, d, 3))
    u = [i for i in range(d) if i % 3]
    tv = np.where(np.arange(d)[u] % 3 == 1, 0.25, 0.64)
    f = noise.method_factors("corrdp", d, s, tv)
    cfg = sgd.CorrDPSGD(model, 1, 1.0, 1e-5)
    eps, c = 0.7, 0.01
    out = sgd.sweep_points(
        cfg,
        p0,
        _zero_data(n, d),
        jax.random.split(jax.random.key(3), 1),
        [sgd.Point("corrdp", eps, c, noise.param_factors(p0, f))],
    )
    moved = -np.asarray(out.params["w"], np.float64)[0, 0, :, 0]
    sigma = math.sqrt(c * noise.k_delta(1e-5)) / eps
    for value in (1.0, 0.25, 0.64):
        sample = moved[f == value] / (sigma * math.sqrt(value))
        assert stats.kstest(sample, "norm").pvalue > 1e-3
        # power: a std off by 30 % is caught
        assert stats.kstest(sample * 1.3, "norm").pvalue < 1e-4


def test_semi_is_exactly_noiseless_on_u_and_eq5_placement_on_w1_rows_and_b1():
    """MLP, plain GD, one step: private − non-private = −α·noise; Semi leaves the W1 rows of the
    insensitive inputs (and, in paper mode, b1) exactly unchanged; every later layer is noisy."""
    d, hidden, n = 4, 6, 32
    model = models.mlp(d, hidden, 2)
    p0 = model.init(jax.random.key(0))
    rng = np.random.default_rng(0)
    data = (rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, 2, n))
    cfg = sgd.CorrDPSGD(model, 1, 0.1, 1e-5)
    u = [2, 3]
    semi_col = np.array([1.0, 1.0, 0.0, 0.0])
    cor_col = np.array([1.0, 1.0, 0.3, 0.5])
    points = [
        sgd.Point("nonprivate", None, 0.0),
        sgd.Point("semi", 1.0, 1.0, noise.param_factors(p0, semi_col, insensitive=u)),
        sgd.Point(
            "semi_b1",
            1.0,
            1.0,
            noise.param_factors(p0, semi_col, bias_factor="sensitive", insensitive=u),
        ),
        sgd.Point("corrdp", 1.0, 1.0, noise.param_factors(p0, cor_col, insensitive=u)),
    ]
    out = sgd.sweep_points(cfg, p0, data, jax.random.split(jax.random.key(1), 1), points).params
    diff = {
        k: np.asarray(v[0, 1:]) - np.asarray(v[0, :1]) for k, v in out.items()
    }  # vs non-private
    np.testing.assert_array_equal(diff["w1"][0, u], 0.0)  # Semi: W1 rows of U exactly 0
    assert np.all(diff["w1"][0, :2] != 0)  # S rows noisy
    np.testing.assert_array_equal(diff["b1"][0], 0.0)  # paper mode: b1 gets U's factor, 0 for Semi
    assert np.all(diff["b1"][1] != 0)  # bias_factor="sensitive": b1 at the full level
    for leaf in ("w2", "b2"):
        assert np.all(diff[leaf] != 0)
    # CorrDP: the noise on the U rows shrinks by sqrt(factor) relative to the same draw at factor 1
    # (the noise key is shared, so the per-row ratio to a Standard run is exact).
    std = sgd.sweep_points(
        cfg,
        p0,
        data,
        jax.random.split(jax.random.key(1), 1),
        [
            sgd.Point("nonprivate", None, 0.0),
            sgd.Point("standard", 1.0, 1.0, noise.param_factors(p0, np.ones(d))),
        ],
    ).params
    dstd = np.asarray(std["w1"][0, 1]) - np.asarray(std["w1"][0, 0])
    np.testing.assert_allclose(
        diff["w1"][2] / dstd, np.sqrt(cor_col)[:, None] * np.ones((1, hidden)), rtol=1e-4
    )
    np.testing.assert_allclose(
        (np.asarray(out["b1"][0, 3]) - np.asarray(out["b1"][0, 0]))
        / (np.asarray(std["b1"][0, 1]) - np.asarray(std["b1"][0, 0])),
        math.sqrt(0.5),
        rtol=1e-4,
    )


def test_one_compiled_sweep_equals_separate_runs():
    """Every (seed × ε × method) in one call = one corrdp_sgd run per seed and point, same key."""
    rng = np.random.default_rng(1)
    n, d = 200, 5
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ rng.normal(size=d) > 0).astype(np.float32)
    model = models.logistic_regression(d, fit_intercept=False)
    p0 = model.init(None)
    cfg = sgd.CorrDPSGD(
        model,
        30,
        0.5,
        1e-5,
        sampling="without_replacement",
        batch_size=32,
        optimizer=optax.adam(1.0),
        clip_mode="per_example",
        l2_clip_norm=1.0,
    )
    s = [0, 1]
    points = [
        sgd.Point(
            m, e, 0.01, noise.param_factors(p0, noise.method_factors(m, d, s, [0.4, 0.2, 0.9]))
        )
        for m in ("standard", "semi", "corrdp")
        for e in (0.5, 2.0)
    ]
    keys = jax.random.split(jax.random.key(7), 3)
    out = sgd.sweep_points(cfg, p0, (x, y), keys, points).params["w"]
    for si in range(3):
        for pi in (0, 3, 5):
            p = points[pi]
            single = sgd.corrdp_sgd(
                cfg, p0, (x, y), keys[si], epsilon=p.epsilon, c=p.c, factors=p.factors
            )
            np.testing.assert_allclose(
                np.asarray(out[si, pi]), np.asarray(single["w"]), rtol=1e-4, atol=1e-6
            )


def test_clipping_modes_bound_the_step():
    rng = np.random.default_rng(2)
    n, d = 64, 6
    x = (10 * rng.normal(size=(n, d))).astype(np.float32)
    y = rng.normal(size=n).astype(np.float32) * 50
    model = models.linear_regression(d, fit_intercept=False)
    p0 = model.init(None)
    keys = jax.random.split(jax.random.key(0), 1)
    nonprivate = [sgd.Point("nonprivate", None, 0.0)]
    for mode, bound in (("per_example", 0.5), ("batch", 0.5)):
        cfg = sgd.CorrDPSGD(model, 1, 1.0, 1e-5, clip_mode=mode, l2_clip_norm=bound)
        step = -np.asarray(sgd.sweep_points(cfg, p0, (x, y), keys, nonprivate).params["w"])[
            0, 0, :, 0
        ]
        assert np.linalg.norm(step) <= bound * (1 + 1e-5)
    # per_example bounds each example: the mean of clipped gradients, computed by hand.
    g = -2 * y[:, None] * x  # per-example gradients at θ = 0
    clipped = g * np.minimum(1.0, 0.5 / np.linalg.norm(g, axis=1))[:, None]
    cfg = sgd.CorrDPSGD(model, 1, 1.0, 1e-5, clip_mode="per_example", l2_clip_norm=0.5)
    step = -np.asarray(sgd.sweep_points(cfg, p0, (x, y), keys, nonprivate).params["w"])[0, 0, :, 0]
    np.testing.assert_allclose(step, clipped.mean(axis=0), rtol=1e-4, atol=1e-6)


def test_quadratic_sketch_runs_the_same_algorithm():
    rng = np.random.default_rng(3)
    n, d = 500, 8
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ rng.normal(size=d) + rng.normal(size=n)).astype(np.float32)
    model = models.linear_regression(d, ridge=1.0 / n, fit_intercept=False)
    p0 = model.init(None)
    cfg = sgd.CorrDPSGD(model, 200, 0.01, 1e-4)
    points = [
        sgd.Point("standard", 1.0, 0.1, noise.param_factors(p0, np.ones(d))),
        sgd.Point("nonprivate", None, 0.0),
    ]
    keys = jax.random.split(jax.random.key(5), 2)
    full = sgd.sweep_points(cfg, p0, (x, y), keys, points).params["w"]
    sketch = sgd.sweep_points(cfg, p0, sgd.quadratic_sketch(x, y), keys, points).params["w"]
    np.testing.assert_allclose(np.asarray(sketch), np.asarray(full), rtol=2e-4, atol=2e-5)
    xs, ys = sgd.quadratic_sketch(x, y)
    theta = rng.normal(size=d)
    assert np.mean((ys - xs @ theta) ** 2) == pytest.approx(np.mean((y - x @ theta) ** 2), rel=1e-5)
    with pytest.raises(ValueError, match="n > m"):
        sgd.quadratic_sketch(x[:5], y[:5])


def test_per_seed_initialisation_matches_separate_runs():
    model = models.mlp(3, 4, 2)
    rng = np.random.default_rng(4)
    data = (rng.normal(size=(40, 3)).astype(np.float32), rng.integers(0, 2, 40))
    keys = jax.random.split(jax.random.key(2), 2)
    inits = sgd.init_per_seed(model, keys)
    # An absolute noise std is CoordinateNoise's (a nominal mechanism: a non-private plan).
    cfg = algorithms.TrainConfig(
        model,
        algorithms.Hyper(0.1, extra={"stddev": 0.5}),
        DPPlan.non_private("full", 40, steps=5),
        extensions=(sgd.CoordinateNoise(),),
    )
    out = sweeps.sweep_points(cfg, inits, data, keys, {"stddev": [0.0, 0.5]}, params0_per_seed=True)
    for s in range(2):
        p0 = jax.tree_util.tree_map(lambda a: a[s], inits)
        single, _ = algorithms.train(dataclasses_replace(cfg, 0.5), p0, data, keys[s])
        np.testing.assert_allclose(
            np.asarray(out.params["w1"][s, 1]), np.asarray(single["w1"]), rtol=1e-5, atol=1e-6
        )
    assert not np.allclose(np.asarray(inits["w1"][0]), np.asarray(inits["w1"][1]))
    with pytest.raises(ValueError, match="params0_per_seed"):
        sweeps.sweep_points(
            cfg,
            model.init(jax.random.key(0)),
            data,
            keys,
            {"stddev": [0.0]},
            params0_per_seed=True,
        )


def dataclasses_replace(cfg, stddev):
    import dataclasses

    extra = {**cfg.hyper.extra, "stddev": stddev}
    return dataclasses.replace(cfg, hyper=dataclasses.replace(cfg.hyper, extra=extra))


def test_standard_dp_diagnostic_matches_the_analytic_gaussian():
    """T full-batch Gaussian steps, replace-one: one Gaussian with std σn/√T on the sum and
    sensitivity 2L (independent closed form, Balle & Wang 2018)."""
    sigma, n, steps, lipschitz, delta = 0.02, 1000, 50, 1.0, 1e-5
    got = sgd.standard_dp_epsilon(sigma, n=n, steps=steps, lipschitz=lipschitz, delta=delta)
    want = dp.analytic_gaussian_epsilon(
        sigma * n / math.sqrt(steps), delta, sensitivity=2 * lipschitz
    )
    assert got == pytest.approx(want, rel=2e-2)
    rdp = sgd.standard_dp_epsilon(
        sigma, n=n, steps=steps, lipschitz=lipschitz, delta=delta, accountant="rdp"
    )
    assert want <= rdp <= 1.5 * want


def test_poisson_and_adam_run():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    model = models.logistic_regression(4)
    p0 = model.init(None)
    cfg = sgd.CorrDPSGD(
        model, 20, 0.05, 1e-5, sampling="poisson", batch_size=50, optimizer=optax.adam(1.0)
    )
    out = sgd.sweep_points(
        cfg,
        p0,
        (x, y),
        jax.random.split(jax.random.key(0), 2),
        [
            sgd.Point("standard", 1.0, 1e-3, noise.param_factors(p0, np.ones(4))),
            sgd.Point("nonprivate", None, 0.0),
        ],
    )
    assert np.all(np.isfinite(out.params["w"]))
    assert cfg.normalize_by(300) == 50
    # Optional projection onto the L2 ball (global norm, bias included).
    ball = sgd.CorrDPSGD(model, 20, 0.5, 1e-5, radius=0.1)
    out = sgd.sweep_points(
        ball,
        p0,
        (x, y),
        jax.random.split(jax.random.key(0), 1),
        [sgd.Point("standard", 1.0, 1.0, noise.param_factors(p0, np.ones(4)))],
    ).params
    norm = math.sqrt(float(np.sum(np.asarray(out["w"]) ** 2) + np.sum(np.asarray(out["b"]) ** 2)))
    assert norm <= 0.1 * (1 + 1e-5)


def test_bad_input():
    model = models.logistic_regression(3, fit_intercept=False)
    p0 = model.init(None)
    with pytest.raises(ValueError, match="sampling"):
        sgd.CorrDPSGD(model, 10, 0.1, 1e-5, sampling="shuffle")
    with pytest.raises(ValueError, match="l2_clip_norm"):
        sgd.CorrDPSGD(model, 10, 0.1, 1e-5, clip_mode="batch")
    with pytest.raises(ValueError, match="clip_mode"):
        sgd.CorrDPSGD(model, 10, 0.1, 1e-5, l2_clip_norm=1.0)
    with pytest.raises(ValueError, match="delta"):
        sgd.CorrDPSGD(model, 10, 0.1, 0.0)
    cfg = sgd.CorrDPSGD(model, 10, 0.1, 1e-5)
    with pytest.raises(ValueError, match="epsilon"):
        sgd.point_values(cfg, p0, 10, [sgd.Point("standard", -1.0, 1.0)])
    with pytest.raises(ValueError, match=r"noise_factors\['w'\]"):
        sgd.point_values(cfg, p0, 10, [sgd.Point("standard", 1.0, 1.0, {"w": np.ones((4, 1))})])
    with pytest.raises(ValueError, match="feature_scale"):
        sgd.point_values(
            cfg,
            p0,
            10,
            [sgd.Point("a", 1.0, 1.0), sgd.Point("partial", None, 0.0, feature_scale=np.ones(3))],
        )


def test_engine_clip_method_none_equals_the_unclipped_vmap_path():
    """The engine's clip_method="none" (no per-example gradients, used for the unclipped networks)
    gives the vmap path's result at l2_clip_norm = inf, and refuses a finite clip norm."""
    model = models.mlp(3, 4, 2)
    p0 = model.init(jax.random.key(0))
    rng = np.random.default_rng(6)
    data = (rng.normal(size=(50, 3)).astype(np.float32), rng.integers(0, 2, 50))
    hyper = algorithms.Hyper(0.1, extra={"stddev": 0.3})
    plan = DPPlan.non_private(
        "without_replacement", 50, batch_size=16, steps=6
    )  # l2_clip_norm = inf
    runs = {}
    for method in ("none", "vmap"):
        cfg = algorithms.TrainConfig(
            model, hyper, plan, clip_method=method, extensions=(sgd.CoordinateNoise(0.5),)
        )
        runs[method], _ = algorithms.train(cfg, p0, data, jax.random.key(1))
    for leaf in p0:
        np.testing.assert_allclose(
            np.asarray(runs["none"][leaf]), np.asarray(runs["vmap"][leaf]), rtol=1e-5, atol=1e-6
        )
    clipped = DPPlan.non_private("full", 50, steps=1, l2_clip_norm=1.0)
    bad = algorithms.TrainConfig(model, algorithms.Hyper(0.1), clipped, clip_method="none")
    with pytest.raises(ValueError, match="clip_method='none'"):
        algorithms.train(bad, p0, data, jax.random.key(1))
    with pytest.raises(ValueError, match="clip_method='none'"):
        sweeps.sweep_points(
            bad, p0, data, jax.random.split(jax.random.key(0), 1), {"l2_clip_norm": [math.inf, 2.0]}
        )
    # An unclipped plan whose sweep asks for a finite clip bound at some point: no per-example
    # gradients to clip, so refused too (not trained unclipped under a l2_clip_norm=2.0 label).
    unclipped = algorithms.TrainConfig(
        model, algorithms.Hyper(0.1), DPPlan.non_private("full", 50, steps=1), clip_method="none"
    )
    with pytest.raises(ValueError, match="clip_method='none'"):
        sweeps.sweep_points(
            unclipped,
            p0,
            data,
            jax.random.split(jax.random.key(0), 1),
            {"l2_clip_norm": [math.inf, 2.0]},
        )


def test_theory_preset_point_has_the_eq4_variances():
    """C_mode="theory": a Point with C = L²T/n² and the floored factors has σ²·f = Eq. 4."""
    tv = np.array([0.3, 0.1, 0.0])
    c = noise.theory_constant(2.0, 100, 50)
    point = sgd.Point("corrdp", 0.5, c)
    factors = noise.corrdp_factors(5, [0, 1], tv, use_floor=True)
    np.testing.assert_allclose(
        point.sigma(1e-5) ** 2 * factors,
        noise.eq4_variances(5, [0, 1], tv, lipschitz=2.0, steps=100, n=50, epsilon=0.5, delta=1e-5),
        rtol=1e-12,
    )
    assert sgd.Point("nonprivate", None, 0.0).sigma(1e-5) == 0.0


_RNG = np.random.default_rng(0)
X = _RNG.normal(size=(64, 3)).astype(np.float32)
Y_BIN = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32)
LOGISTIC = models.logistic_regression(3)
KEY = jax.random.PRNGKey(0)


def _norm(tree):
    return math.sqrt(sum(float(jnp.sum(leaf**2)) for leaf in jax.tree_util.tree_leaves(tree)))


def _assert_trees_close(a, b, rtol=1e-5, atol=1e-6):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=atol)


@pytest.mark.parametrize("batch_clip,binding", [(0.05, True), (100.0, False)])
def test_batch_clip_rescales_the_mean_gradient(batch_clip, binding):
    """Noiseless full-batch GD: the first step moves params by lr·c·g/||g|| when ||g|| > c
    (global norm over w and b) and by lr·g otherwise."""
    lr = 0.3
    cfg = TrainConfig(
        LOGISTIC,
        Hyper(lr),
        DPPlan.non_private("full", len(X), steps=1),
        extensions=(sgd.CoordinateNoise(batch_clip),),
    )
    params0 = {"w": jnp.asarray([[0.3], [-0.2], [0.1]]), "b": jnp.asarray([0.05])}
    params, _ = train(cfg, params0, (X, Y_BIN), KEY)
    g = jax.grad(LOGISTIC.loss)(params0, jnp.asarray(X), jnp.asarray(Y_BIN))
    g_norm = _norm(g)
    assert (g_norm > batch_clip) == binding
    factor = batch_clip / g_norm if binding else 1.0
    expected = jax.tree_util.tree_map(lambda p, gi: p - lr * factor * gi, params0, g)
    _assert_trees_close(params, expected, rtol=1e-5, atol=1e-7)
    moved = _norm(jax.tree_util.tree_map(jnp.subtract, params, params0))
    assert moved == pytest.approx(lr * min(g_norm, batch_clip), rel=1e-5)


def test_coordinate_noise_checks_its_options_and_scales():
    with pytest.raises(ValueError, match="batch_clip_norm must be > 0"):
        sgd.CoordinateNoise(0.0)
    plan = DPPlan.create(
        "full", len(X), steps=1, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    cfg = TrainConfig(
        LOGISTIC,
        Hyper(0.1, extra={"noise_scales": {"w": -1.0, "b": 1.0}}),
        plan,
        extensions=(sgd.CoordinateNoise(),),
    )
    with pytest.raises(ValueError, match="noise_scales"):
        train(cfg, LOGISTIC.init(KEY), (X, Y_BIN), KEY)
