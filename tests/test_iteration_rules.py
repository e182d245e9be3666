"""DP-SGD by iteration (fixed_order with a random stop): the rules of amplification by iteration
(Feldman et al. 2018) — plain SGD, steps η ≤ 2/β with β finite and > 0, the iterate at the random
stop released — hold in the plan's own pieces (DPPlan, plan.optimizer, its privatizer, dp_step),
not only in train."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpprep import models, optimizers
from dpprep.algorithms import Hyper, TrainConfig, make_train_fn, train
from dpprep.plan import DPPlan
from dpprep.step import dp_step

N = 30
RNG = np.random.default_rng(3)
X = jnp.asarray(RNG.normal(size=(N, 3)), jnp.float32)
Y = jnp.asarray((RNG.normal(size=N) > 0).astype(np.float32))
MODEL = models.logistic_regression(3)
BETA, LR = 0.25, 1.5  # 2/β = 8


def _plan(**kw):
    options = dict(l2_clip_norm=1.0, noise_multiplier=2.0, delta=1e-5, smoothness=BETA)
    return DPPlan.create("fixed_order", N, **{**options, **kw})


def _own_loop(plan, key, lr, steps=None):
    """DP-SGD by iteration written by hand with the plan's pieces; every iterate."""
    grad_fn, tx = plan.clipped_grad(MODEL), plan.optimizer(learning_rate=lr, key=key)
    step = jax.jit(lambda p, s: dp_step(p, s, (X, Y), grad_fn=grad_fn, tx=tx)[:2])
    params = MODEL.init(None)
    state = tx.init(params)
    iterates = []
    for _ in range(plan.steps if steps is None else steps):
        params, state = step(params, state)
        iterates.append(params)
    return iterates, state


@pytest.mark.parametrize(
    "tx",
    [
        optax.adam(10.0),
        optax.sgd(100.0),
        optax.sgd(0.1),
        optax.sgd(0.1, momentum=0.9),
        optimizers.optimizer("sgd"),
        optax.identity(),
    ],
    ids=["adam", "sgd100", "sgd", "momentum", "named_sgd", "identity"],
)
def test_a_random_stop_plan_takes_no_optax_optimizer(tx):
    for step in ({}, {"learning_rate": 1.0}):
        with pytest.raises(ValueError, match=r"plain SGD.*tx=.* is refused.*learning_rate=η"):
            _plan().optimizer(tx, key=jax.random.key(0), **step)


def test_a_random_stop_plan_s_optimizer_is_plain_sgd_at_a_checked_step():
    plan = _plan()
    with pytest.raises(ValueError, match="learning_rate <= 2/β = 8"):
        plan.optimizer(learning_rate=8.001, key=jax.random.key(0))
    with pytest.raises(ValueError, match="give the step size"):
        plan.optimizer(key=jax.random.key(0))
    with pytest.raises(TypeError, match="schedule"):
        plan.optimizer(learning_rate=optax.constant_schedule(0.1), key=jax.random.key(0))
    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match="learning_rate must be finite and >= 0"):
            plan.optimizer(learning_rate=bad, key=jax.random.key(0))
    with pytest.raises(TypeError, match="learning_rate must be a scalar"):
        plan.optimizer(learning_rate=np.array([0.1, 0.2]), key=jax.random.key(0))
    plan.optimizer(learning_rate=8.0, key=jax.random.key(0))  # η = 2/β is contractive


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_smoothness_is_finite_and_positive_however_the_plan_is_made(bad):
    with pytest.raises(ValueError, match=r"smoothness must be a finite number > 0.*β > 0"):
        _plan(smoothness=bad)
    with pytest.raises(ValueError, match="smoothness must be a finite number > 0"):
        dataclasses.replace(_plan(), smoothness=bad)
    with pytest.raises(ValueError, match="smoothness must be a finite number > 0"):
        dataclasses.replace(DPPlan.non_private("fixed_order", N), smoothness=bad)


def test_smoothness_belongs_to_random_stop_plans_only():
    with pytest.raises(TypeError, match="smoothness must be a number"):
        _plan(smoothness="0.25")
    with pytest.raises(ValueError, match="give smoothness"):
        dataclasses.replace(_plan(), smoothness=None)
    fixed = DPPlan.create(
        "fixed_order", N, steps=5, l2_clip_norm=1.0, noise_multiplier=2.0, delta=1e-5
    )
    with pytest.raises(ValueError, match="only used by DP-SGD by iteration"):
        dataclasses.replace(fixed, smoothness=1.0)


def test_every_piece_checks_the_step_against_the_plan_s_beta():
    """The plan states β once; train, make_train_fn and plan.optimizer all hold η to its 2/β."""
    plan = dataclasses.replace(_plan(), smoothness=1.0)  # 2/β = 2
    with pytest.raises(ValueError, match="learning_rate <= 2/β = 2"):
        plan.optimizer(learning_rate=3.0, key=jax.random.key(0))
    config = TrainConfig(MODEL, Hyper(3.0), plan)
    with pytest.raises(ValueError, match="learning_rate <= 2/β = 2"):
        train(config, MODEL.init(None), (X, Y), jax.random.key(0))
    with pytest.raises(ValueError, match="learning_rate <= 2/β = 2"):
        make_train_fn(config, MODEL.init(None))
    with pytest.raises(ValueError, match=r"plain SGD.*config.optimizer"):
        train(
            TrainConfig(MODEL, Hyper(1.0), plan, optimizer=optimizers.optimizer("adam")),
            MODEL.init(None),
            (X, Y),
            jax.random.key(0),
        )


def _roundoff(steps: int, params) -> float:
    """float32 roundoff that ``steps`` updates of parameters as large as ``params`` can gather
    between two compilations of the same steps (a scan and a loop of single steps order their
    sums differently): one unit of roundoff of the largest magnitude per step."""
    largest = max(float(np.max(np.abs(leaf))) for leaf in jax.tree_util.tree_leaves(params))
    return steps * float(np.finfo(np.float32).eps) * largest


def test_an_own_loop_of_all_steps_releases_train_s_iterate_at_the_random_stop():
    """A loop of all plan.steps through dp_step releases θ_T, the iterate train releases with the
    same key: the privatizer draws T from the run key's "stop" stream and zeroes every later
    update."""
    plan, key = _plan(), jax.random.key(11)
    want, metrics = train(TrainConfig(MODEL, Hyper(LR), plan), MODEL.init(None), (X, Y), key)
    stop = int(metrics["stopping_time"])
    assert 2 <= stop < plan.steps - 1  # this key stops early: the test sees a frozen tail
    iterates, state = _own_loop(plan, key, LR)
    for a, b in zip(jax.tree_util.tree_leaves(iterates[-1]), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=0, atol=_roundoff(stop, want))
    # after the T-th update the params do not move (bitwise), before it they do
    for later in iterates[stop:]:
        for a, b in zip(
            jax.tree_util.tree_leaves(later), jax.tree_util.tree_leaves(iterates[stop - 1])
        ):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(iterates[stop - 1]["w"], iterates[stop - 2]["w"])
    # the account is of the whole random-stop procedure, whatever T was
    assert plan.spent(state) == plan.epsilon
    with pytest.raises(ValueError, match="all of them were taken"):
        dp_step(
            iterates[-1],
            state,
            (X, Y),
            grad_fn=plan.clipped_grad(MODEL),
            tx=plan.optimizer(learning_rate=LR, key=key),
        )


def test_spent_of_a_random_stop_plan_is_the_procedure_s_epsilon():
    plan = _plan()
    tx = plan.optimizer(learning_rate=LR, key=jax.random.key(1))
    assert plan.spent(tx.init(MODEL.init(None))) == 0.0
    _, state = _own_loop(plan, jax.random.key(1), LR, steps=1)
    assert plan.spent(state) == plan.epsilon


def test_the_random_stop_holds_under_jit_with_a_traced_key():
    """The pieces built inside jit/vmap from a traced run key stop where train stops."""
    plan = _plan()
    keys = jax.random.split(jax.random.key(4), 3)
    grad_fn = plan.clipped_grad(MODEL)

    def run(key):
        tx = plan.optimizer(learning_rate=LR, key=key)

        def step(carry, _):
            params, state = carry
            params, state, _ = dp_step(params, state, (X, Y), grad_fn=grad_fn, tx=tx)
            return (params, state), None

        params0 = MODEL.init(None)
        (params, _), _ = jax.lax.scan(step, (params0, tx.init(params0)), None, plan.steps)
        return params

    got = jax.jit(jax.vmap(run))(keys)
    fn = make_train_fn(TrainConfig(MODEL, Hyper(LR), plan), MODEL.init(None))
    want = jax.vmap(lambda k: fn(MODEL.init(None), X, Y, k)[0])(keys)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=0, atol=_roundoff(plan.steps, want))


def test_a_random_stop_layout_cannot_be_cut_or_changed():
    plan = _plan()
    with pytest.raises(ValueError, match=r"steps=5 \(its layout has 30\)"):
        plan.with_steps(5)
    with pytest.raises(ValueError, match="sampler='poisson'"):
        dataclasses.replace(plan, execution=dataclasses.replace(plan.execution, sampler="poisson"))


def test_plans_without_a_random_stop_keep_any_optimizer():
    """fixed_order with steps is one Gaussian release per record (every iterate accounted), so any
    optimizer post-processes it; learning_rate is plain SGD's shorthand for any plan."""
    plan = DPPlan.create(
        "fixed_order", N, steps=5, l2_clip_norm=1.0, noise_multiplier=2.0, delta=1e-5
    )
    grad_fn = plan.clipped_grad(MODEL)
    for tx in (
        plan.optimizer(optax.adam(0.1), key=jax.random.key(0)),
        plan.optimizer(learning_rate=100.0, key=jax.random.key(0)),
    ):
        params = MODEL.init(None)
        state = tx.init(params)
        for _ in range(plan.steps):
            params, state, _ = dp_step(params, state, (X, Y), grad_fn=grad_fn, tx=tx)
        assert plan.spent(state) == plan.epsilon
        assert not np.array_equal(params["w"], MODEL.init(None)["w"])
    with pytest.raises(ValueError, match="not both"):
        plan.optimizer(optax.sgd(0.1), learning_rate=0.1, key=jax.random.key(0))


def test_a_non_private_random_stop_run_stops_like_train():
    """No guarantee to keep, but the same procedure: plan.optimizer still builds plain SGD (as
    train runs it) and stops where train stops; no β, so no step bound."""
    plan, key = DPPlan.non_private("fixed_order", N, l2_clip_norm=1.0), jax.random.key(2)
    with pytest.raises(ValueError, match="plain SGD"):
        plan.optimizer(optax.adam(0.1), key=key)
    want, _ = train(TrainConfig(MODEL, Hyper(20.0), plan), MODEL.init(None), (X, Y), key)
    iterates, state = _own_loop(plan, key, 20.0)
    for a, b in zip(jax.tree_util.tree_leaves(iterates[-1]), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert plan.spent(state) == math.inf
