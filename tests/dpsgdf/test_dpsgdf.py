"""DPSGD-F (Algorithm 3): normalisation, private mean, calibration, bias correction (C7), the
gradient-norm closed form (C8), the method switch, the shared-batch grid, bad inputs."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import clipping, dpsgdf, features, models, sweeps
from dpprep.accounting import dp
from dpprep.algorithms import static_config, traced, with_values
from dpprep.plan import DPPlan

RNG = np.random.default_rng(0)
N, D, K = 120, 6, 3
X = np.abs(RNG.normal(size=(N, D))).astype(np.float32) + 0.5
Y = RNG.integers(0, K, size=N)
XT = np.abs(RNG.normal(size=(40, D))).astype(np.float32) + 0.5
YT = RNG.integers(0, K, size=40)


def small(method="dpsgdf", **kw):
    base = dict(
        method=method,
        epsilon=2.0,
        eps_F=0.1,
        feature_norm=10.0,
        batch_size=24,
        epochs=2,
        learning_rate=0.5,
    )
    base.update(kw)
    if method != "dpsgdf":
        base["eps_F"] = None
    return dpsgdf.DpsgdfConfig(**base)


def test_normalisation_and_zero_rows():
    x = np.array([[3.0, 4.0], [0.0, 0.0], [1e-20, 0.0]], np.float32)
    out = dpsgdf.normalize(x, 10.0)
    np.testing.assert_allclose(out[0], [6.0, 8.0], rtol=1e-6)
    np.testing.assert_array_equal(out[1], [0.0, 0.0])
    np.testing.assert_allclose(np.linalg.norm(out[2]), 10.0, rtol=1e-6)


def test_mean_sigma_values_c1():
    for eps_f, sigma in [(0.02, 131.80), (0.05, 57.77), (0.1, 30.75), (0.15, 21.22), (0.2, 16.30)]:
        assert dpsgdf.mean_sigma(eps_f, 1e-5) == pytest.approx(sigma, rel=1e-3)


def test_private_mean_noise_on_the_sum_and_its_own_stream():
    unit = dpsgdf.unit_normalize(X)
    key = jax.random.key(3)
    mu = dpsgdf.private_mean(unit, 10.0, 0.1, 1e-5, key)
    xi = np.asarray(jax.random.normal(dpsgdf.streams.stream(key, "private_mean"), (D,)))
    expected = (
        10.0 * unit.astype(np.float64).sum(0) + dpsgdf.mean_sigma(0.1, 1e-5) * 10.0 * xi
    ) / N
    np.testing.assert_allclose(mu, expected, rtol=1e-5)
    # replace-one doubles the sensitivity of the sum (A2)
    mu2 = dpsgdf.private_mean(unit, 10.0, 0.1, 1e-5, key, neighboring_relation="replace_one")
    np.testing.assert_allclose(
        mu2 - 10.0 * unit.mean(0), 2 * (mu - 10.0 * unit.mean(0)), rtol=1e-4, atol=1e-6
    )


def test_bias_correction_identity_c7():
    """W_prvᵀx + b_prv = W'ᵀ(x − μ̂) + b' (fp32, 1e-5 relative)."""
    params = {
        "w": jnp.asarray(RNG.normal(size=(D, K)), jnp.float32),
        "b": jnp.asarray(RNG.normal(size=K), jnp.float32),
    }
    mu = jnp.asarray(RNG.normal(size=D), jnp.float32)
    x = jnp.asarray(XT)
    corrected = dpsgdf.bias_correct(params, mu)
    lhs = x @ corrected["w"] + corrected["b"]
    rhs = (x - mu) @ params["w"] + params["b"]
    np.testing.assert_allclose(
        np.asarray(lhs), np.asarray(rhs), rtol=1e-5, atol=1e-5 * float(jnp.max(jnp.abs(rhs)))
    )
    np.testing.assert_array_equal(np.asarray(corrected["w"]), np.asarray(params["w"]))


def test_gradient_norm_closed_form_c8():
    """‖g_i‖ = ‖r_i‖·sqrt(‖x'_i‖² + 1) on x' = C_F·x̃ − μ̂, against autodiff with vmap."""
    model = models.softmax_regression(D, K)
    params = {
        "w": jnp.asarray(RNG.normal(size=(D, K)) * 0.1, jnp.float32),
        "b": jnp.asarray(RNG.normal(size=K), jnp.float32),
    }
    unit = jnp.asarray(dpsgdf.unit_normalize(X))
    mu = jnp.asarray(10.0 * np.asarray(unit).mean(0) + RNG.normal(size=D) * 0.1, jnp.float32)
    shifted = 10.0 * unit - mu
    grads = clipping.per_example_grads(model, params, shifted, jnp.asarray(Y))
    auto = np.sqrt(
        sum(
            np.sum(np.asarray(g).reshape(N, -1) ** 2, axis=1)
            for g in jax.tree_util.tree_leaves(grads)
        )
    )
    residual = np.asarray(model.residual(params, shifted, jnp.asarray(Y)), np.float64)
    closed = np.linalg.norm(residual, axis=1) * np.sqrt(
        np.sum(np.asarray(shifted, np.float64) ** 2, axis=1) + 1
    )
    np.testing.assert_allclose(closed, auto, rtol=1e-5)
    # The engine's fast path never forms x' (rank-1 corrections) and adds the expansion's
    # rounding bound, so its norms are upper bounds within a hair of the exact ones.
    _, fast = features._clipped_sum_fast(model, params, unit, jnp.asarray(Y), 1.0, None, 10.0, mu)
    assert np.all(np.asarray(fast) >= auto * (1 - 1e-6))
    np.testing.assert_allclose(np.asarray(fast), auto, rtol=1e-3)
    fs, _ = features._clipped_sum_fast(model, params, unit, jnp.asarray(Y), 1.0, None, 10.0, mu)
    vs = clipping.clipped_grad(model, l2_clip_norm=1.0, method="vmap")(
        params, (features.affine_features(unit, 10.0, mu), jnp.asarray(Y)), mask=None
    ).grad
    for a, b in zip(jax.tree_util.tree_leaves(fs), jax.tree_util.tree_leaves(vs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_calibration_is_composed_and_exact():
    cfg = small(epsilon=1.0, eps_F=0.2, batch_size=30, epochs=3)
    cal = dpsgdf.calibrate(cfg, N, with_alone=True)
    base = dpsgdf.calibrate(dataclasses.replace(cfg, method="dpsgd", eps_F=None), N)
    assert cal.noise_multiplier > base.noise_multiplier  # the mean step costs some budget
    plan = dpsgdf.layout(cfg, N)  # the run's data access, uncalibrated
    eps = plan.epsilon(cal.noise_multiplier, 1e-5, fixed_events=(dp.gaussian_event(cal.sigma_F),))
    assert eps == pytest.approx(1.0, abs=2e-3) and eps <= 1.0 + 1e-6
    assert cal.epsilon_dpsgd_alone < 1.0
    # the run's DPPlan is that calibration: the same z, and the composed ε as its spent ε
    run_plan = dpsgdf.plan(cfg, N)
    assert run_plan.execution == plan and run_plan.noise_multiplier == cal.noise_multiplier
    assert run_plan.epsilon == pytest.approx(eps, rel=1e-12)


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_method_switch_shares_batches_and_bias_corrects():
    key = jax.random.key(5)
    f = dpsgdf.fit(small(), X, Y, key, eval_data=(XT, YT), num_classes=K)
    b = dpsgdf.fit(small("dpsgd"), X, Y, key, eval_data=(XT, YT), num_classes=K)
    npv = dpsgdf.fit(small("nonprivate", epochs=2), X, Y, key, eval_data=(XT, YT), num_classes=K)
    # same Poisson draws (A21)
    np.testing.assert_array_equal(f.metrics["batch_size"], b.metrics["batch_size"])
    assert np.all(b.mu_hat == 0) and np.any(f.mu_hat != 0)
    assert npv.calibration is None and set(f.params) == {"last", "average"}
    # evaluation of the corrected params on normalised, un-centred test features equals the
    # centred params on centred features
    xt = dpsgdf.normalize(XT, 10.0)
    model = models.softmax_regression(D, K)
    lhs = model.apply(f.params["last"], jnp.asarray(xt))
    rhs = model.apply(f.centred["last"], jnp.asarray(xt) - f.mu_hat)
    np.testing.assert_allclose(np.asarray(lhs), np.asarray(rhs), rtol=1e-4, atol=1e-4)
    acc = float(models.accuracy(model, f.params["last"], jnp.asarray(xt), jnp.asarray(YT)))
    assert acc == pytest.approx(f.evaluation["last"]["accuracy"])


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="eps_F"):
        small(eps_F=2.0)
    with pytest.raises(ValueError, match="eps_F"):
        small(eps_F=0.0)
    with pytest.raises(ValueError, match="eps_F"):
        small(eps_F=-0.1)
    with pytest.raises(ValueError, match="feature_norm"):
        small(feature_norm=0.0)
    with pytest.raises(ValueError, match="feature_norm"):
        small(feature_norm=-1.0)
    with pytest.raises(ValueError, match="neighboring_relation"):
        small(neighboring_relation="swap")
    with pytest.raises(ValueError, match="feature_norms"):
        dpsgdf.grid_models(["dpsgdf"], [], [1.0], [0.05], 1.0)
    with pytest.raises(ValueError, match="feature_norms"):
        dpsgdf.grid_models(["dpsgdf"], [0.0], [1.0], [0.05], 1.0)
    with pytest.raises(ValueError, match="eps_fs"):
        dpsgdf.grid_models(["dpsgdf"], [1.0], [1.0], [1.5], 1.0)
    with pytest.raises(ValueError, match="empty grid"):
        dpsgdf.grid_group("u", [], 10, 1, N, np.zeros(D), jax.random.split(jax.random.key(0), 2))
    # a unit whose calibration cannot converge: the mean step alone spends more than epsilon
    bad = dpsgdf.GridModel("dpsgdf", 1.0, 0.999999, 1.0, 1.0)
    with pytest.raises(ValueError, match="grid unit u7"):
        dpsgdf.grid_group(
            "u7",
            [bad],
            24,
            1,
            N,
            np.zeros(D),
            jax.random.split(jax.random.key(0), 2),
            num_classes=K,
        )


def test_replace_one_option_costs_more_noise():
    add = dpsgdf.calibrate(small(epsilon=1.0, batch_size=30, epochs=3), N)
    rep = dpsgdf.calibrate(
        small(epsilon=1.0, batch_size=30, epochs=3, neighboring_relation="replace_one"), N
    )
    assert rep.mean_multiplier == pytest.approx(2 * add.mean_multiplier)
    assert rep.noise_multiplier > 1.5 * add.noise_multiplier


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_grid_group_equals_fit_per_model():
    """Every model of a shared-batch group equals running it alone (fit -> train) with its key."""
    keys = jax.random.split(jax.random.key(11), 2)
    unit = dpsgdf.unit_normalize(X)
    ms = dpsgdf.grid_models(["dpsgdf", "dpsgd"], [1.0, 10.0], [2.0], [0.1, 0.2], 2.0)
    group = dpsgdf.grid_group(
        "g", ms, 24, 2, N, unit.astype(np.float64).mean(0), keys, num_classes=K
    )
    assert group.per_seed == ("feature_shift",) and group.points["feature_shift"].shape == (
        2,
        len(ms),
        D,
    )
    res = sweeps.sweep_points(
        group.config,
        group.config.model.init(None),
        (unit, Y),
        keys,
        group.points,
        per_seed=group.per_seed,
        eval_data=(dpsgdf.unit_normalize(XT), YT),
        chunk_size=3,
    )
    for s in range(2):
        for p, m in enumerate(ms):
            cfg = m.config(24, 2)
            alone = dpsgdf.fit(cfg, X, Y, keys[s], eval_data=(XT, YT), num_classes=K)
            for which in ("last", "average"):
                got = jax.tree_util.tree_map(lambda a: a[s, p], res.params[which])
                want = alone.centred[which]
                for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)
                assert res.evaluation[which]["accuracy"][s, p] == pytest.approx(
                    alone.evaluation[which]["accuracy"]
                )


def _eqns(jaxpr, path=()):
    """Every equation of a (closed) jaxpr and its sub-jaxprs, with the chain of enclosing
    primitives."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in inner.eqns:
        yield eqn, path
        for value in eqn.params.values():
            subs = value if isinstance(value, (list, tuple)) else (value,)
            for sub in subs:
                if hasattr(sub, "eqns") or hasattr(sub, "jaxpr"):
                    yield from _eqns(sub, path + (eqn.primitive.name,))


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_compiled_sweep_gathers_once_per_seed_and_step():
    """The jaxpr of a DPSGD-F/DPSGD group: inside the step (the scan body) one gather reads the
    (n, d) data, shaped (seeds, pad, d): one batch per seed and step shared by all models, and no
    (models × batch × d) array exists anywhere."""
    seeds = 2
    keys = jax.random.split(jax.random.key(0), seeds)
    unit = dpsgdf.unit_normalize(X)
    ms = dpsgdf.grid_models(["dpsgdf", "dpsgd"], [1.0, 10.0, 100.0], [0.5, 2.0], [0.1, 0.2], 2.0)
    P = len(ms)
    group = dpsgdf.grid_group(
        "g", ms, 24, 2, N, unit.astype(np.float64).mean(0), keys, num_classes=K
    )
    config, names = group.config, tuple(group.points)
    plan = config.plan.execution
    static = static_config(config)
    seeded = tuple(name in group.per_seed for name in names)
    fn = sweeps._compiled(static, plan, names, True, False, seeded)
    base = with_values(traced(config), {name: None for name in names})
    values = tuple(jnp.asarray(group.points[name], jnp.float32) for name in names)
    jaxpr = jax.make_jaxpr(fn)(
        base,
        config.model.init(None),
        jnp.asarray(unit),
        jnp.asarray(Y),
        keys,
        values,
        jnp.asarray(unit),
        jnp.asarray(Y),
    )
    eqns = list(_eqns(jaxpr))
    data_gathers = [
        (e, path)
        for e, path in eqns
        if e.primitive.name == "gather" and tuple(e.invars[0].aval.shape) == (N, D)
    ]
    # One gather, written once per branch of sampling.gather's cond (padding zeroed or not), of
    # which one runs per step.
    shown = [(e.outvars[0].aval.shape, p) for e, p in data_gathers]
    assert len(data_gathers) == 2, shown
    assert len({path for _, path in data_gathers}) == 1 and data_gathers[0][1][-1] == "cond", shown
    for gather, path in data_gathers:
        assert "scan" in path  # it is in the step
        assert tuple(gather.outvars[0].aval.shape) == (seeds, plan.pad, D)
    scans = [e for e, _ in eqns if e.primitive.name == "scan" and e.params["length"] == plan.steps]
    assert scans  # the step loop: the gather above runs once per step
    for e, _ in eqns:  # never a (models × batch × d) copy of the features
        for v in e.outvars:
            shape = tuple(getattr(v.aval, "shape", ()))
            assert not (P in shape and plan.pad in shape and D in shape), (e.primitive.name, shape)


def test_fit_takes_a_glm_of_the_users_and_records_its_iterates():
    """``model``: a GLM in place of the paper's softmax regression, trained on the centred
    features as the default is; ``track_params``: every centred iterate, the last equal to
    ``centred``."""
    cfg = dpsgdf.DpsgdfConfig(epsilon=2.0, eps_F=0.2, batch_size=24, epochs=2, iterates="last")
    y = (np.asarray(Y) > 0).astype(np.int32)
    model = models.logistic_regression(D)
    out = dpsgdf.fit(cfg, X, y, jax.random.key(0), model=model, track_params=True)
    assert jax.tree_util.tree_structure(out.centred) == jax.tree_util.tree_structure(
        model.init(None)
    )
    steps = dpsgdf.plan(cfg, N).steps
    trajectory = out.metrics["params"]
    assert trajectory["w"].shape == (steps, D, 1)
    np.testing.assert_array_equal(np.asarray(trajectory["w"][-1]), np.asarray(out.centred["w"]))
    assert "params" not in dpsgdf.fit(cfg, X, y, jax.random.key(0)).metrics


def test_fit_checks_its_inputs_before_calibrating(monkeypatch):
    """Every bad input of fit is refused by name before the (seconds-long) calibration (which the
    run's private plan does when it is created)."""

    def refuse(*args, **kwargs):
        pytest.fail("calibrated before checking inputs")

    monkeypatch.setattr(dpsgdf, "calibrate", refuse)
    monkeypatch.setattr(DPPlan, "create", refuse)
    cfg, key = small(), jax.random.key(0)
    x, y = np.asarray(X), np.asarray(Y)
    bad = [
        ((np.zeros((0, D)), y[:0], key), {}, ValueError, "at least one example"),
        ((x, np.where(np.arange(len(y)) == 0, np.nan, y), key), {}, ValueError, "non-finite"),
        ((x, y, 3), {}, TypeError, "PRNG key"),  # dpprep.validation.check_key: a TypeError
        ((x, y + 0.5, key), {}, ValueError, "integer class labels"),
        ((x, y, key), {"eval_data": (x[:, :-1], y)}, ValueError, "x_test has"),
        ((x, y, key), {"eval_data": (x, y[:-1])}, ValueError, "y_test has"),
        (
            (x, y, key),
            {"eval_data": (x, np.full_like(y, K))},
            ValueError,
            r"y_test must hold class labels in \[0,",
        ),
    ]
    for args, kwargs, error, match in bad:
        with pytest.raises(error, match=match):
            dpsgdf.fit(cfg, *args, **kwargs)
    with pytest.raises(ValueError, match="whole number for shuffled epochs"):
        dpsgdf.fit(small("nonprivate", epochs=2.7), x, y, key)
