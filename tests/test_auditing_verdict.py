"""The audit's verdict: two stages on independent runs (suspected, then confirmed), the family-wise
error rate they give, every audit's own key, several attacks, and a verdict a researcher can act
on. Toy targets whose scores are drawn directly keep these fast; the drivers' audits are in
tests/test_auditing_drivers.py."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import auditing
from dpprep.auditing import AuditConfig, audit


def _register(name: str, runner) -> None:
    auditing.register(name, lambda cfg, key: auditing.AuditTarget(runner, 1.0, 1.0, host=True))


@pytest.fixture
def toy():
    """Registers toy learners for one test; removes them after it."""
    names: list[str] = []

    def add(name, runner):
        names.append(name)
        _register(name, runner)

    yield add
    for name in names:
        auditing.REGISTRY.pop(name, None)


def _gaussian(shift_of_call):
    """A host runner: in-scores N(shift, 1), out-scores N(0, 1), the shift of the k-th call
    ``shift_of_call(k)``; its randomness is the runs' keys, so two stages are independent."""
    calls = [0]

    def runner(keys, inside):
        shift = shift_of_call(calls[0])
        calls[0] += 1
        seed = np.asarray(jax.random.key_data(keys)).astype(np.uint64).sum()
        rng = np.random.default_rng(int(seed) % 2**63)
        return rng.standard_normal(len(inside)) + shift * np.asarray(inside)

    return runner


def test_a_large_bug_is_suspected_then_confirmed_on_fresh_runs(toy):
    toy("always_leaks", _gaussian(lambda call: 8.0))
    result = audit(AuditConfig("always_leaks", runs=2000, pilot_runs=200, chunk=4400))
    assert result.suspected and result.violation
    assert result.confirmation is not None and result.confirmation.significance == pytest.approx(
        0.02
    )
    assert result.confirmed_by == result.caught_by and "clopper_pearson" in result.caught_by
    text = result.verdict()
    assert all(len(line) <= 88 for line in text.splitlines())
    text = " ".join(text.split())  # the lines as one
    assert text.startswith("VIOLATION of always_leaks")
    assert "probability at most 0.001" in text and "suspect:" in text and "next:" in text
    row = result.row()
    assert row["suspected"] and row["violation"] and row["confirmed_by"] == row["caught_by"]
    assert row["confirmation_epsilon_lb_rigorous"] > 1.0


def test_a_flag_that_does_not_come_back_on_fresh_runs_is_only_suspected(toy):
    # the first stage's two calls (pilot, evaluation) leak; the confirmation's two do not
    toy("leaks_once", _gaussian(lambda call: 8.0 if call < 2 else 0.0))
    result = audit(AuditConfig("leaks_once", runs=2000, pilot_runs=200, chunk=4400))
    assert result.suspected and not result.violation and result.caught_by == ()
    assert result.confirmation is not None and result.confirmation.fired == ()
    text = " ".join(result.verdict().split())
    assert text.startswith("SUSPECTED, not confirmed")
    assert "most likely a false alarm" in text and "seed=1" in text and "runs=4000" in text


def test_one_stage_audit_reports_its_suspicion_as_the_verdict(toy):
    toy("one_stage", _gaussian(lambda call: 8.0 if call < 2 else 0.0))
    cfg = AuditConfig("one_stage", runs=2000, pilot_runs=200, chunk=4400, significance=0.05)
    assert not cfg.confirms and cfg.stage_levels == (0.05,)
    result = audit(cfg)
    assert result.violation and result.confirmation is None


def test_honest_toy_audits_alarm_at_the_screen_and_confirm_at_the_family_wise_rate(toy):
    # 200 audits of a learner that leaks nothing (both worlds N(0, 1)): each is suspected with
    # probability <= 5 % and reported with probability <= 1e-3. At exactly 5 % the chance of more
    # than 22 suspicions in 200 is 1e-4; every suspicion must have run a confirmation, and none
    # may be reported (at 1e-3 the chance of any in 200 is 18 %; at this toy's 0.5 % · 2 % it is
    # 2e-3).
    toy("honest_toy", _gaussian(lambda call: 0.0))
    suspected = reported = 0
    for seed in range(200):
        result = audit(AuditConfig("honest_toy", runs=400, pilot_runs=100, chunk=1000, seed=seed))
        suspected += result.suspected
        reported += result.violation
        assert (result.confirmation is not None) == result.suspected
    assert suspected <= 22 and reported == 0


def test_every_audit_draws_from_its_own_key():
    base = AuditConfig("dp_gd")
    same = auditing.audit_key(AuditConfig("dp_gd"))
    data = lambda k: tuple(np.asarray(jax.random.key_data(k)).ravel())  # noqa: E731
    assert data(auditing.audit_key(base)) == data(same)
    others = [
        AuditConfig("dp_sgd_poisson", epochs=5, batch_size=20),
        dataclasses.replace(base, seed=1),
        dataclasses.replace(base, epsilon=2.0),
        dataclasses.replace(base, steps=11),
    ]
    keys = {data(auditing.audit_key(c)) for c in others} | {data(same)}
    assert len(keys) == len(others) + 1
    with pytest.raises(TypeError, match="audit_key takes an AuditConfig"):
        auditing.audit_key("dp_gd")


def test_two_attacks_each_get_half_the_significance_and_the_larger_bound():
    rng = np.random.default_rng(0)
    n = 4000
    weak = np.concatenate([rng.normal(0.3, 1, n), rng.normal(0, 1, n)])
    strong = np.concatenate([rng.normal(2.0, 1, n), rng.normal(0, 1, n)])
    pilot = np.stack([weak[::10], strong[::10]], axis=1)
    scores = np.stack([weak, strong], axis=1)
    cfg = AuditConfig("dp_gd", runs=n, pilot_runs=400)
    both = auditing._attack_bounds(
        (pilot[: len(pilot) // 2], pilot[len(pilot) // 2 :]),
        scores[:n],
        scores[n:],
        cfg,
        None,
        significance=0.05,
    )
    alone = auditing._attack_bounds(
        (pilot[: len(pilot) // 2, 1], pilot[len(pilot) // 2 :, 1]),
        scores[:n, 1],
        scores[n:, 1],
        cfg,
        None,
        significance=0.025,
    )
    # the strong attack's bound at half the level: the weak one adds nothing but the split
    assert both.epsilon_gdp == pytest.approx(alone.epsilon_gdp)
    assert both.epsilon_cp == pytest.approx(alone.epsilon_cp)


def test_driver_options_belong_to_drivers():
    with pytest.raises(ValueError, match="microbatch_size, leaves set for learner 'dp_gd'"):
        AuditConfig("dp_gd", leaves=3, microbatch_size=4)
    with pytest.raises(ValueError, match="sampling must be 'full', 'poisson' or 'shuffle'"):
        AuditConfig("train", sampling="uniform", epochs=5, batch_size=20)
    with pytest.raises(ValueError, match="leaves must be at most 8"):
        AuditConfig("dp_step", leaves=9, epochs=5, batch_size=20)
    with pytest.raises(ValueError, match="batch_size must be < n"):
        AuditConfig("train", batch_size=100)
    AuditConfig("fit", sampling="full", batch_size=100)  # no batches: any batch_size
    with pytest.raises(ValueError, match=r"screen must be in \[significance, 0.5\)"):
        AuditConfig("dp_gd", significance=0.01, screen=0.005)


def test_a_replace_one_audit_belongs_to_a_driver_and_is_held_to_replace_one():
    with pytest.raises(ValueError, match="neighboring_relation set for learner 'dp_gd'"):
        AuditConfig("dp_gd", neighboring_relation="replace_one")
    with pytest.raises(ValueError, match="neighboring_relation must be one of"):
        AuditConfig("train", neighboring_relation="zero_out")
    with pytest.raises(ValueError, match="neighboring_relation must be one of"):
        auditing.yardstick("full", 100, epsilon=1.0, delta=1e-5, steps=10, neighboring_relation="")
    # A full-batch Gaussian release has sensitivity 2C under replace-one: the reference noise
    # doubles exactly, and the curve the audit is held to is the add/remove curve at half the noise.
    add = auditing.yardstick("full", 100, epsilon=1.0, delta=1e-5, steps=10)
    replace = auditing.yardstick(
        "full", 100, epsilon=1.0, delta=1e-5, steps=10, neighboring_relation="replace_one"
    )
    assert replace.noise_multiplier == pytest.approx(2 * add.noise_multiplier, rel=1e-4)
    assert replace.epsilon == pytest.approx(add.epsilon, rel=1e-3)
    grid = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(replace.profile()(grid), add.profile()(grid), rtol=1e-2, atol=1e-9)
    # Poisson: replace-one is not add/remove at twice the noise (dp-accounting's own event)
    poisson = auditing.yardstick(
        "poisson", 100, epsilon=1.0, delta=1e-5, epochs=5, batch_size=20
    ).noise_multiplier
    poisson_r = auditing.yardstick(
        "poisson",
        100,
        epsilon=1.0,
        delta=1e-5,
        epochs=5,
        batch_size=20,
        neighboring_relation="replace_one",
    ).noise_multiplier
    assert poisson < poisson_r < 2 * poisson


def test_a_new_config_option_at_its_default_keeps_every_audits_key():
    """Committed audits (results/audit, the guide, the notebook) reproduce only if their keys do:
    a field added to AuditConfig is left out of the key's digest at its default
    (``auditing._ADDED_FIELDS``); one added without that changes every audit's runs."""
    digested = {
        "batch_size", "canary_norm", "canary_positions", "chunk", "delta", "dim", "epochs",
        "eps_f", "epsilon", "learner", "learning_rate", "leaves", "levels", "microbatch_size",
        "missing_fraction", "n", "noise_factor", "opposer", "pilot_runs", "runs", "sampling",
        "screen", "seed", "significance", "steps", "steps_per_call", "threat_model", "tv",
    }  # fmt: skip
    names = {f.name for f in dataclasses.fields(AuditConfig)}
    assert names == digested | set(auditing._ADDED_FIELDS)
    # the key of a default DP-GD audit, as it was before any field was added
    key = jax.random.key_data(auditing.audit_key(AuditConfig("dp_gd")))
    assert key.tolist() == [3902235833, 1695763537]
    # a new option set away from its default is part of the digest
    replace = AuditConfig("train", neighboring_relation="replace_one")
    assert not np.array_equal(
        jax.random.key_data(auditing.audit_key(replace)),
        jax.random.key_data(auditing.audit_key(AuditConfig("train"))),
    )


def test_adam_is_a_drivers_option_audited_on_the_last_iterate():
    with pytest.raises(ValueError, match="is audited under threat_model='final_model'"):
        AuditConfig("train", optimizer="adam")
    with pytest.raises(ValueError, match="optimizer set for learner 'dp_gd'"):
        AuditConfig("dp_gd", "final_model", optimizer="adam")
    with pytest.raises(ValueError, match="optimizer must be one of"):
        AuditConfig("train", "final_model", optimizer="rmsprop")
    AuditConfig("dp_step", "final_model", optimizer="adam", epochs=5, batch_size=20)
    assert auditing.SUPPORTED["dp_step"] == auditing.THREAT_MODELS


def test_dropout_is_a_drivers_option_and_makes_the_model_stochastic():
    with pytest.raises(ValueError, match="dropout set for learner 'dp_gd'"):
        AuditConfig("dp_gd", dropout=0.1)
    for bad in (-0.1, 1.0, float("nan"), "0.1"):
        with pytest.raises(ValueError, match=r"dropout must be a probability in \[0, 1\)"):
            AuditConfig("train", dropout=bad, epochs=5, batch_size=20)
    base = auditing.linear_loss_model(3)
    model = auditing.example_dropout(base, 0.25)
    assert model.stochastic and not model.has_fast_path
    assert auditing.example_dropout(base, 0.25) is model  # one object: one compilation
    # kept losses are scaled by 1/(1 - p), dropped ones are 0, at the rate asked for
    params = {"w": jnp.ones((3, 1))}
    x, y = jnp.ones((20_000, 3)), jnp.ones(20_000)
    losses = np.asarray(model.per_example_loss(params, x, y, key=jax.random.key(3)))
    assert set(np.unique(losses).tolist()) == {-4.0, 0.0}
    assert abs(np.mean(losses == 0.0) - 0.25) < 0.01
    np.testing.assert_array_equal(model.per_example_loss(params, x[:2], y[:2]), [-3.0, -3.0])
    with pytest.raises(ValueError, match="rate must be in"):
        auditing.example_dropout(base, 0.0)
