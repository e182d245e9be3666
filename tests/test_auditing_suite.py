"""Issue 32: the audit's independent yardstick, its noise test, canaries that stress the rules, and
the paths under audit — each attacked with the bugs it exists to catch, and with ablations that
show which part of the audit catches them."""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import auditing
from dpprep.accounting import dp
from dpprep.auditing import AuditConfig
from dpprep.plan import DPPlan
from experiments.audit.bugs import BUGS
from experiments.audit.inject import audit_with_bug, inject

pytestmark = pytest.mark.slow  # audits at full run counts, minutes in all

RUNS, PILOT = 8000, 1000
POISSON = {"epochs": 5, "batch_size": 20}


# ---------------------------------------------------------------------------------------------
# The yardstick


@pytest.mark.parametrize(
    "sampler, kwargs", [("full", {"steps": 10}), ("poisson", POISSON), ("shuffle", POISSON)]
)
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_reference_calibration_agrees_with_the_plan(sampler, kwargs, epsilon):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # shuffle's as-if-Poisson warning
        plan = DPPlan.create(
            sampler, 100, l2_clip_norm=1.0, target_epsilon=epsilon, delta=1e-5, **kwargs
        )
    ref = auditing.yardstick(
        sampler, 100, epsilon=epsilon, delta=1e-5, pad=plan.execution.pad, **kwargs
    )
    # Two PLD calibrations of the same run (different grids and brackets) agree far inside τ.
    assert ref.noise_multiplier == pytest.approx(plan.noise_multiplier, rel=1e-3)
    assert ref.floor == pytest.approx((1 - auditing.YARDSTICK_TOLERANCE) * ref.noise_multiplier)
    assert ref.checks(plan) == {"calibration": True, "plan_account": True}
    assert ref.steps == plan.steps
    if sampler == "shuffle":  # held to the proven bound: `epochs` Gaussian releases at the floor
        assert ref.releases == 5
        assert ref.epsilon == pytest.approx(
            dp.analytic_gaussian_epsilon(ref.floor / math.sqrt(5), 1e-5), rel=0.01
        )
    else:  # held to ε at the floor: a hair above the request, never below it
        assert epsilon < ref.epsilon < epsilon * 1.05


def test_full_batch_yardstick_is_the_closed_form_of_t_gaussian_releases():
    # T releases at multiplier z are one release at z/√T: dp-accounting's analytic Gaussian ε,
    # computed without the PLD grid; the reference (pessimistic PLD) is at or a hair above it.
    ref = auditing.yardstick("full", 100, epsilon=2.0, delta=1e-5, steps=10)
    exact = dp.analytic_gaussian_epsilon(ref.floor / math.sqrt(10), 1e-5)
    assert exact <= ref.epsilon <= exact * 1.01


def test_the_yardstick_does_not_move_with_a_planted_calibration_bug():
    honest = auditing.yardstick("poisson", 100, epsilon=1.0, delta=1e-5, pad=51, **POISSON)
    with inject("half_steps_charged"):
        plan = DPPlan.create(
            "poisson", 100, l2_clip_norm=1.0, target_epsilon=1.0, delta=1e-5, **POISSON
        )
        # computed afresh under the bug: still independent
        auditing._reference_calibration.cache_clear()
        broken_ref = auditing.yardstick("poisson", 100, epsilon=1.0, delta=1e-5, pad=51, **POISSON)
    assert broken_ref.noise_multiplier == pytest.approx(honest.noise_multiplier, rel=1e-9)
    # The plan agrees with itself (it charges half its steps consistently), not with the yardstick.
    assert plan.epsilon <= 1.0
    assert honest.checks(plan) == {"calibration": False, "plan_account": True}


def test_yardstick_refuses_what_it_cannot_state():
    with pytest.raises(ValueError, match="no reference for sampler 'fixed_order'"):
        auditing.yardstick("fixed_order", 10, epsilon=1.0, delta=1e-5, steps=10)
    with pytest.raises(ValueError, match="needs batch_size"):
        auditing.yardstick("poisson", 100, epsilon=1.0, delta=1e-5, epochs=2)


# ---------------------------------------------------------------------------------------------
# The noise test


def test_noise_test_parts_are_exact_under_honest_noise():
    # Every part's p-value is uniform for i.i.d. N(0, s²) with s ≥ 1 (the F tests are scale-free;
    # the scale test is one-sided): the verdict's false-alarm rate is at most its significance.
    rng = np.random.default_rng(0)
    p_values = {part: [] for part in auditing.NOISE_PARTS}
    flagged = 0
    for _ in range(300):
        # s = 1: the scale test's boundary, where it is exact
        z = rng.standard_normal((200, 10, 2)) * 1.0
        test = auditing.noise_test(z, significance=0.05)
        flagged += bool(test.flagged)
        for part, p in test.p_values.items():
            p_values[part].append(p)
    from scipy import stats

    for part in ("steps", "runs", "coordinates", "scale"):
        assert stats.kstest(p_values[part], "uniform").pvalue > 1e-3, part
    assert flagged <= 35  # 300 verdicts at 5 %: expected ≤ 15 (Binomial upper tail far below 35)


@pytest.mark.parametrize(
    "part, make",
    [
        ("scale", lambda z: 0.95 * z),
        # less noise on one coordinate, more on the other: the pooled variance is 1.02
        ("scale", lambda z: z * np.array([0.9, 1.12])),
        ("steps", lambda z: np.repeat(z[:, :1], z.shape[1], axis=1)),  # the same draw every step
        (
            "steps",
            lambda z: z[:, :1] * (-1.0) ** np.arange(z.shape[1])[None, :, None],
        ),  # antithetic steps
        ("runs", lambda z: np.broadcast_to(z[:1], z.shape)),  # one draw for every run
        (
            "coordinates",
            lambda z: np.repeat(z[..., :1], z.shape[2], axis=2),
        ),  # one draw per coordinate pair
    ],
)
def test_noise_test_catches_noise_of_another_structure(part, make):
    z = np.random.default_rng(1).standard_normal((2000, 10, 2))
    assert not auditing.noise_test(z, significance=0.05).flagged
    assert part in auditing.noise_test(make(z), significance=0.05).flagged


def test_noise_test_refuses_a_shape_it_cannot_test():
    with pytest.raises(ValueError, match="runs, steps, coordinates"):
        auditing.noise_test(np.zeros((10, 1, 2)), significance=0.05)


# ---------------------------------------------------------------------------------------------
# Canaries


def test_the_canary_lands_where_drawn_and_keeps_the_background_in_order():
    bg = jnp.arange(1.0, 6.0)[:, None] * jnp.ones((5, 2))  # 5 background rows 1..5
    for index in (0, 3, 5):
        x = auditing._with_canary(bg, jnp.full((2,), -1.0), jnp.asarray(index))
        assert x.shape == (6, 2) and float(x[index, 0]) == -1.0
        assert np.array_equal(np.delete(np.asarray(x[:, 0]), index), np.arange(1.0, 6.0))
    drawn = jax.vmap(lambda k: auditing._place(k, auditing.CANARY_POSITIONS, 100))(
        jax.random.split(jax.random.key(0), 3000)
    )
    drawn = np.asarray(drawn)
    assert set(np.unique(drawn)) >= {0, 99} and (
        (drawn > 0) & (drawn < 99)
    ).mean() == pytest.approx(1 / 3, abs=0.03)
    assert (drawn == 0).mean() == pytest.approx(1 / 3, abs=0.03)
    only_last = jax.vmap(lambda k: auditing._place(k, ("last",), 100))(
        jax.random.split(jax.random.key(1), 50)
    )
    assert set(np.asarray(only_last)) == {99}


def test_opposed_likelihood_ratios_reduce_to_the_lone_canary_ones():
    a = jnp.linspace(-3, 3, 13)
    np.testing.assert_allclose(
        auditing._poisson_opposed_log_lr(a, 0.3, 0.2, 99, 0.0),
        auditing._poisson_log_lr(a, 0.3, 0.2),
        rtol=1e-5,
        atol=1e-6,
    )
    sizes = np.array([20.0, 20.0, 20.0, 20.0, 20.0])
    epoch = jnp.linspace(-1, 1, 5)[None]
    lone = jax.nn.logsumexp(epoch * 0.3 - 0.5 * 0.09 + jnp.log(sizes / 100), axis=-1)
    np.testing.assert_allclose(
        auditing._shuffle_opposed_log_lr(epoch, 0.3, 100, sizes, 0.0), lone, rtol=1e-5
    )


def test_poisson_target_states_its_releases_and_checks_and_returns_scores_with_null_columns():
    target = auditing.REGISTRY["dp_sgd_poisson"].build(
        AuditConfig("dp_sgd_poisson", runs=RUNS, **POISSON), jax.random.key(0)
    )
    assert target.releases == 25 and target.checks == {"calibration": True, "plan_account": True}
    out = target.runner(
        jax.random.split(jax.random.key(1), 4), jnp.array([True, False, True, False])
    )
    # two attacks per run: the sampler's likelihood ratio and the canary direction's total shift
    assert out["score"].shape == (4, 2) and out["null"].shape == (4, 25, 2)


# ---------------------------------------------------------------------------------------------
# The catalogue's new classes, and which part of the audit catches them


def _audit(learner, bug, **overrides):
    shape = {"dp_gd": {"steps": 10}}.get(learner, POISSON)
    cfg = AuditConfig(
        learner, epsilon=1.0, runs=RUNS, pilot_runs=PILOT, seed=3, **{**shape, **overrides}
    )
    return audit_with_bug(bug, cfg)


@pytest.mark.parametrize(
    "learner, bug, by",
    [
        ("dp_gd", "calibration_0.7x", "check:calibration"),
        ("dp_sgd_poisson", "half_steps_charged", "check:calibration"),
        ("dp_gd", "noise_key_frozen", "noise:steps"),
        ("dp_sgd_poisson_sweep_point", "noise_key_frozen", "noise:steps"),
        ("dp_gd", "batch_max_scaling", "gdp"),
        ("dp_sgd_poisson", "padding_slots_real", "clopper_pearson"),
        ("dp_sgd_poisson", "first_record_always", "tradeoff"),
    ],
)
def test_new_bug_classes_are_caught_by_the_part_built_for_them(learner, bug, by):
    result = _audit(learner, bug)
    assert result.violation and by in result.caught_by, result.caught_by
    assert result.row()["caught_by"] == "+".join(result.caught_by)


@pytest.mark.parametrize(
    "learner", ["dp_gd", "dp_sgd_poisson", "dp_sgd_poisson_vmap_clip", "dp_sgd_poisson_sweep_point"]
)
def test_honest_paths_are_not_flagged(learner):
    result = _audit(learner, None)
    assert not result.violation, result.caught_by
    assert result.noise is not None and result.checks["releases"]


@pytest.mark.parametrize(
    "bug, overrides",
    [
        ("batch_max_scaling", {"opposer": False}),  # a lone canary: the rule looks like clipping
        (
            "first_record_always",
            {"canary_positions": ("last",)},
        ),  # the canary never in the broken slot
    ],
)
def test_without_the_stressing_canaries_the_same_bugs_pass(bug, overrides):
    # The ablation that shows what the canaries are for: the audit of issue 19 missed these.
    learner = "dp_gd" if bug == "batch_max_scaling" else "dp_sgd_poisson"
    assert not _audit(learner, bug, **overrides).violation


def test_per_leaf_norms_reach_only_the_multi_leaf_path():
    # The GLM fast path never takes a global norm over leaves; the vmap path of a two-leaf model
    # does.
    assert BUGS["per_leaf_norms"].learners == ("dp_sgd_poisson_vmap_clip",)
    result = audit_with_bug(
        "per_leaf_norms",
        AuditConfig(
            "dp_sgd_poisson_vmap_clip", epsilon=1.0, runs=20_000, pilot_runs=2000, **POISSON
        ),
    )
    assert result.violation and "tradeoff" in result.caught_by


# ---------------------------------------------------------------------------------------------
# The protocol


def test_a_runner_releasing_more_updates_than_charged_is_flagged_and_bad_outputs_refused():
    base = auditing.REGISTRY["dp_gd"].build(
        AuditConfig("dp_gd", runs=RUNS, steps=10), jax.random.key(0)
    )

    def build(releases, runner=base.runner):
        return lambda cfg, key: auditing.AuditTarget(
            runner,
            base.theoretical,
            base.claimed,
            rigorous=base.rigorous,
            profile=base.profile,
            releases=releases,
        )

    auditing.register("more_releases", build(9))
    auditing.register(
        "bad_null", build(None, jax.jit(lambda k, i: {"score": i * 1.0, "null": i * 1.0}))
    )
    try:
        result = auditing.audit(AuditConfig("more_releases", runs=RUNS, pilot_runs=PILOT, steps=10))
        assert result.checks["releases"] is False and "check:releases" in result.caught_by
        with pytest.raises(ValueError, match="'null': .*T, m"):
            auditing.audit(AuditConfig("bad_null", runs=RUNS, pilot_runs=PILOT))
    finally:
        auditing.REGISTRY.pop("more_releases", None)
        auditing.REGISTRY.pop("bad_null", None)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"canary_positions": ("middle",)}, "canary_positions"),
        ({"canary_positions": ()}, "canary_positions"),
        ({"canary_positions": "first"}, "canary_positions"),
        ({"opposer": 1}, "opposer"),
    ],
)
def test_bad_canary_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AuditConfig("dp_gd", **kwargs)


# ---------------------------------------------------------------------------------------------
# More paths: DPSGD-F's grid, CorrDP's coordinate classes, private selection (host runners)


def test_dpsgdf_grid_path_is_the_engine_path_and_its_bugs_show():
    # The grid (grid_group's calibration and mean, sweep_points' run of the C_F = 2 point) gives
    # the engine's DPSGD-F run, reached through the grid: with the canary first in both, the same
    # scores and noise columns run for run.
    cfg = AuditConfig("dpsgdf_grid", epsilon=1.0, runs=2000, pilot_runs=500, seed=3, **POISSON)
    engine_cfg = AuditConfig(
        "dpsgdf",
        epsilon=1.0,
        runs=2000,
        pilot_runs=500,
        seed=3,
        canary_positions=("first",),
        **POISSON,
    )
    grid_target = auditing.REGISTRY["dpsgdf_grid"].build(cfg, jax.random.key(0))
    engine_target = auditing.REGISTRY["dpsgdf"].build(engine_cfg, jax.random.key(0))
    keys, inside = jax.random.split(jax.random.key(1), 6), jnp.array([True, False] * 3)
    grid, engine = grid_target.runner(keys, inside), engine_target.runner(keys, inside)
    np.testing.assert_allclose(grid["score"], engine["score"], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(grid["null"], engine["null"], rtol=1e-3, atol=1e-4)
    # in-world runs left out
    assert np.isnan(grid["null"][0]).all() and np.isfinite(grid["null"][1]).all()
    assert grid_target.checks == {
        "calibration": True,
        "plan_account": True,
        "mean_calibration": True,
    }
    assert not auditing.audit(cfg).violation
    assert "check:mean_calibration" in audit_with_bug("mean_sigma_halved", cfg).caught_by
    assert audit_with_bug("mean_noiseless", cfg).violation


@pytest.mark.parametrize(
    "bug, by", [("noise_key_frozen", "noise:steps"), ("padding_slots_real", "clopper_pearson")]
)
def test_dpsgdf_noise_columns_and_positions_catch_what_its_lone_score_missed(bug, by):
    result = _audit("dpsgdf", bug)
    assert result.violation and by in result.caught_by, result.caught_by


def test_dpsgdf_opposers_survive_centring_and_show_a_batch_level_clip():
    """DPSGD-F's background opposes the canary in two halves (+e_d labelled −w, −e_d labelled +w):
    their features cancel in the mean, so centring keeps them, and their gradients add to about C
    against the canary per batch. A batch scaled by its largest norm (the canary's) shrinks them
    when the canary is present: caught with the opposers, invisible to the lone canary."""
    cfg = AuditConfig("dpsgdf", epsilon=1.0, runs=8000, pilot_runs=800, seed=3, **POISSON)
    unit_bg, labels, e_d, weight = auditing._dpsgdf_data(cfg, jax.random.key(0))
    assert unit_bg[:, cfg.dim].sum() == 0.0 and weight > 0
    # each opposer's gradient −y·C_F·x points along +e_d, about C per expected batch in all
    assert np.all(-labels * unit_bg[:, cfg.dim] >= 0)
    expected_batch = cfg.batch_size * (cfg.n - 1) / cfg.n
    assert np.sum(-labels * unit_bg[:, cfg.dim]) * 2.0 / (cfg.n - 1) * expected_batch == (
        pytest.approx(1.0, rel=0.02)
    )
    assert not auditing.audit(cfg).violation
    caught = audit_with_bug("batch_max_scaling", cfg)
    assert caught.violation and "tradeoff" in caught.caught_by, caught.verdict()
    lone = audit_with_bug("batch_max_scaling", dataclasses.replace(cfg, opposer=False))
    assert not lone.violation, lone.verdict()


def test_corrdp_canaries_on_each_coordinate_class_are_held_to_their_own_sigma():
    shape = {"epsilon": 1.0, "runs": RUNS, "pilot_runs": PILOT, "seed": 3, "steps": 10}
    insensitive = auditing.audit(AuditConfig("corrdp_sgd", **shape))
    sensitive = auditing.audit(AuditConfig("corrdp_sgd_sensitive", **shape))
    assert not insensitive.violation and not sensitive.violation
    # The sensitive coordinate has the full σ (factor 1), so its pair is the more private one.
    assert sensitive.theoretical < insensitive.theoretical
    assert sensitive.details["factor_sensitive_library"] == 1.0
    # Halving the sensitive features' noise: the sensitive canary's bound exposes it, and the
    # insensitive audit's noise test (a sensitive column no record touches) does too.
    broken = audit_with_bug(
        "corrdp_sensitive_factors_halved", AuditConfig("corrdp_sgd_sensitive", **shape)
    )
    assert broken.violation and broken.bounds.epsilon_gdp > broken.theoretical
    assert (
        "noise:scale"
        in audit_with_bug(
            "corrdp_sensitive_factors_halved", AuditConfig("corrdp_sgd", **shape)
        ).caught_by
    )


@pytest.mark.slow
def test_private_selection_is_audited_end_to_end_through_the_protocol():
    sizes = {"n": 40, "dim": 3, "steps": 4, "runs": 150, "pilot_runs": 50, "chunk": 50}
    honest = auditing.audit(AuditConfig("private_selection", "final_model", epsilon=2.0, **sizes))
    assert not honest.violation
    assert honest.checks == {"plan_account": True, "calibration": True}
    assert honest.bounds.auroc > 0.5  # the canary is seen
    # Positive control: the same selection with almost no training noise is exposed.
    control = auditing.audit(
        AuditConfig("private_selection", "final_model", epsilon=2.0, noise_factor=1e-3, **sizes)
    )
    assert control.violation and "clopper_pearson" in control.caught_by
    with pytest.raises(ValueError, match="final_model only.*one candidate's final model"):
        AuditConfig("private_selection", "white_box")
    # An accountant that charges the best of K candidates as one (ε 1.56 against 1 here) is
    # refuted by the independent calibration before any run could show it.
    unrepeated = audit_with_bug(
        "selection_unrepeated", AuditConfig("private_selection", "final_model", **sizes)
    )
    assert unrepeated.violation and unrepeated.caught_by == ("check:calibration",)


def test_the_selection_reference_is_dp_accountings_own_account_of_the_procedure():
    """The audit's yardstick for a selection (dp-accounting's events, the split averaged by hand)
    agrees with the selection's calibration to 1e-6, and the scores' ε with the selection's own
    account of the scores (written with its replace-one convention, 2σ): two derivations."""
    from dpprep.plan import ExecutionPlan
    from dpprep.selection import PrivateSelection, Repetitions

    for epsilon, steps, noise, validation in ((1.0, 4, 8.0, 4), (2.0, 10, 4.0, 10)):
        selection = PrivateSelection(
            Repetitions(2.0, 1.0), score_noise=noise, validation_size=validation
        )
        execution = ExecutionPlan.create(
            "full", 40 - validation, steps=steps, neighboring_relation="replace_one"
        )
        reference = auditing.selection_reference_multiplier(
            steps=steps,
            mean=2.0,
            shape=1.0,
            score_noise=noise,
            in_validation=validation / 40,
            epsilon=epsilon,
            delta=1e-5,
        )
        assert reference == pytest.approx(selection.calibrate(execution, epsilon, 1e-5), rel=1e-6)
        scores = auditing.selection_scores_epsilon(
            mean=2.0, shape=1.0, score_noise=noise, delta=1e-5
        )
        assert scores == pytest.approx(selection.scores_epsilon(execution, 1e-5), rel=1e-9)


@pytest.mark.slow
def test_a_selections_noisy_scores_are_audited_through_search_many():
    """The canary in the validation part moves every candidate's count by one: honest, not
    flagged (scores' ε 1); score noise scaled for the accuracy instead of the count (σ/20) is
    caught."""
    sizes = {"n": 40, "dim": 3, "steps": 4, "runs": 1000, "pilot_runs": 200, "chunk": 500}
    cfg = AuditConfig("selection_scores", "final_model", **sizes)
    honest = auditing.audit(cfg)
    assert not honest.violation and honest.theoretical == pytest.approx(1.0, rel=1e-6)
    broken = audit_with_bug("score_noise_per_accuracy", cfg)
    assert broken.violation and "clopper_pearson" in broken.caught_by, broken.verdict()


def test_a_host_runner_with_a_wrong_output_is_refused():
    auditing.register(
        "bad_host",
        lambda cfg, key: auditing.AuditTarget(
            lambda keys, inside: np.zeros(3), 1.0, 1.0, host=True
        ),
    )
    try:
        with pytest.raises(ValueError, match="must return \\(400,\\) scores"):
            auditing.audit(AuditConfig("bad_host", runs=RUNS, pilot_runs=200))
    finally:
        auditing.REGISTRY.pop("bad_host", None)


@pytest.mark.parametrize("learner, shape", [("dp_gd", {"steps": 10}), ("dp_sgd_poisson", POISSON)])
def test_the_train_path_audited_is_what_train_runs(learner, shape):
    # The white-box targets run engine_fn (one jitted `_run` over the static config and layout):
    # the computation `train` runs for these models, the same parameters key for key.
    from dpprep import algorithms

    cfg = AuditConfig(learner, runs=RUNS, **shape)
    layout = auditing._layout(cfg, "train")
    sampling = "full" if learner == "dp_gd" else "poisson"
    kwargs = {"steps": 10} if learner == "dp_gd" else POISSON
    plan = DPPlan.create(
        sampling, cfg.n, l2_clip_norm=1.0, target_epsilon=1.0, delta=1e-5, **kwargs
    )
    config = algorithms.TrainConfig(layout.model, algorithms.Hyper(1.0), plan, track_params=True)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(cfg.n, layout.features)), jnp.float32)
    y = jnp.asarray(rng.normal(size=cfg.n), jnp.float32)
    params0, key = layout.model.init(None), jax.random.key(5)
    trained, _ = algorithms.train(config, params0, (x, y), key)
    engine, _ = algorithms.engine_fn(config)(algorithms.traced(config), params0, x, y, key)
    np.testing.assert_array_equal(np.asarray(trained["w"]), np.asarray(engine["w"]))
