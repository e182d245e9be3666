"""Privacy by construction: every public path runs what its account charges, or refuses before
compiling. One test per case a careless user (or a planted bug) produced silently before the plan
object owned the numbers a guarantee rests on; each asserts the refusal or the accounted ε."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpprep import clipping, models, noise, sweeps
from dpprep.preprocess.privacy.meta import PreprocessedAccountant
from dpprep.algorithms import Hyper, TrainConfig, fit, train
from dpprep.corrdp import sgd as corr_sgd
from dpprep.extensions import Extension
from dpprep.plan import DPPlan, ExecutionPlan
from dpprep.preprocess import Sensitivity
from dpprep.selection import PrivateSelection, Repetitions, Search, search_many, select, split
from dpprep.step import dp_step
from dp_accounting import dp_event as dp_events

RNG = np.random.default_rng(0)
N = 200
X = RNG.normal(size=(N, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)
YC = (X[:, 0] > 0).astype(np.int32)
LOGISTIC = models.logistic_regression(3)
SOFTMAX = models.softmax_regression(3, 2)
KEY = jax.random.key(0)
KEYS = jax.random.split(KEY, 2)


def _plan(**kw) -> DPPlan:
    options = dict(batch_size=20, steps=10, l2_clip_norm=1.0, noise_multiplier=2.0, delta=1e-5)
    options.update(kw)
    return DPPlan.create("poisson", N, **options)


def _config(plan=None, **kw) -> TrainConfig:
    return TrainConfig(LOGISTIC, Hyper(0.5), _plan() if plan is None else plan, **kw)


# ---------------------------------------------------------------------------------------------
# Non-private only when asked


def test_a_run_without_a_plan_is_refused_not_trained_non_privately():
    with pytest.raises(ValueError, match="config.plan is required"):
        train(TrainConfig(LOGISTIC, Hyper(0.5)), LOGISTIC.init(None), (X, Y), KEY)


def test_hyper_no_longer_takes_the_noise_or_the_clip_bound():
    with pytest.raises(TypeError):
        Hyper(0.5, 1.1, 1.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Hyper(0.5, noise_multiplier=1.1)  # type: ignore[call-arg]


def test_non_private_run_is_explicit_and_says_no_guarantee():
    plan = DPPlan.non_private("full", N, steps=5)
    _, metrics = train(_config(plan), LOGISTIC.init(None), (X, Y), KEY)
    assert metrics["epsilon"] == math.inf and metrics["delta"] is None
    assert metrics["guarantee"].startswith("no DP guarantee")


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_zero_negative_nan_noise_or_clip_refused_by_the_plan(bad):
    with pytest.raises(ValueError, match="noise_multiplier"):
        _plan(noise_multiplier=bad)
    with pytest.raises(ValueError, match="l2_clip_norm"):
        _plan(l2_clip_norm=bad)


def test_non_numbers_are_type_errors():
    with pytest.raises(TypeError):
        _plan(l2_clip_norm="1.0")
    with pytest.raises(TypeError):
        _plan(noise_multiplier=None, target_epsilon="2")


def test_train_reports_the_epsilon_the_plan_spent():
    plan = _plan(noise_multiplier=None, target_epsilon=1.5)
    _, metrics = train(_config(plan), LOGISTIC.init(None), (X, Y), KEY)
    assert metrics["epsilon"] == plan.epsilon <= 1.5
    assert plan.epsilon > 1.5 * (1 - 1e-3)  # calibrated: ε spent close to the target, not far below


def test_fit_asks_for_epsilon_delta_in_one_call_and_returns_what_it_spent():
    out = fit(
        LOGISTIC,
        LOGISTIC.init(None),
        (X, Y),
        KEY,
        target_epsilon=2.0,
        delta=1e-5,
        l2_clip_norm=1.0,
        learning_rate=0.5,
        batch_size=20,
        epochs=2,
    )
    assert out.epsilon <= 2.0 and out.epsilon == out.plan.epsilon
    assert out.plan.steps == 20 and out.plan.n == N
    assert out.metrics["epsilon"] == out.epsilon


# ---------------------------------------------------------------------------------------------
# The data is checked against the plan


def test_a_plan_for_1000_rows_on_500_is_refused():
    plan = DPPlan.create(
        "poisson", 1000, batch_size=64, steps=5, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    x = RNG.normal(size=(500, 3)).astype(np.float32)
    with pytest.raises(ValueError, match="plan was made for n=1000"):
        train(_config(plan), LOGISTIC.init(None), (x, (x[:, 0] > 0).astype(np.float32)), KEY)
    with pytest.raises(ValueError, match="plan was made for n=1000"):
        sweeps.sweep_points(
            _config(plan),
            LOGISTIC.init(None),
            (x, (x[:, 0] > 0).astype(np.float32)),
            KEYS,
            {"learning_rate": [0.1, 0.2]},
        )


def test_mask_weights_other_than_0_1_are_refused_and_traced_ones_clamped():
    loss = lambda p, b: jnp.sum(b["x"] @ p)  # noqa: E731  (gradient x: norm 10 per example)
    grad_fn = clipping.clipped_grad(loss, l2_clip_norm=1.0)
    batch = {"x": jnp.full((3, 4), 5.0)}
    params = jnp.zeros(4)
    for mask in (
        jnp.array([5.0, 0.0, 0.0]),
        jnp.array([-1.0, 1.0, 1.0]),
        jnp.array([0.5, 1.0, 1.0]),
    ):
        with pytest.raises(ValueError, match="mask must hold 0"):
            grad_fn(params, batch, mask=mask)
    # Under jit the mask cannot be read: it is clamped to [0, 1], so no example contributes above C.
    out = jax.jit(lambda m: grad_fn(params, batch, mask=m).grad)(jnp.array([5.0, 0.0, 0.0]))
    assert float(jnp.linalg.norm(out)) <= 1.0


def test_a_transposed_batch_is_refused_by_the_plan_s_clipped_grad():
    plan = DPPlan.create("full", 8, steps=2, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
    grad_fn = plan.clipped_grad(lambda p, b: jnp.sum(b @ p))
    x = jnp.ones((8, 3))
    grad_fn(jnp.zeros(3), plan.batch(KEY, 0, x))  # (n, d): fine
    with pytest.raises(ValueError, match="the plan was made for n=8"):
        # (d, n): each feature row would be clipped as an example
        plan.batch(KEY, 0, x.T)
    with pytest.raises(TypeError, match="takes the plan's batches"):
        grad_fn(jnp.zeros(8), x.T)  # not drawn by the plan at all
    # A batch of another plan's shape (3 rows) is refused by this plan's clipped gradient.
    other = DPPlan.create("full", 3, steps=2, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="3 examples on its leading axis"):
        grad_fn(jnp.zeros(8), other.batch(KEY, 0, x.T))


def test_an_empty_batch_is_refused():
    grad_fn = clipping.clipped_grad(lambda p, b: jnp.sum(b @ p), l2_clip_norm=1.0)
    with pytest.raises(ValueError, match="empty"):
        grad_fn(jnp.zeros(3), jnp.ones((0, 3)))


def test_has_aux_with_a_scalar_loss_is_a_clear_error():
    grad_fn = clipping.clipped_grad(lambda p, b: jnp.sum(b @ p), l2_clip_norm=1.0, has_aux=True)
    with pytest.raises(ValueError, match="has_aux=True"):
        grad_fn(jnp.zeros(3), jnp.ones((2, 3)))


# ---------------------------------------------------------------------------------------------
# The own loop: pieces from one plan


def _own_loop_pieces(plan):
    loss = lambda p, b: jnp.mean((b["x"] @ p["w"] - b["y"]) ** 2)  # noqa: E731
    data = {"x": jnp.asarray(X), "y": jnp.asarray(Y)}
    return loss, data, {"w": jnp.zeros(3)}


def test_dp_step_refuses_an_optimizer_without_the_plan_s_privatizer():
    plan = _plan()
    loss, data, params = _own_loop_pieces(plan)
    grad_fn = plan.clipped_grad(loss)
    for tx in (
        optax.sgd(0.1),  # no privatizer
        optax.chain(
            optax.adam(0.1),
            noise.gaussian_privatizer(key=KEY, l2_clip_norm=1.0, noise_multiplier=1.0),
        ),
    ):
        with pytest.raises(TypeError, match="tx must come from a plan"):
            dp_step(params, tx.init(params), data, grad_fn=grad_fn, tx=tx)


def test_dp_step_refuses_a_clipped_grad_at_another_bound_or_from_another_plan():
    plan = _plan()
    loss, data, params = _own_loop_pieces(plan)
    tx = plan.optimizer(optax.sgd(0.1), key=KEY)
    state = tx.init(params)
    with pytest.raises(TypeError, match="grad_fn must come from a plan"):
        dp_step(params, state, data, grad_fn=clipping.clipped_grad(loss, l2_clip_norm=10.0), tx=tx)
    other = _plan(l2_clip_norm=10.0)
    with pytest.raises(ValueError, match="different plans"):
        dp_step(params, state, data, grad_fn=other.clipped_grad(loss), tx=tx)


def test_dp_step_refuses_the_state_of_another_transformation_and_a_second_init():
    plan = _plan()
    loss, data, params = _own_loop_pieces(plan)
    tx = plan.optimizer(optax.adam(0.1), key=KEY)
    with pytest.raises(ValueError, match="opt_state is not the state of tx"):
        dp_step(params, optax.adam(0.1).init(params), data, grad_fn=plan.clipped_grad(loss), tx=tx)
    tx.init(params)
    # a fresh count would replay the noise
    with pytest.raises(ValueError, match="initialised already"):
        tx.init(params)


def test_the_own_loop_s_data_must_have_the_plan_s_rows_and_batches_their_mask():
    plan = _plan()
    loss, data, params = _own_loop_pieces(plan)
    grad_fn, tx = plan.clipped_grad(loss), plan.optimizer(optax.sgd(0.1), key=KEY)
    state = tx.init(params)
    small = jax.tree_util.tree_map(lambda a: a[:10], data)
    with pytest.raises(ValueError, match="the plan was made for n=200"):
        dp_step(params, state, small, grad_fn=grad_fn, tx=tx)
    with pytest.raises(ValueError, match="outside the plan's steps"):
        plan.batch(KEY, plan.steps, data)
    rows, mask = plan.batch(KEY, 0, data)  # readable, but only the PlanBatch is taken
    with pytest.raises(TypeError, match="takes the plan's batches"):
        grad_fn(params, rows)
    with pytest.raises(TypeError, match="takes no mask"):
        grad_fn(params, plan.batch(KEY, 0, data), mask=mask)


def test_an_own_loop_cannot_run_more_steps_than_the_plan_charges():
    plan = _plan(steps=3)
    loss, data, params = _own_loop_pieces(plan)
    grad_fn, tx = plan.clipped_grad(loss), plan.optimizer(optax.sgd(0.1), key=KEY)
    state = tx.init(params)
    spent = []
    for _ in range(3):
        params, state, _ = dp_step(params, state, data, grad_fn=grad_fn, tx=tx)
        spent.append(plan.spent(state))
    assert spent[0] < spent[1] < spent[2] and spent[2] == pytest.approx(plan.epsilon, rel=1e-12)
    with pytest.raises(ValueError, match="all of them were taken"):
        dp_step(params, state, data, grad_fn=grad_fn, tx=tx)
    # Under jit the count is traced: the privatizer then releases NaN rather than an uncharged step.
    step = jax.jit(lambda p, s: dp_step(p, s, data, grad_fn=grad_fn, tx=tx)[0])
    assert bool(jnp.all(jnp.isnan(step(params, state)["w"])))


def test_own_loop_draws_the_batches_and_noise_train_draws():
    """Same run key: the own loop with the plan's pieces and ``train`` give the same parameters."""
    plan = _plan(steps=4)
    model = LOGISTIC
    config = _config(plan)
    trained, _ = train(config, model.init(None), (X, Y), KEY)
    loss = lambda p, b: model.per_example_loss(p, b[0], b[1])[0]  # noqa: E731
    grad_fn, tx = (
        plan.clipped_grad(loss),
        plan.optimizer(optax.chain(optax.sgd(1.0), optax.scale(0.5)), key=KEY),
    )
    params = model.init(None)
    state = tx.init(params)
    for _ in range(plan.steps):
        params, state, _ = dp_step(
            params, state, (jnp.asarray(X), jnp.asarray(Y)), grad_fn=grad_fn, tx=tx
        )
    for a, b in zip(jax.tree_util.tree_leaves(trained), jax.tree_util.tree_leaves(params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# The privatizer: noise or refusal


def test_gaussian_privatizer_refuses_zero_scales_zero_clip_and_bad_keys():
    with pytest.raises(ValueError, match="scales must be finite and > 0"):
        noise.gaussian_privatizer(
            key=KEY, l2_clip_norm=1.0, noise_multiplier=1.0, scales={"w": 0.0}
        )
    with pytest.raises(ValueError, match="l2_clip_norm must be finite and > 0"):
        noise.gaussian_privatizer(key=KEY, l2_clip_norm=0.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        noise.gaussian_privatizer(key=KEY, l2_clip_norm=1.0, noise_multiplier=0.0)
    with pytest.raises(TypeError, match="key must be a PRNG key"):
        noise.gaussian_privatizer(key=0, l2_clip_norm=1.0, noise_multiplier=1.0)


def test_a_wrong_scales_tree_is_a_clear_error():
    tx = noise.gaussian_privatizer(
        key=KEY, l2_clip_norm=1.0, noise_multiplier=1.0, scales={"v": 1.0}
    )
    params = {"w": jnp.zeros(2)}
    with pytest.raises(ValueError, match="tree structure of the params"):
        tx.update(params, tx.init(params), params)


# ---------------------------------------------------------------------------------------------
# Extensions that change the noise


def _coordinate_config(plan):
    return TrainConfig(LOGISTIC, Hyper(0.5), plan, extensions=(corr_sgd.CoordinateNoise(),))


def _scales(value):
    return {"w": np.full((3, 1), value, np.float32), "b": np.full((1,), value, np.float32)}


def test_zero_coordinate_noise_scales_are_refused_in_train_sweeps_and_selection():
    plan = _plan()
    config = dataclasses.replace(
        _coordinate_config(plan), hyper=Hyper(0.5, extra={"noise_scales": _scales(0.0)})
    )
    with pytest.raises(ValueError, match="noise factor is 0"):
        train(config, LOGISTIC.init(None), (X, Y), KEY)
    with pytest.raises(ValueError, match="noise factor is 0"):
        sweeps.sweep_points(
            _coordinate_config(plan),
            LOGISTIC.init(None),
            (X, Y),
            KEYS,
            {"noise_scales": jax.tree_util.tree_map(lambda a: np.stack([a, 0 * a]), _scales(1.0))},
        )
    selection = PrivateSelection(Repetitions(2.0), score_noise=5.0, validation_size=40)
    splan = selection.plan("full", N, steps=5, l2_clip_norm=1.0, delta=1e-5, target_epsilon=4.0)
    sconfig = TrainConfig(
        SOFTMAX,
        Hyper(
            0.5,
            extra={
                "noise_scales": {"w": np.zeros((3, 2), np.float32), "b": np.zeros((2,), np.float32)}
            },
        ),
        splan,
        extensions=(corr_sgd.CoordinateNoise(),),
    )
    with pytest.raises(ValueError, match="noise factor is 0"):
        select(sconfig, SOFTMAX.init(None), (X, YC), KEY, {"learning_rate": [0.1, 0.3]})


def test_reduced_coordinate_noise_is_accounted_per_point_in_sweeps_and_refused_in_train():
    plan = _plan()
    values = jax.tree_util.tree_map(lambda a: np.stack([a, 0.5 * a]), _scales(1.0))
    out = sweeps.sweep_points(
        _coordinate_config(plan), LOGISTIC.init(None), (X, Y), KEYS, {"noise_scales": values}
    )
    assert out.epsilon[0] == pytest.approx(plan.epsilon)
    assert out.epsilon[1] == pytest.approx(plan.epsilon_at(0.5 * plan.noise_multiplier))
    assert out.epsilon[1] > 1.5 * out.epsilon[0]
    config = dataclasses.replace(
        _coordinate_config(plan), hyper=Hyper(0.5, extra={"noise_scales": _scales(0.5)})
    )
    with pytest.raises(ValueError, match="less noise than the plan charges"):
        train(config, LOGISTIC.init(None), (X, Y), KEY)


def test_absolute_noise_std_has_no_unit_in_a_private_plan():
    config = dataclasses.replace(
        _coordinate_config(_plan()), hyper=Hyper(0.5, extra={"stddev": 3.0})
    )
    with pytest.raises(ValueError, match="has no unit in a private plan"):
        train(config, LOGISTIC.init(None), (X, Y), KEY)


def test_an_extension_with_undeclared_privacy_fields_is_refused_in_private_plans():
    from dpprep.extensions import Field

    @dataclasses.dataclass(frozen=True)
    class Secret(Extension):
        fields = {"how_much": Field(default=1.0, privacy=True)}  # type: ignore[assignment]

    config = TrainConfig(LOGISTIC, Hyper(0.5), _plan(), extensions=(Secret(),))
    with pytest.raises(ValueError, match="declares privacy fields"):
        train(config, LOGISTIC.init(None), (X, Y), KEY)


def test_a_non_frozen_extension_is_refused():
    @dataclasses.dataclass
    class Mutable(Extension):
        pass

    with pytest.raises(TypeError, match="frozen dataclass"):
        train(
            TrainConfig(LOGISTIC, Hyper(0.5), _plan(), extensions=(Mutable(),)),
            LOGISTIC.init(None),
            (X, Y),
            KEY,
        )


# ---------------------------------------------------------------------------------------------
# Sweeps and selection


def test_sweep_refuses_zero_noise_and_reports_each_point_s_epsilon():
    plan = _plan()
    z = plan.noise_multiplier
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        sweeps.sweep(
            _config(plan), LOGISTIC.init(None), (X, Y), KEYS, noise_multiplier=[z, z / 10, 0.0]
        )
    out = sweeps.sweep(
        _config(plan), LOGISTIC.init(None), (X, Y), KEYS, noise_multiplier=[z, z / 2]
    )
    assert out.epsilon[0] == pytest.approx(plan.epsilon)
    assert (
        out.epsilon[1] == pytest.approx(plan.epsilon_at(z / 2))
        and out.epsilon[1] > 1.5 * out.epsilon[0]
    )
    assert out.delta == plan.delta
    # A point whose noise is too small for any guarantee of the run as implemented is refused.
    with pytest.raises(ValueError, match="no guarantee of the run as implemented"):
        sweeps.sweep(_config(plan), LOGISTIC.init(None), (X, Y), KEYS, noise_multiplier=[z, z / 10])


def test_a_non_private_plan_takes_no_noise_multiplier_in_a_sweep():
    with pytest.raises(ValueError, match="non-private plan takes no noise_multiplier"):
        sweeps.sweep(
            _config(DPPlan.non_private("full", N, steps=2)),
            LOGISTIC.init(None),
            (X, Y),
            KEYS,
            noise_multiplier=[1.0, 2.0],
        )


def test_search_many_refuses_noiseless_candidates():
    selection = PrivateSelection(Repetitions(2.0), score_noise=5.0, validation_size=40)
    train_part, validation = split((X, YC), 40, KEY)
    plan = DPPlan.create(
        "full", N - 40, steps=5, l2_clip_norm=1.0, noise_multiplier=5.0, delta=1e-5
    )
    config = TrainConfig(SOFTMAX, Hyper(0.5), plan)
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        search_many(
            config,
            SOFTMAX.init(None),
            train_part,
            validation,
            [Search(KEY, {"noise_multiplier": [0.0, 5.0]})],
            selection=selection,
        )
    found = search_many(
        config,
        SOFTMAX.init(None),
        train_part,
        validation,
        [Search(KEY, {"noise_multiplier": [8.0, 5.0]})],
        selection=selection,
    )
    assert found[0].accounting is not None
    charged = found[0].accounting.epsilon
    assert charged == pytest.approx(
        selection.end_to_end_of_grid(plan.execution, [8.0, 5.0], 1e-5).epsilon
    )
    # the mixture of the two points: between the most and the least noisy point's charge
    assert (
        selection.end_to_end(plan.execution, 8.0, 1e-5).epsilon
        < charged
        < selection.end_to_end(plan.execution, 5.0, 1e-5).epsilon
    )


def test_select_takes_its_plan_and_refuses_a_plain_one_or_the_wrong_size():
    selection = PrivateSelection(Repetitions(2.0), score_noise=5.0, validation_size=40)
    plain = TrainConfig(
        SOFTMAX,
        Hyper(0.5),
        DPPlan.create("full", N - 40, steps=5, l2_clip_norm=1.0, noise_multiplier=5.0, delta=1e-5),
    )
    with pytest.raises(ValueError, match="must be a selection's plan"):
        select(plain, SOFTMAX.init(None), (X, YC), KEY, {"learning_rate": [0.1]})
    wrong = TrainConfig(
        SOFTMAX,
        Hyper(0.5),
        selection.plan("full", N + 10, steps=5, l2_clip_norm=1.0, delta=1e-5, target_epsilon=4.0),
    )
    with pytest.raises(ValueError, match="plan was made for n="):
        select(wrong, SOFTMAX.init(None), (X, YC), KEY, {"learning_rate": [0.1]})
    good = TrainConfig(
        SOFTMAX,
        Hyper(0.5),
        selection.plan("full", N, steps=5, l2_clip_norm=1.0, delta=1e-5, target_epsilon=4.0),
    )
    with pytest.raises(ValueError, match="cannot vary \\['noise_multiplier'\\]"):
        select(good, SOFTMAX.init(None), (X, YC), KEY, {"noise_multiplier": [1.0, 2.0]})
    out = select(good, SOFTMAX.init(None), (X, YC), KEY, {"learning_rate": [0.1, 0.3]})
    assert out.accounting.epsilon == pytest.approx(good.plan.epsilon) and good.plan.epsilon <= 4.0


def test_select_warns_when_the_scores_eat_more_than_half_the_budget():
    selection = PrivateSelection(Repetitions(4.0), score_noise=2.0, validation_size=40)
    plan = selection.plan("full", N, steps=5, l2_clip_norm=1.0, delta=1e-5, target_epsilon=4.0)
    account = selection.end_to_end(plan.execution, plan.noise_multiplier, 1e-5)
    assert "the noisy counts alone cost epsilon" in account.part("selection").note
    with pytest.warns(UserWarning, match="noisy validation scores alone cost"):
        select(
            TrainConfig(SOFTMAX, Hyper(0.5), plan),
            SOFTMAX.init(None),
            (X, YC),
            KEY,
            {"learning_rate": [0.1]},
        )
    assert "training" in account.describe() and "selection" in account.describe()


def test_split_refuses_a_fractional_validation_size():
    with pytest.raises((TypeError, ValueError), match="validation_size"):
        split((X, YC), 100.5, KEY)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Theorems' conditions


def test_dp_sgd_by_iteration_refuses_adam_a_large_step_and_averaging():
    with pytest.raises(ValueError, match="give smoothness"):
        DPPlan.create("fixed_order", N, l2_clip_norm=1.0, target_epsilon=2.0, delta=1e-5)
    plan = DPPlan.create(
        "fixed_order", N, l2_clip_norm=1.0, target_epsilon=2.0, delta=1e-5, smoothness=0.25
    )
    p0 = LOGISTIC.init(None)
    with pytest.raises(ValueError, match="plain SGD"):
        train(TrainConfig(LOGISTIC, Hyper(1.0), plan, optimizer=optax.adam(1.0)), p0, (X, Y), KEY)
    with pytest.raises(ValueError, match="learning_rate <= 2/β = 8"):
        train(TrainConfig(LOGISTIC, Hyper(100.0), plan), p0, (X, Y), KEY)
    with pytest.raises(ValueError, match="last one only"):
        train(TrainConfig(LOGISTIC, Hyper(1.0), plan, iterates="average"), p0, (X, Y), KEY)
    params, metrics = train(TrainConfig(LOGISTIC, Hyper(1.0), plan), p0, (X, Y), KEY)
    assert metrics["epsilon"] <= 2.0


def test_a_preprocessing_accountant_must_assume_the_plan_s_clip_bound():
    accountant = PreprocessedAccountant(Sensitivity(0.0, 0.0), lipschitz=0.1)
    with pytest.raises(ValueError, match="lipschitz=0.1"):
        DPPlan.create(
            "full",
            N,
            steps=5,
            l2_clip_norm=1.0,
            noise_multiplier=5.0,
            delta=1e-5,
            neighboring_relation="replace_one",
            accountant=accountant,
        )
    ok = DPPlan.create(
        "full",
        N,
        steps=5,
        l2_clip_norm=1.0,
        noise_multiplier=5.0,
        delta=1e-5,
        neighboring_relation="replace_one",
        accountant=dataclasses.replace(accountant, lipschitz=1.0),
    )
    assert ok.epsilon == pytest.approx(ok.execution.epsilon(5.0, 1e-5, accountant=ok.accountant))
    # one step beside create: the same plan with another clip bound, whose ε the accountant states
    # unchanged (it assumes lipschitz=1), or another accountant
    with pytest.raises(ValueError, match="lipschitz=1.0"):
        dataclasses.replace(ok, l2_clip_norm=10.0)
    with pytest.raises(ValueError, match="lipschitz=0.1"):
        dataclasses.replace(ok, accountant=accountant)


def test_a_plan_s_optimizer_in_a_train_config_is_refused_not_privatized_twice():
    plan = _plan()
    with pytest.raises(ValueError, match="added\n?.*twice"):
        TrainConfig(LOGISTIC, Hyper(0.5), plan, optimizer=plan.optimizer(optax.sgd(1.0), key=KEY))


def test_corrdp_point_with_epsilon_and_no_noise_is_refused():
    with pytest.raises(ValueError, match="trained without noise and labelled"):
        corr_sgd.Point("standard", epsilon=1.0, c=0.0)
    with pytest.raises(ValueError, match="either noisy"):
        corr_sgd.Point("standard", epsilon=None, c=1.0)
    corr_sgd.Point("nonprivate", None, 0.0)  # the non-private reference stays expressible


def test_corrdp_runs_claim_no_guarantee():
    cfg = corr_sgd.CorrDPSGD(LOGISTIC, steps=3, learning_rate=0.1, delta=1e-5)
    assert not cfg.plan(N).private
    out = corr_sgd.sweep_points(
        cfg, LOGISTIC.init(None), (X, Y), KEYS, [corr_sgd.Point("standard", 1.0, 1.0)]
    )
    assert np.all(np.isinf(out.epsilon))


# ---------------------------------------------------------------------------------------------
# Caches and compilations


def test_factory_models_and_named_optimizers_compare_by_what_they_are():
    from dpprep import optimizers

    assert models.logistic_regression(3) == models.logistic_regression(
        num_features=3, fit_intercept=True
    )
    assert models.logistic_regression(3) != models.logistic_regression(4)
    assert optimizers.optimizer("adam") == optimizers.optimizer("adam", b1=0.9)
    assert optimizers.optimizer("adam") != optimizers.optimizer("adam", b1=0.8)
    # A replaced function drops the spec: a model with another loss is not equal to the original.
    changed = dataclasses.replace(LOGISTIC, per_example_loss=lambda p, x, y: 0 * y, spec=None)
    assert changed != LOGISTIC


def test_a_custom_loss_on_integer_labels_is_accepted():
    from dpprep.frameworks import from_init_apply

    model = from_init_apply(
        lambda key: {"w": jnp.zeros((3, 2))},
        lambda p, x: x @ p["w"],
        loss=lambda out, y: -jnp.take_along_axis(jax.nn.log_softmax(out), y[:, None], axis=1)[:, 0],
    )
    train(TrainConfig(model, Hyper(0.1), _plan()), model.init(None), (X, YC), KEY)


def test_memory_budget_and_on_chunk_are_checked():
    for bad in (math.nan, -1.0, 0):
        with pytest.raises(ValueError, match="memory_budget"):
            sweeps.sweep_points(
                _config(),
                LOGISTIC.init(None),
                (X, Y),
                KEYS,
                {"learning_rate": [0.1]},
                memory_budget=bad,
            )
    with pytest.raises(TypeError, match="on_chunk"):
        sweeps.sweep_points(
            _config(), LOGISTIC.init(None), (X, Y), KEYS, {"learning_rate": [0.1]}, on_chunk="print"
        )  # type: ignore[arg-type]


def test_the_shuffle_bounds_say_what_they_assume():
    assert "zero-out" in ExecutionPlan.__doc__  # the relation the no-amplification proof holds for
    proven = DPPlan.create(
        "shuffle",
        100,
        batch_size=10,
        epochs=2,
        l2_clip_norm=1.0,
        noise_multiplier=2.0,
        delta=1e-5,
        shuffle_bound="no_amplification",
    )
    assert "no amplification (neighbours: replace-one or zero-out)" in proven.describe()
    with pytest.warns(UserWarning, match="as if Poisson"):
        assumed = DPPlan.create(
            "shuffle",
            100,
            batch_size=10,
            epochs=2,
            l2_clip_norm=1.0,
            noise_multiplier=2.0,
            delta=1e-5,
        )
    assert "as if Poisson (an assumption)" in assumed.describe()
    assert assumed.epsilon < proven.epsilon


# ---------------------------------------------------------------------------------------------
# One world: any batch pytree and per-example keys through train, the sweeps and selection


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_dict_inputs_with_integer_leaves_and_dropout_run_through_every_driver():
    from flax import nnx

    from dpprep import frameworks

    n = 400
    rng = np.random.default_rng(1)
    inputs = {
        "a": rng.normal(size=(n, 3)).astype(np.float32),
        "tok": rng.integers(0, 5, size=(n, 2)),
    }
    labels = ((inputs["a"][:, 0] > 0) ^ (inputs["tok"][:, 0] > 2)).astype(np.int32)

    class Net(nnx.Module):
        def __init__(self, rngs):
            # needs integer inputs: the token leaf stays int32
            self.emb = nnx.Embed(5, 4, rngs=rngs)
            self.drop = nnx.Dropout(0.2, rngs=rngs)
            self.out = nnx.Linear(3 + 8, 2, rngs=rngs)

        def __call__(self, x):
            tokens = self.emb(x["tok"]).reshape(x["tok"].shape[0], -1)
            return self.out(self.drop(jnp.concatenate([x["a"], tokens], axis=-1)))

    model = frameworks.from_flax_nnx(Net(nnx.Rngs(0)), loss="softmax_cross_entropy")
    assert model.stochastic
    plan = DPPlan.create(
        "poisson", n, batch_size=50, epochs=2, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(0.5), plan)
    params, metrics = train(config, model.init(None), (inputs, labels), KEYS[0])
    assert metrics["epsilon"] == plan.epsilon
    swept = sweeps.sweep_points(
        config,
        model.init(None),
        (inputs, labels),
        KEYS,
        {"learning_rate": [0.5, 1.0]},
        eval_data=(inputs, labels),
    )
    for alone, in_sweep in zip(
        jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(swept.params)
    ):
        # seed 0, point 0
        np.testing.assert_allclose(np.asarray(in_sweep)[0, 0], alone, rtol=1e-4, atol=1e-5)
    selection = PrivateSelection(Repetitions(2.0), score_noise=5.0, validation_size=100)
    splan = selection.plan(
        "poisson", n, batch_size=50, epochs=2, l2_clip_norm=1.0, target_epsilon=8.0, delta=1e-5
    )
    out = select(
        TrainConfig(model, Hyper(0.5), splan),
        model.init(None),
        (inputs, labels),
        KEY,
        {"learning_rate": [0.5, 1.0]},
    )
    assert out.accounting.epsilon <= 8.0 and out.params is not None
    with pytest.raises(ValueError, match="disagree on the example axis"):
        train(
            config, model.init(None), ({"a": inputs["a"], "tok": inputs["tok"][:-1]}, labels), KEY
        )


def test_make_train_fn_runs_the_config_s_checked_values_only():
    from dpprep.algorithms import make_train_fn

    plan = DPPlan.create(
        "fixed_order", N, l2_clip_norm=1.0, target_epsilon=2.0, delta=1e-5, smoothness=0.25
    )
    with pytest.raises(ValueError, match="learning_rate <= 2/β"):
        make_train_fn(TrainConfig(LOGISTIC, Hyper(100.0), plan), LOGISTIC.init(None))
    fn = make_train_fn(_config(), LOGISTIC.init(None))
    params, _ = jax.jit(fn)(LOGISTIC.init(None), jnp.asarray(X), jnp.asarray(Y), KEY)
    expected, _ = train(_config(), LOGISTIC.init(None), (X, Y), KEY)
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # a record gathered many times over
    with pytest.raises(ValueError, match="plan was made for n="):
        fn(LOGISTIC.init(None), jnp.asarray(X[:10]), jnp.asarray(Y[:10]), KEY)
    scaled = dataclasses.replace(
        _coordinate_config(_plan()), hyper=Hyper(0.5, extra={"noise_scales": _scales(1e-3)})
    )
    with pytest.raises(ValueError, match="less noise than the plan charges"):
        make_train_fn(scaled, LOGISTIC.init(None))


def test_per_seed_noise_is_accounted_per_seed_and_point():
    plan = _plan()
    z = plan.noise_multiplier
    zs = np.array([[z, 2 * z], [1.5 * z, z]])  # (seeds, points)
    out = sweeps.sweep_points(
        _config(plan),
        LOGISTIC.init(None),
        (X, Y),
        KEYS,
        {"noise_multiplier": zs, "learning_rate": [0.1, 0.2]},
        per_seed=("noise_multiplier",),
    )
    assert out.epsilon.shape == (2, 2)
    np.testing.assert_allclose(out.epsilon, np.vectorize(plan.epsilon_at)(zs))
    # a later seed's zero too
    with pytest.raises(ValueError, match="noise_multiplier must be finite and > 0"):
        sweeps.sweep_points(
            _config(plan),
            LOGISTIC.init(None),
            (X, Y),
            KEYS,
            {"noise_multiplier": np.array([[z, z], [z, 0.0]]), "learning_rate": [0.1, 0.2]},
            per_seed=("noise_multiplier",),
        )


# ---------------------------------------------------------------------------------------------
# An adversarial review's cases


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_a_plan_changed_or_built_by_hand_must_state_its_own_epsilon():
    plan = _plan(noise_multiplier=None, target_epsilon=1.0)
    with pytest.raises(ValueError, match="make plans with DPPlan.create"):
        dataclasses.replace(plan, noise_multiplier=0.6)
    with pytest.raises(ValueError, match="make plans with DPPlan.create"):
        dataclasses.replace(plan, execution=dataclasses.replace(plan.execution, steps=100))
    with pytest.raises(ValueError, match="make plans with DPPlan.create"):
        DPPlan(ExecutionPlan.create("full", N, steps=100), 1.0, 1e-3, 1e-5, 0.01)
    assert plan.with_steps(5).epsilon < plan.epsilon  # a consistent change is fine


def test_train_refuses_a_private_statistic_its_plan_does_not_account():
    from dpprep import dpsgdf
    from dpprep.features import AffineFeatures

    config = TrainConfig(
        LOGISTIC,
        Hyper(0.5, extra={"feature_shift": np.zeros(3, np.float32), "mean_multiplier": 0.5}),
        _plan(),
        extensions=(AffineFeatures(), dpsgdf.PrivateMean()),
    )
    with pytest.raises(ValueError, match="declares a private statistic"):
        train(config, LOGISTIC.init(None), (X, Y), KEY)


def test_search_many_refuses_statistics_it_would_not_compose():
    from dpprep import dpsgdf
    from dpprep.features import AffineFeatures

    selection = PrivateSelection(Repetitions(2.0), score_noise=5.0, validation_size=40)
    train_part, validation = split((X, YC), 40, KEY)
    with_stat = DPPlan.create(
        "full",
        N - 40,
        steps=5,
        l2_clip_norm=1.0,
        noise_multiplier=5.0,
        delta=1e-5,
        fixed_events=(dp_events.GaussianDpEvent(0.5),),
    )
    with pytest.raises(ValueError, match="carries private statistics"):
        search_many(
            TrainConfig(SOFTMAX, Hyper(0.5), with_stat),
            SOFTMAX.init(None),
            train_part,
            validation,
            [Search(KEY, {"learning_rate": [0.1]})],
            selection=selection,
        )
    plain = DPPlan.create(
        "full", N - 40, steps=5, l2_clip_norm=1.0, noise_multiplier=5.0, delta=1e-5
    )
    config = TrainConfig(
        SOFTMAX,
        Hyper(0.5, extra={"feature_shift": np.zeros(3, np.float32)}),
        plain,
        extensions=(AffineFeatures(), dpsgdf.PrivateMean()),
    )
    with pytest.raises(ValueError, match="declares private statistics per point"):
        search_many(
            config,
            SOFTMAX.init(None),
            train_part,
            validation,
            [Search(KEY, {"mean_multiplier": [0.5, 0.5]})],
            selection=selection,
        )


def test_the_accountant_s_lipschitz_bound_holds_for_every_swept_clip_bound():
    accountant = PreprocessedAccountant(Sensitivity(0.0, 0.0), lipschitz=1.0)
    plan = DPPlan.create(
        "full",
        N,
        steps=5,
        l2_clip_norm=1.0,
        noise_multiplier=5.0,
        delta=1e-5,
        neighboring_relation="replace_one",
        accountant=accountant,
    )
    with pytest.raises(ValueError, match="every clip bound must be that number"):
        sweeps.sweep_points(
            _config(plan), LOGISTIC.init(None), (X, Y), KEYS, {"l2_clip_norm": [1.0, 0.1]}
        )
    with pytest.raises(ValueError, match="fixed_events and options do not compose"):
        DPPlan.create(
            "full",
            N,
            steps=5,
            l2_clip_norm=1.0,
            noise_multiplier=5.0,
            delta=1e-5,
            neighboring_relation="replace_one",
            accountant=accountant,
            fixed_events=(dp_events.GaussianDpEvent(0.5),),
        )


def test_per_seed_values_are_checked_for_every_seed():
    plan = DPPlan.create(
        "fixed_order", N, l2_clip_norm=1.0, target_epsilon=2.0, delta=1e-5, smoothness=0.25
    )
    with pytest.raises(ValueError, match="learning_rate <= 2/β"):
        sweeps.sweep_points(
            TrainConfig(LOGISTIC, Hyper(1.0), plan),
            LOGISTIC.init(None),
            (X, Y),
            KEYS,
            {"learning_rate": np.array([[1.0], [100.0]])},
            per_seed=("learning_rate",),
        )


def test_fixed_order_is_a_replace_one_guarantee_only():
    with pytest.raises(ValueError, match="replace-one guarantees"):
        DPPlan.create(
            "fixed_order",
            N,
            steps=10,
            l2_clip_norm=1.0,
            noise_multiplier=2.0,
            delta=1e-5,
            neighboring_relation="add_remove",
        )


def test_a_registered_sampler_cannot_be_replaced():
    from dpprep import sampling

    with pytest.raises(ValueError, match="registered already"):
        sampling.register(sampling.PoissonSampler())


def test_extensions_that_replace_the_mechanism_must_vouch_for_it():
    @dataclasses.dataclass(frozen=True)
    class Twice(Extension):
        def wrap(self, tx, values):
            return optax.chain(tx, tx)

    with pytest.raises(
        ValueError, match=r"replaces \['wrap'\] of the private mechanism, which the plan's"
    ):
        train(
            TrainConfig(LOGISTIC, Hyper(0.5), _plan(), extensions=(Twice(),)),
            LOGISTIC.init(None),
            (X, Y),
            KEY,
        )
    train(
        TrainConfig(
            LOGISTIC, Hyper(0.5), DPPlan.non_private("full", N, steps=2), extensions=(Twice(),)
        ),
        LOGISTIC.init(None),
        (X, Y),
        KEY,
    )  # a non-private plan claims nothing: anything goes


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_a_dpsgdf_grid_charges_each_point_its_own_mean_once():
    from dpprep import dpsgdf

    n = 500
    unit = dpsgdf.unit_normalize(RNG.normal(size=(n, 3)))
    models_ = dpsgdf.grid_models(["dpsgdf", "dpsgd"], [1.0], [0.5], [1.0], 2.0)
    keys = jax.random.split(KEY, 2)
    forward = dpsgdf.grid_group("g", models_, 50, 2, n, unit.mean(axis=0), keys, num_classes=2)
    backward = dpsgdf.grid_group(
        "g", models_[::-1], 50, 2, n, unit.mean(axis=0), keys, num_classes=2
    )
    labels = (unit[:, 0] > 0).astype(np.int32)
    eps = [
        sweeps.sweep_points(
            g.config, g.config.model.init(None), (unit, labels), keys, g.points, per_seed=g.per_seed
        ).epsilon
        for g in (forward, backward)
    ]
    np.testing.assert_allclose(eps[0], eps[1][::-1])
    # each model calibrated to ε = 2, mean included
    np.testing.assert_allclose(eps[0], [2.0, 2.0], atol=1e-3)


def test_a_multiplier_is_accounted_as_float32_runs_it():
    z = 3.29410295622689  # float32 rounds it down
    assert float(np.float32(z)) < z
    plan = DPPlan.create(
        "poisson", 5000, batch_size=100, steps=500, l2_clip_norm=1.0, noise_multiplier=z, delta=1e-5
    )
    assert plan.epsilon == pytest.approx(
        plan.execution.epsilon(float(np.float32(z)), 1e-5), rel=1e-12
    )
    with pytest.raises(ValueError, match="float32 cannot hold"):
        _plan(noise_multiplier=1e-46)
    calibrated = DPPlan.create(
        "poisson", 5000, batch_size=100, steps=500, l2_clip_norm=1.0, target_epsilon=0.5, delta=1e-5
    )
    assert calibrated.epsilon <= 0.5


def test_fit_passes_plan_options_to_the_plan():
    out = fit(
        LOGISTIC,
        LOGISTIC.init(None),
        (X, Y),
        KEY,
        target_epsilon=4.0,
        delta=1e-5,
        l2_clip_norm=1.0,
        learning_rate=0.5,
        sampling="full",
        steps=5,
        neighboring_relation="replace_one",
        iterates="average",
    )
    assert out.plan.neighboring_relation == "replace_one" and out.epsilon <= 4.0


def test_an_own_loop_gives_a_stochastic_model_its_keys():
    from flax import nnx

    from dpprep import frameworks

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.drop = nnx.Dropout(0.5, rngs=rngs)
            self.out = nnx.Linear(3, 2, rngs=rngs)

        def __call__(self, x):
            return self.out(self.drop(x))

    model = frameworks.from_flax_nnx(Net(nnx.Rngs(0)), loss="softmax_cross_entropy")
    plan = DPPlan.create("full", N, steps=2, l2_clip_norm=1.0, noise_multiplier=2.0, delta=1e-5)
    runs = []
    for key in (KEY, KEY, jax.random.key(7)):
        grad_fn, tx = plan.clipped_grad(model), plan.optimizer(key=key)
        params = model.init(None)
        state = tx.init(params)
        for _ in range(plan.steps):
            params, state, out = dp_step(
                params, state, (jnp.asarray(X), jnp.asarray(YC)), grad_fn=grad_fn, tx=tx
            )
        runs.append(jax.tree_util.tree_leaves(params))
    for a, b in zip(runs[0], runs[1]):
        np.testing.assert_array_equal(a, b)
    assert any(not np.allclose(a, b) for a, b in zip(runs[0], runs[2]))
