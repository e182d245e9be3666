"""Audits through the public drivers (``train``, ``fit``, ``dp_step`` in a loop, ``sweep_points``),
with the canary inserted into the data the driver is given: every option runs, an honest driver is
not flagged, and a bug on a driver's own path is caught through it."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from dpprep import auditing
from dpprep.auditing import AuditConfig, audit
from experiments.audit.inject import audit_with_bug

pytestmark = pytest.mark.slow  # audits through host loops of public calls, a minute or more
POISSON = {"epochs": 5, "batch_size": 20}


@pytest.mark.parametrize(
    "options",
    [
        {"learner": "train", "leaves": 3, "microbatch_size": 4, "steps_per_call": 7},
        {"learner": "fit", "sampling": "full", "steps": 10, "leaves": 2},
        {"learner": "dp_step", "microbatch_size": 4, "learning_rate": 4.0},
        {"learner": "sweep_points", "sampling": "shuffle"},
    ],
    ids=["train", "fit", "dp_step", "sweep_points"],
)
def test_every_driver_returns_two_attacks_and_the_null_updates_of_its_run(options):
    options = {**POISSON, **options}
    cfg = AuditConfig(runs=400, pilot_runs=100, **options)
    target = auditing.REGISTRY[cfg.learner].build(cfg, jax.random.key(0))
    assert target.host and target.checks == {"calibration": True, "plan_account": True}
    out = target.runner(
        jax.random.split(jax.random.key(1), 4), jnp.array([True, False, True, False])
    )
    attacks = 1 if cfg.sampling == "full" else 2
    steps = cfg.steps if cfg.sampling == "full" else 25
    assert out["score"].shape == ((4,) if attacks == 1 else (4, 2))
    assert out["null"].shape == (4, steps, 2) and target.releases == steps


def test_an_honest_driver_is_not_flagged():
    result = audit(AuditConfig("dp_step", runs=4000, pilot_runs=400, **POISSON))
    assert not result.violation and result.rigorous_epsilon < result.theoretical


@pytest.mark.parametrize(
    "bug, options, caught_by",
    [
        # the host loop of compiled calls (train's own): each call redraws the first's noise
        ("calls_restart_at_zero", {"learner": "train", "steps_per_call": 7}, "noise:steps"),
        # fit's own plan: calibrated at 10·δ (a deterministic check against the yardstick)
        ("fit_delta_tenfold", {"learner": "fit"}, "check:calibration"),
        # sweep_points' host code: every seed the first seed's key
        ("seeds_share_first_key", {"learner": "sweep_points"}, "noise:runs"),
        # the optimizer's learning rate before the noise: invisible at η = 1, not at η = 4
        (
            "noise_after_learning_rate",
            {"learner": "dp_step", "learning_rate": 4.0},
            None,  # dp_step's privatizer comes first by construction: not reached
        ),
    ],
)
def test_a_bug_on_a_drivers_own_path_is_caught_through_it(bug, options, caught_by):
    cfg = AuditConfig(runs=1000, pilot_runs=200, **{**POISSON, **options})
    if caught_by is None:
        with pytest.raises(ValueError, match=f"does not reach learner '{cfg.learner}'"):
            audit_with_bug(bug, cfg)
        return
    result = audit_with_bug(bug, cfg)
    assert result.violation and caught_by in result.caught_by, result.verdict()


def test_a_replace_one_plan_is_audited_against_its_own_relation():
    """The canary against its opposite (the worlds' sums differ by 2C), the plan and the yardstick
    both replace-one: honest, not flagged; a plan that accounts add/remove whatever it states
    (noise for C, not 2C: ε 2.15 against 1) is caught by the attack, the noise test and the
    calibration check."""
    honest = audit(
        AuditConfig(
            "dp_step", runs=4000, pilot_runs=400, neighboring_relation="replace_one", **POISSON
        )
    )
    assert not honest.violation, honest.verdict()
    broken = audit_with_bug(
        "relation_dropped",
        AuditConfig(
            "dp_step",
            sampling="full",
            steps=10,
            runs=2000,
            pilot_runs=200,
            neighboring_relation="replace_one",
        ),
    )
    assert broken.violation
    assert {"gdp", "noise:scale", "check:calibration"} <= set(broken.caught_by), broken.verdict()


@pytest.mark.parametrize("driver", auditing.DRIVERS)
def test_a_final_model_audit_scores_the_last_iterate_the_driver_returns(driver):
    options = {"sampling": "full", "steps": 10} if driver == "fit" else POISSON
    cfg = AuditConfig(
        driver,
        "final_model",
        runs=400,
        pilot_runs=100,
        optimizer="adam",
        learning_rate=0.1,
        **options,
    )
    target = auditing.REGISTRY[driver].build(cfg, jax.random.key(0))
    assert target.releases is None  # no updates released, no release count to check
    out = target.runner(
        jax.random.split(jax.random.key(1), 4), jnp.array([True, False, True, False])
    )
    assert jnp.shape(out) == (4,) and bool(jnp.all(jnp.isfinite(jnp.asarray(out))))


@pytest.mark.parametrize("optimizer, learning_rate", [("sgd", 1.0), ("adam", 0.1)])
def test_the_last_iterate_of_dp_gd_shows_a_2c_clip_bound(optimizer, learning_rate):
    """DP-GD's last iterate alone (full batch: for SGD, the sum of every update) sees per-example
    gradients clipped to 2C, with SGD and with Adam; the honest run is not flagged."""
    cfg = AuditConfig(
        "dp_step",
        "final_model",
        sampling="full",
        steps=10,
        optimizer=optimizer,
        learning_rate=learning_rate,
        runs=4000,
        pilot_runs=400,
    )
    assert not audit(cfg).violation
    broken = audit_with_bug("clip_2c", cfg)
    assert broken.violation and "gdp" in broken.caught_by, broken.verdict()


def test_dpsgdf_fit_is_audited_through_its_own_call():
    """DPSGD-F through dpsgdf.fit (its normalisation, private mean, plan and run, one call per
    run): honest, not flagged; its mean formed from the rows' sum (noise n times too small for
    it) is caught."""
    cfg = AuditConfig("dpsgdf_fit", runs=500, pilot_runs=100, **POISSON)
    assert not audit(cfg).violation
    broken = audit_with_bug("mean_of_sum", cfg)
    assert broken.violation and "clopper_pearson" in broken.caught_by, broken.verdict()


def test_corrdp_is_audited_through_its_sweep_points():
    """CorrDP-SGD through corrdp.sgd.sweep_points (point values, noise scales and engine as users
    run them), on the last iterate the entry returns: honest, not flagged; the insensitive
    features' noise variance halved, caught."""
    cfg = AuditConfig("corrdp_points", "final_model", runs=4000, pilot_runs=400)
    target = auditing.REGISTRY["corrdp_points"].build(cfg, jax.random.key(0))
    out = target.runner(jax.random.split(jax.random.key(1), 3), jnp.array([True, False, True]))
    assert out.shape == (3,) and target.host and target.releases is None
    assert not audit(cfg).violation
    broken = audit_with_bug("corrdp_factors_halved", cfg)
    assert broken.violation and "gdp" in broken.caught_by, broken.verdict()
    with pytest.raises(ValueError, match="returns the last iterate"):
        AuditConfig("corrdp_points")


@pytest.mark.parametrize(
    "options",
    [
        # train's engine: a stochastic Model's keyed path (the step key split per example)
        {"learner": "train", "sampling": "full", "steps": 10},
        # dp_step: the user's loss takes the step's key (prng_argnum), three leaves
        {"learner": "dp_step", "leaves": 3, **POISSON},
    ],
    ids=["train", "dp_step"],
)
def test_a_stochastic_model_runs_its_keyed_path_and_a_bug_there_is_caught(options):
    """With dropout the drivers run their stochastic path: honest, not flagged; a keyed loss
    summed unclipped (a bug no deterministic model reaches: the audit without dropout passes it)
    is caught."""
    cfg = AuditConfig(runs=1000, pilot_runs=200, dropout=0.1, **options)
    honest = audit(cfg)
    assert not honest.violation, honest.verdict()
    broken = audit_with_bug("keyed_loss_unclipped", cfg)
    assert broken.violation and "clopper_pearson" in broken.caught_by, broken.verdict()
    deterministic = audit_with_bug("keyed_loss_unclipped", dataclasses.replace(cfg, dropout=0.0))
    assert not deterministic.violation, deterministic.verdict()
