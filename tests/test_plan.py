"""The execution plan: the steps a run executes are the steps the accountant charges, samplers
without a dp-accounting event are refused with the reason, and the plan's ε / calibration take
the Poisson overflow slack out of δ consistently (the README's MNIST number pinned against
dp-accounting itself)."""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.privacy_accountant import NeighboringRelation

from dpprep import algorithms, models, sampling
from dpprep.accounting import dp
from dpprep.algorithms import Hyper, TrainConfig, train
from dpprep.accounting.dp import AccountingOptions, DpSgdSchedule
from dpprep.plan import DPPlan, ExecutionPlan

RDP = AccountingOptions(accountant="rdp")

RNG = np.random.default_rng(0)
N, D = 60, 3
X = RNG.normal(size=(N, D)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.float32)
MODEL = models.logistic_regression(D)
KEY = jax.random.PRNGKey(0)
HYPER = Hyper(0.1)


def _config(sampling_name: str, **kwargs) -> TrainConfig:
    """A private run (C = 1, z = 1) of ``sampling_name`` laid out by ``kwargs`` on the N rows."""
    plan = DPPlan.create(
        sampling_name, N, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5, **kwargs
    )
    return TrainConfig(MODEL, HYPER, plan)


def _executed_steps(config: TrainConfig) -> tuple[int, dict]:
    """Steps the scan executed (one batch_size entry per step) and its metrics."""
    _, metrics = train(config, MODEL.init(KEY), (X, Y), KEY)
    steps = len(np.asarray(metrics["batch_size"]))
    assert int(metrics["stopping_time"]) == steps  # no random stop: every scanned step updates
    return steps, metrics


def _scanned_steps(config: TrainConfig, n: int, d: int) -> int:
    """The engine's scan length, read from the traced train function's output shape (abstract
    evaluation: nothing is compiled or computed)."""
    model = config.model
    assert config.plan.n == n
    out = jax.eval_shape(
        algorithms.make_train_fn(config, model.init(None)),
        model.init(None),
        jax.ShapeDtypeStruct((n, d), jnp.float32),
        jax.ShapeDtypeStruct((n,), jnp.float32),
        jax.random.PRNGKey(0),
    )
    return out[1]["batch_size"].shape[0]


def _check_event(plan, sampling_name, batch_size, z=1.3):
    event = plan.dp_event(z)
    assert isinstance(event, dp_event.SelfComposedDpEvent)
    if sampling_name == "full":
        assert event.event == dp_event.GaussianDpEvent(z)
    else:  # poisson, and shuffle accounted as if Poisson at q = B/n
        assert event.event == dp_event.PoissonSampledDpEvent(
            batch_size / plan.n, dp_event.GaussianDpEvent(z)
        )
    return event.count


@pytest.mark.parametrize(
    "sampling_name,kwargs,expected_steps",
    [
        ("full", {"steps": 4}, 4),
        ("poisson", {"batch_size": 7, "epochs": 1.5}, 13),  # ⌈1.5·60/7⌉ = ⌈12.86⌉
        ("shuffle", {"batch_size": 7, "epochs": 3}, 27),  # B does not divide n: 3·⌈60/7⌉ = 3·9
    ],
)
def test_steps_executed_equal_steps_accounted(sampling_name, kwargs, expected_steps):
    config = _config(sampling_name, **kwargs)
    executed, metrics = _executed_steps(config)
    plan = config.plan.execution
    assert (
        executed
        == plan.steps
        == _check_event(plan, sampling_name, kwargs.get("batch_size"))
        == expected_steps
    )
    if sampling_name == "shuffle":
        # Every record is used exactly once per epoch, the short last batch included.
        sizes = np.asarray(metrics["batch_size"]).reshape(3, 9)
        np.testing.assert_array_equal(sizes.sum(axis=1), N)
        np.testing.assert_array_equal(sizes[:, -1], N - 8 * 7)


@pytest.mark.parametrize(
    "sampling_name,kwargs,expected_steps",
    [
        ("full", {"epochs": 3}, 3),  # full: epochs = steps
        ("poisson", {"batch_size": 8, "epochs": 2}, 15),  # ⌈2·60/8⌉
        ("poisson", {"batch_size": 8, "steps": 6}, 6),
        ("shuffle", {"batch_size": 12, "epochs": 2}, 10),  # B divides n: 2·5
        ("shuffle", {"batch_size": 7, "steps": 11}, 11),  # steps: a partial last epoch
    ],
)
def test_scan_length_equals_steps_accounted(sampling_name, kwargs, expected_steps):
    config = _config(sampling_name, **kwargs)
    plan = config.plan.execution
    assert (
        _scanned_steps(config, N, D)
        == plan.steps
        == _check_event(plan, sampling_name, kwargs.get("batch_size"))
        == expected_steps
    )


def test_issue_case_shuffle_60000_1024_40_epochs_is_2360_steps():
    """The issue's case, without training at that size: 40 epochs of ⌈60000/1024⌉ = 59 batches
    are scanned and charged."""
    config = TrainConfig(
        MODEL, HYPER, DPPlan.non_private("shuffle", 60_000, batch_size=1024, epochs=40)
    )
    plan = config.plan.execution
    assert _check_event(plan, "shuffle", 1024) == plan.steps == 2360
    assert _scanned_steps(config, 60_000, D) == 2360


def test_fixed_order_with_steps_is_one_gaussian_release_per_record():
    """DP-FGD with T <= n steps runs T steps, but record t is used only at step t: each record
    is in one noisy release, so the run is accounted as ONE Gaussian step (parallel
    composition), replace-one (a replaced record moves that step's sum by 2C). So ε does not
    grow with T and equals the analytic Gaussian ε at sensitivity 2."""
    z, delta = 2.0, 1e-5
    eps = []
    for steps in (3, 10):
        config = _config("fixed_order", steps=steps)
        if steps == 10:
            executed, metrics = _executed_steps(config)
            np.testing.assert_array_equal(metrics["batch_size"], 1)
        else:
            executed = _scanned_steps(config, N, D)
        plan = config.plan.execution
        assert executed == plan.steps == steps
        assert plan.neighboring_relation == "replace_one"
        event = plan.dp_event(z)
        assert event == dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z), 1)
        eps.append(plan.epsilon(z, delta))
    assert eps[0] == eps[1]
    assert eps[0] == pytest.approx(
        dp.analytic_gaussian_epsilon(z, delta, sensitivity=2.0), rel=1e-3
    )
    # Composition over the T steps would charge far more (power of the check above).
    composed = dp.composed_epsilon(
        [dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z), 10)],
        delta,
        options=AccountingOptions(accountant="rdp", neighboring_relation="replace_one"),
    )
    assert composed > 2 * eps[0]


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        (
            {"sampling": "replacement", "batch_size": 8, "steps": 5},
            "no accountant for sampling with replacement",
        ),
    ],
)
def test_samplers_without_an_event_are_refused_with_the_reason(kwargs, reason):
    kwargs = dict(kwargs)
    sampling_name = kwargs.pop("sampling")
    with pytest.raises(ValueError, match="no dp-accounting event") as info:  # no private plan of it
        DPPlan.create(
            sampling_name, N, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5, **kwargs
        )
    assert reason in str(info.value)
    config = TrainConfig(MODEL, HYPER, DPPlan.non_private(sampling_name, N, **kwargs))
    plan = config.plan.execution
    # the run is laid out; it just cannot be accounted
    assert _scanned_steps(config, N, D) == plan.steps
    for call in (
        lambda: plan.dp_event(1.0),
        lambda: plan.epsilon(1.0, 1e-5),
        lambda: plan.calibrate(1.0, 1e-5),
        plan.schedule,
    ):
        with pytest.raises(ValueError, match="no dp-accounting event") as info:
            call()
        assert reason in str(info.value)


def test_every_sampler_without_an_event_says_why():
    """A sampler whose schedule is None must carry a reason (the refusal quotes it)."""
    for name, impl in sampling.SAMPLERS.items():
        plan = ExecutionPlan.create(
            name,
            50,
            batch_size=None if name in ("full", "fixed_order") else 5,
            steps=None if name == "fixed_order" else 3,
        )
        if impl.schedule(plan) is None:
            assert len(impl.no_event_reason) > 20, name


# ------------------------------------------------------------------------------------------------
# ε and calibration of a Poisson run, overflow slack included.

MNIST_N, MNIST_B, MNIST_EPOCHS = 60_000, 2048, 3


def _pld_epsilon(event: dp_event.DpEvent, delta: float) -> float:
    """dp-accounting directly (not through dpprep), at dpprep's PLD discretisation."""
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    return float(accountant.compose(event).get_epsilon(delta))


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_readme_mnist_number_and_calibration_round_trip():
    """README: Poisson, n = 60000, B = 2048, 3 epochs: 88 steps, z = 1.0623 for (2, 1e-5), the
    plan's ε at its own calibration is <= the target and close to it, and it solves the
    equation ε = ε_ideal(δ − (1 + e^ε)·p) that calibration solves."""
    plan = ExecutionPlan.create("poisson", MNIST_N, batch_size=MNIST_B, epochs=MNIST_EPOCHS)
    assert plan.steps == 88 == math.ceil(3 * 60_000 / 2048)
    z = plan.calibrate(2.0, 1e-5)
    assert z == pytest.approx(1.0623, abs=1e-4)
    eps = plan.epsilon(z, 1e-5)
    assert 2.0 - 1e-3 < eps <= 2.0
    p = plan.overflow_probability()
    assert 0 < p <= 1e-10
    schedule = dp.DpSgdSchedule(88, "poisson", MNIST_B / MNIST_N)
    assert eps == pytest.approx(
        dp.epsilon(z, 1e-5 - sampling.overflow_delta(eps, p), schedule), rel=1e-9
    )
    # Independently: dp-accounting on the hand-built event at δ less the overflow slack pins the
    # README's z (1 % less noise is far off the target).
    slack = sampling.overflow_delta(2.0, p)
    event = lambda zz: dp_event.SelfComposedDpEvent(  # noqa: E731
        dp_event.PoissonSampledDpEvent(2048 / 60_000, dp_event.GaussianDpEvent(zz)), 88
    )
    assert _pld_epsilon(event(1.0623), 1e-5 - slack) == pytest.approx(2.0, abs=1e-3)
    assert _pld_epsilon(event(1.0623 * 0.99), 1e-5 - slack) > 2.0 + 5e-3


def test_calibrate_round_trips_rdp():
    """The same round trip with the (fast) RDP accountant and a loose max_overflow_prob, where
    the slack is a visible share of δ."""
    plan = ExecutionPlan.create("poisson", 2000, batch_size=100, steps=50, max_overflow_prob=1e-7)
    target = 1.0
    z = plan.calibrate(target, 1e-5, options=RDP)
    eps = plan.epsilon(z, 1e-5, options=RDP)
    assert target - 1e-2 < eps <= target
    assert plan.epsilon(z * 0.99, 1e-5, options=RDP) > target  # the smallest z, to ~1 %


def test_poisson_epsilon_takes_the_overflow_slack_out_of_delta():
    """plan.epsilon(z, δ) = dp.epsilon(z, δ − (1 + e^ε)·p) at its own ε (a consistent (ε, δ)
    guarantee of the padded run), above the ideal mechanism's ε at δ. RDP accountant (fast) and
    a loose max_overflow_prob, so the slack is a visible share of δ."""
    z, delta = 1.1, 1e-5
    plan = ExecutionPlan.create("poisson", 2000, batch_size=100, steps=50, max_overflow_prob=1e-7)
    p = plan.overflow_probability()
    assert 1e-8 < p <= 1e-7
    schedule = dp.DpSgdSchedule(50, "poisson", 100 / 2000)
    eps = plan.epsilon(z, delta, options=RDP)
    slack = sampling.overflow_delta(eps, p)
    assert slack > 0.05 * delta
    assert eps == pytest.approx(dp.epsilon(z, delta - slack, schedule, options=RDP), rel=1e-9)
    assert eps > dp.epsilon(z, delta, schedule, options=RDP) + 1e-3


def test_plans_without_overflow_charge_exactly_the_schedule():
    plan = ExecutionPlan.create("full", 100, steps=20)
    assert plan.overflow_probability() == 0.0
    assert plan.epsilon(5.0, 1e-5) == dp.epsilon(5.0, 1e-5, dp.DpSgdSchedule(20, "full"))
    with pytest.raises(ValueError, match="replace_one guarantee"):
        ExecutionPlan.create("fixed_order", 100, steps=5).epsilon(
            1.0, 1e-5, options=AccountingOptions(neighboring_relation="add_remove")
        )


def test_options_default_to_the_plans_relation():
    plan = ExecutionPlan.create("full", 1000, steps=16, neighboring_relation="replace_one")
    rep = dp.epsilon(
        6.0,
        1e-5,
        DpSgdSchedule(16, "full"),
        options=AccountingOptions(neighboring_relation="replace_one"),
    )
    assert plan.epsilon(6.0, 1e-5) == rep
    rdp = AccountingOptions(accountant="rdp", neighboring_relation="replace_one")
    assert plan.epsilon(6.0, 1e-5, options=rdp) == dp.epsilon(
        6.0, 1e-5, DpSgdSchedule(16, "full"), options=rdp
    )


@pytest.mark.parametrize("method", ["epsilon", "calibrate"])
def test_options_with_another_relation_are_refused(method):
    plan = ExecutionPlan.create("full", 1000, steps=16, neighboring_relation="add_remove")
    with pytest.raises(ValueError, match="neighboring_relation"):
        getattr(plan, method)(
            2.0, 1e-5, options=AccountingOptions(neighboring_relation="replace_one")
        )
    with pytest.raises(TypeError, match="options must be an AccountingOptions"):
        getattr(plan, method)(2.0, 1e-5, options={"accountant": "rdp"})


# ------------------------------------------------------------------------------------------------
# Extreme inputs: an answer or a clear error about the user's input (issue 21)


def test_full_batch_plan_calibrates_a_huge_target():
    # The overflow slack of a full batch is 0; e^800 overflowed before it was multiplied by it.
    plan = ExecutionPlan.create("full", 1000, steps=10)
    z = plan.calibrate(800.0, 1e-5)
    assert 0 < z and plan.epsilon(z, 1e-5) <= 800.0


def test_poisson_plan_huge_target_is_refused_clearly():
    plan = ExecutionPlan.create("poisson", 60_000, batch_size=256, epochs=1)
    with pytest.raises(
        ValueError,
        match=r"at target_epsilon=800.0 the padded Poisson batch's overflow slack "
        r"\(1 \+ e\^epsilon\)\*p = inf .* exceeds delta=1e-05; ask for a smaller",
    ):
        plan.calibrate(800.0, 1e-5)


def test_poisson_plan_tiny_noise_epsilon_is_refused_clearly():
    plan = ExecutionPlan.create("poisson", 60_000, batch_size=256, epochs=1)
    with (
        pytest.warns(UserWarning, match="RDP"),
        pytest.raises(
            ValueError,
            match=r"at noise_multiplier=1e-06 the ideal run is only epsilon=.*-DP, .* "
            r"no guarantee of the run as implemented follows; use more noise",
        ),
    ):
        plan.epsilon(1e-6, 1e-5)


def test_poisson_plan_huge_noise_is_zero_epsilon():
    # Was "epsilon must be a finite number > 0, got 0.0", about a value the user never gave.
    plan = ExecutionPlan.create("poisson", 60_000, batch_size=256, epochs=1)
    assert plan.overflow_probability() > 0
    assert plan.epsilon(1e12, 1e-5) == 0.0


def test_dp_sgd_by_iteration_is_calibrated_by_the_plan():
    """The one calibrate: fixed_order with a random stop is accounted by amplification by
    iteration."""
    plan = ExecutionPlan.create("fixed_order", 10, steps=None)
    z = plan.calibrate(2.0, 1e-5)
    assert dp.sgd_iter_epsilon(z, 1e-5, lipschitz=1.0, n=10)[0] == pytest.approx(2.0, abs=1e-6)
    assert plan.epsilon(z, 1e-5) == dp.sgd_iter_epsilon(z, 1e-5, lipschitz=1.0, n=10)[0]
    assert plan.epsilon(z * 0.99, 1e-5) > 2.0  # the smallest multiplier (to bisection accuracy)
    with pytest.raises(ValueError, match="does not compose with fixed_events"):
        plan.epsilon(z, 1e-5, fixed_events=(dp.gaussian_event(1.0),))
    with pytest.raises(ValueError, match="kappa = 1 only"):
        ExecutionPlan.create("fixed_order", 10, steps=None, kappa=2).calibrate(2.0, 1e-5)
    for call in (
        lambda: plan.dp_event(1.0),
        plan.schedule,
    ):  # still no event: its own bound accounts it
        with pytest.raises(ValueError, match="no dp-accounting event.*plan.epsilon"):
            call()


def test_dp_sgd_by_iteration_charges_the_random_stopping_mixture():
    """The plan charges the random-stopping mixture (dp.sgd_iter_epsilon), not Feldman et al.'s
    linearized Thm 26: less noise for the same target. Its epsilon decreases in z, and
    calibrate(epsilon(z)) returns z, never a multiplier whose epsilon exceeds the target."""
    for n in (10, 60_000):
        plan = ExecutionPlan.create("fixed_order", n, steps=None)
        zs = [0.05, 0.3, 0.8, 1.5, 3.0, 7.0, 20.0]
        eps = [plan.epsilon(z, 1e-5) for z in zs]
        assert eps == [dp.sgd_iter_epsilon(z, 1e-5, lipschitz=1.0, n=n)[0] for z in zs]
        assert np.all(np.diff(eps) < 0), eps
        for z0 in (0.8, 3.0, 7.0):
            target = plan.epsilon(z0, 1e-5)
            z = plan.calibrate(target, 1e-5)
            assert plan.epsilon(z, 1e-5) <= target
            assert z == pytest.approx(z0, rel=1e-8)
        z = plan.calibrate(1.0, 1e-5)
        assert plan.epsilon(z, 1e-5) <= 1.0 < plan.epsilon(z * (1 - 1e-6), 1e-5)
        # Thm 26 charges far more than the target at this noise (it needs 1.9x-3.2x the noise)
        assert dp.sgd_iter_linearized_epsilon(z, 1e-5, lipschitz=1.0, n=n)[0] > 1.5
    # a huge target: the bracket search walks down (every z has a bound; no order range)
    z = plan.calibrate(1e4, 1e-5)
    assert plan.epsilon(z, 1e-5) <= 1e4 < plan.epsilon(z * (1 - 1e-6), 1e-5)


def test_shuffle_is_accounted_as_poisson_with_a_warning_or_proven_on_request():
    plan = ExecutionPlan.create("shuffle", 1000, batch_size=100, epochs=3)
    with pytest.warns(
        UserWarning, match="not a proven guarantee.*shuffle_bound='no_amplification'"
    ):
        assumed = plan.epsilon(2.0, 1e-5)
    proven_plan = ExecutionPlan.create(
        "shuffle", 1000, batch_size=100, epochs=3, shuffle_bound="no_amplification"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the proven bound says nothing more
        proven = proven_plan.epsilon(2.0, 1e-5)
        z = proven_plan.calibrate(proven, 1e-5)
    assert proven == dp.composed_epsilon(
        [dp_event.SelfComposedDpEvent(dp.gaussian_event(2.0), 3)], 1e-5
    )
    assert proven > assumed  # no amplification claimed
    assert z == pytest.approx(2.0, rel=1e-3)
    with pytest.raises(ValueError, match="shuffle_bound is for sampling='shuffle'"):
        ExecutionPlan.create(
            "poisson", 1000, batch_size=100, epochs=3, shuffle_bound="no_amplification"
        )
    with pytest.raises(ValueError, match="shuffle_bound must be one of"):
        ExecutionPlan.create("shuffle", 1000, batch_size=100, epochs=3, shuffle_bound="maybe")


@pytest.mark.parametrize(
    "sampler, kwargs, asked",
    [
        (
            "poisson",
            {"batch_size": 10, "epochs": 1e12},
            r"epochs=1000000000000\.0 \(on n=1000, batch size 10\) is 1e\+14 steps",
        ),
        (
            "shuffle",
            {"batch_size": 10, "epochs": 10**12},
            r"epochs=1000000000000 \(on n=1000, batch size 10\) is 1e\+14 steps",
        ),
        (
            "without_replacement",
            {"batch_size": 10, "epochs": 1e9},
            r"epochs=1000000000\.0 .* is 1e\+11 steps",
        ),
        ("full", {"steps": 2**31}, r"steps=2147483648 is 2\.147e\+09 steps"),
    ],
)
def test_runs_beyond_int32_steps_are_refused_before_jax(sampler, kwargs, asked):
    """Issue 21: TrainConfig(epochs=1e12) planned 4e12 steps, then overflowed JAX's int32."""
    with pytest.raises(
        ValueError,
        match=asked + r"; a run takes at most 2\*\*31 - 1 = 2147483647 "
        r"\(its step counter is a JAX int32\)",
    ):
        ExecutionPlan.create(sampler, 1000, **kwargs)


def test_plan_with_1e12_epochs_is_refused():
    with pytest.raises(ValueError, match=r"is 1e\+14 steps; a run takes at most 2\*\*31 - 1"):
        DPPlan.non_private("poisson", 1000, batch_size=10, epochs=1e12)
    with pytest.raises(ValueError, match=r"is 1e\+14 steps; a run takes at most 2\*\*31 - 1"):
        DPPlan.create(
            "poisson",
            1000,
            batch_size=10,
            epochs=1e12,
            l2_clip_norm=1.0,
            noise_multiplier=1.0,
            delta=1e-5,
        )
    # the largest run is allowed
    assert ExecutionPlan.create("full", 1000, steps=2**31 - 1).steps == 2**31 - 1


def test_without_replacement_plan_with_default_options_is_refused_before_any_search(monkeypatch):
    """Issue 21: the refusal came after a whole RDP calibration (2-3 s)."""
    from dp_accounting import mechanism_calibration

    monkeypatch.setattr(
        mechanism_calibration,
        "calibrate_dp_mechanism",
        lambda *a, **k: pytest.fail("searched before refusing"),
    )
    plan = ExecutionPlan.create("without_replacement", 1000, batch_size=10, epochs=1)
    with pytest.raises(
        ValueError,
        match=r"sampling='without_replacement' is a replace-one guarantee that only "
        r"dp-accounting's RDP accountant bounds; pass "
        r"options=AccountingOptions\(accountant='rdp', "
        r"neighboring_relation='replace_one'\) "
        r"\(got accountant='pld', neighboring_relation='replace_one'\)",
    ):
        plan.calibrate(1.5, 1e-5)


# ------------------------------------------------------------------------------------------------
# The plan verifies its calibration, never trusts it


class _ScaledStore:
    """A calibration store answering ``factor`` times the honest multiplier."""

    def __init__(self, factor: float):
        self.factor = factor

    def calibrate(self, make_event, target_epsilon, delta, schedule, fixed, options):
        z = dp.composed_calibrate(make_event, target_epsilon, delta, options=options)
        return self.factor * z


_FULL_PLAN = dict(steps=20, l2_clip_norm=1.0, delta=1e-5, options=RDP)  # RDP: fast


def test_a_store_answering_too_little_noise_cannot_make_a_plan_miss_its_target():
    # The plan used to state the target and run at ε 3.67 for a target of 1.23, and the wrong
    # multiplier stayed in the in-memory cache after the block.
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match="too little noise, a wrong answer"):
        with dp.calibration_store(_ScaledStore(0.7)):
            plan = DPPlan.create("full", 1000, target_epsilon=1.23, **_FULL_PLAN)
    assert plan.epsilon <= 1.23 and plan.target_epsilon == 1.23
    assert plan.execution.epsilon(plan.noise_multiplier, 1e-5, options=RDP) <= 1.23
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # served from the cache, verified: no warning
        assert DPPlan.create("full", 1000, target_epsilon=1.23, **_FULL_PLAN) == plan
    dp.calibrate_noise.cache_clear()
    assert DPPlan.create("full", 1000, target_epsilon=1.23, **_FULL_PLAN) == plan


def test_a_plan_recalibrates_afresh_when_the_cache_answers_wrong(monkeypatch):
    # Whatever answered (here the in-memory cache, as if corrupted), the plan checks the ε of
    # its run and recalibrates without store or cache when it misses.
    dp.calibrate_noise.cache_clear()
    honest = DPPlan.create("full", 1000, target_epsilon=1.23, **_FULL_PLAN)
    real_get = dp._CALIBRATIONS.get
    monkeypatch.setattr(
        dp._CALIBRATIONS, "get", lambda key: None if real_get(key) is None else 0.7 * real_get(key)
    )
    with pytest.warns(UserWarning, match="misses the target .* calibrating afresh"):
        plan = DPPlan.create("full", 1000, target_epsilon=1.23, **_FULL_PLAN)
    assert plan == honest
    dp.calibrate_noise.cache_clear()


class _WrongAccountant:
    """A PlanAccountant whose calibrate answers 0.7x what its own epsilon needs."""

    def epsilon(self, plan, noise_multiplier, delta):
        return plan.epsilon(noise_multiplier, delta, options=RDP)

    def calibrate(self, plan, target_epsilon, delta):
        return 0.7 * plan.calibrate(target_epsilon, delta, options=RDP)


def test_an_accountant_whose_calibration_misses_is_refused():
    with pytest.warns(UserWarning, match="calibrating afresh"):
        with pytest.raises(ValueError, match="no plan meeting the target was found"):
            DPPlan.create(
                "full",
                1000,
                steps=20,
                l2_clip_norm=1.0,
                delta=1e-5,
                target_epsilon=1.23,
                accountant=_WrongAccountant(),
            )


def _executed_epsilon(z: float, clip: float, steps: int, grid: float) -> float:
    """ε at δ = 1e-5 of ``steps`` full-batch steps as the engine runs them (float32 noise std
    fl32(fl32(z)·fl32(C)) on sums of contributions of norm up to max(C, fl32(C))), by
    dp-accounting's PLD accountant called directly."""
    std = np.float32(np.float32(z) * np.float32(clip))
    multiplier = float(std) / max(clip, float(np.float32(clip)))
    accountant = pld_privacy_accountant.PLDAccountant(
        NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=grid
    )
    accountant.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(multiplier), steps))
    return accountant.get_epsilon(1e-5)


@pytest.mark.parametrize("clip", [3.0, 0.7, 1e-3, 7.1])
def test_calibrated_plans_meet_their_target_as_executed_in_float32(clip):
    # Float32 rounds z, C and z·C: with C = 3.0 or 0.7, some calibrated plans ran above their
    # target, and stated an ε below the one of their run. A coarse PLD grid makes ε(z) step, so
    # that calibrated multipliers sit right at the target (and the test is fast).
    grid = 1e-2
    options = AccountingOptions(pld_discretization=grid)
    for target in np.geomspace(0.3, 8.0, 50):
        plan = DPPlan.create(
            "full",
            1000,
            steps=10,
            l2_clip_norm=clip,
            target_epsilon=float(target),
            delta=1e-5,
            options=options,
        )
        executed = _executed_epsilon(plan.noise_multiplier, clip, 10, grid)
        assert executed <= target, (target, plan.noise_multiplier)
        # the ε stated is the executed run's, never below it (up to the accountant's rounding)
        assert plan.epsilon >= executed * (1 - 1e-12) and plan.epsilon <= target
        part = _executed_epsilon(plan.noise_multiplier, clip, 4, grid)
        assert plan.epsilon_at(plan.noise_multiplier, steps=4) >= part * (1 - 1e-12)


@pytest.mark.parametrize("delta", [0.5, 1 / N, 2 / N], ids=["0.5", "1/n", "2/n"])
def test_a_plan_refuses_delta_at_or_above_one_over_n_unless_opted_in(delta):
    kwargs = dict(steps=5, l2_clip_norm=1.0, noise_multiplier=2.0)
    why = r"delta=.* is >= 1/n = 1/60: a mechanism that publishes one random record whole is"
    with pytest.raises(ValueError, match=why):
        DPPlan.create("full", N, delta=delta, **kwargs)
    execution = ExecutionPlan.create("full", N, steps=5)
    with pytest.raises(ValueError, match=why):
        execution.calibrate(2.0, delta, options=RDP)
    plan = DPPlan.create("full", N, delta=delta, allow_large_delta=True, **kwargs)
    assert plan.allow_large_delta and plan.describe().endswith("δ ≥ 1/n allowed by the user")
    assert execution.calibrate(2.0, delta, options=RDP, allow_large_delta=True) > 0
    # A plan changed by hand is held to the same rule.
    plain = DPPlan.create("full", N, delta=1e-5, **kwargs)
    with pytest.raises(ValueError, match=why):
        dataclasses.replace(plain, delta=delta)
    with pytest.raises(ValueError, match=why):
        dataclasses.replace(plan, allow_large_delta=False)


def test_delta_just_below_one_over_n_is_accepted_and_delta_stays_below_one():
    below = math.nextafter(1 / N, 0.0)
    plan = DPPlan.create("full", N, steps=5, l2_clip_norm=1.0, noise_multiplier=2.0, delta=below)
    assert not plan.allow_large_delta and "1/n" not in plan.describe()
    for delta in (1.0, 2.0):
        with pytest.raises(ValueError, match="open interval"):
            DPPlan.create(
                "full",
                N,
                steps=5,
                l2_clip_norm=1.0,
                noise_multiplier=2.0,
                delta=delta,
                allow_large_delta=True,
            )


def test_fit_checks_delta_against_n_and_takes_the_opt_in():
    kwargs = dict(
        target_epsilon=2.0,
        l2_clip_norm=1.0,
        learning_rate=0.1,
        sampling="full",
        steps=2,
        options=RDP,
    )
    with pytest.raises(ValueError, match="1/n = 1/60"):
        algorithms.fit(MODEL, MODEL.init(None), (X, Y), KEY, delta=1 / N, **kwargs)
    out = algorithms.fit(
        MODEL, MODEL.init(None), (X, Y), KEY, delta=2 / N, allow_large_delta=True, **kwargs
    )
    assert out.epsilon <= 2.0 and "δ ≥ 1/n allowed by the user" in out.metrics["guarantee"]


def test_fit_under_a_wrong_store_runs_at_its_target():
    dp.calibrate_noise.cache_clear()
    with pytest.warns(UserWarning, match="too little noise, a wrong answer"):
        with dp.calibration_store(_ScaledStore(0.7)):
            out = algorithms.fit(
                MODEL,
                MODEL.init(None),
                (X, Y),
                KEY,
                target_epsilon=1.23,
                delta=1e-5,
                l2_clip_norm=1.0,
                learning_rate=0.1,
                sampling="full",
                steps=2,
                options=RDP,
            )
    assert out.epsilon <= 1.23
    assert out.plan.execution.epsilon(out.plan.noise_multiplier, 1e-5, options=RDP) <= 1.23
    dp.calibrate_noise.cache_clear()


@pytest.mark.parametrize("options", [{"accountant": "rdp"}, "rdp", ("pld",)], ids=repr)
def test_options_that_are_not_accounting_options_are_refused_before_anything_computes(
    monkeypatch, options
):
    monkeypatch.setattr(dp, "calibrate_noise", lambda *a, **k: pytest.fail("computed first"))
    monkeypatch.setattr(dp, "composed_epsilon", lambda *a, **k: pytest.fail("computed first"))
    why = r"options must be a dpprep.accounting.dp.AccountingOptions or None, got"
    for given in ({"noise_multiplier": 1.0}, {"target_epsilon": 1.0}):
        with pytest.raises(TypeError, match=why):
            DPPlan.create(
                "full", N, steps=5, l2_clip_norm=1.0, delta=1e-5, options=options, **given
            )
    monkeypatch.undo()
    plan = DPPlan.create("full", N, steps=5, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5)
    with pytest.raises(TypeError, match=why):
        dataclasses.replace(plan, options=options)
