"""Auditing: the statistics against independent values, bad input, and that a broken learner is
caught."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jax_privacy import auditing as jp_auditing

from dpprep import auditing
from dpprep.accounting import dp
from dpprep.auditing import AuditConfig, audit


def test_gdp_epsilon_matches_dp_accounting_gaussian():
    # μ-GDP is one Gaussian release with σ = 1/μ; pinned against dp-accounting's analytic value.
    for mu in (0.25, 1.0, 2.0):
        assert auditing.gdp_epsilon(mu, 1e-5) == pytest.approx(
            dp.analytic_gaussian_epsilon(1 / mu, 1e-5)
        )
    assert auditing.gdp_epsilon(0.0, 1e-5) == 0.0


def test_gdp_lower_bound_pinned_on_binary_scores():
    # One real threshold (scores in {0, 1}), Bonferroni over the 2 distinct scores: the bound is
    # Φ⁻¹(1 − FPR⁺) − Φ⁻¹(FNR⁺) with jax-privacy's own Clopper–Pearson upper bounds.
    from scipy import stats

    inside = np.r_[np.ones(700), np.zeros(300)]
    outside = np.r_[np.ones(200), np.zeros(800)]
    mu, eps = auditing.gdp_lower_bound(inside, outside, significance=0.05, delta=1e-5)
    a = 0.05 / 4
    fpr = jp_auditing._clopper_pearson_upper(200, 1000, a)
    fnr = jp_auditing._clopper_pearson_upper(300, 1000, a)
    assert mu == pytest.approx(stats.norm.isf(fpr) - stats.norm.ppf(fnr), rel=1e-9)
    assert eps == pytest.approx(auditing.gdp_epsilon(mu, 1e-5))


def test_gdp_lower_bound_close_to_jax_privacy_when_separated():
    # Same estimator; ours corrects over every distinct score (theirs over its Pareto frontier) and
    # never takes the reversed direction, so it is a little more conservative, never larger.
    rng = np.random.default_rng(0)
    inside, outside = rng.normal(1.5, 1, 5000), rng.normal(0, 1, 5000)
    _, ours = auditing.gdp_lower_bound(inside, outside, significance=0.05, delta=1e-5)
    theirs = jp_auditing.CanaryScoreAuditor(inside, outside).epsilon_from_gdp(0.05, 1e-5)
    assert 0.9 * theirs <= ours <= theirs


def test_gdp_lower_bound_is_zero_on_identical_samples_where_jax_privacy_is_not():
    # jax-privacy 2.0.0 takes |μ_t| of upper-bound estimates (PR #270): ε > 0 from two identical
    # distributions. Ours must stay a valid bound; the second assert documents why we do not call
    # theirs.
    rng = np.random.default_rng(1)
    inside, outside = rng.normal(0, 1, 10_000), rng.normal(0, 1, 10_000)
    _, ours = auditing.gdp_lower_bound(inside, outside, significance=0.05, delta=1e-5)
    assert ours == 0.0
    assert jp_auditing.CanaryScoreAuditor(inside, outside).epsilon_from_gdp(0.05, 1e-5) > 0.5


def test_gdp_lower_bound_is_valid_for_gaussian_scores():
    # Exact μ-GDP scores: over 40 repetitions at 95 % confidence the bound may exceed the truth
    # rarely; with Bonferroni over thresholds it is conservative, so we demand it never does here.
    rng = np.random.default_rng(2)
    mu = 0.8
    truth = auditing.gdp_epsilon(mu, 1e-5)
    bounds = []
    for _ in range(40):
        inside, outside = rng.normal(mu, 1, 3000), rng.normal(0, 1, 3000)
        thresholds = np.quantile(rng.normal(mu / 2, 1, 2000), np.linspace(0, 1, 34)[1:-1])
        bounds.append(
            auditing.gdp_lower_bound(
                auditing.discretise(inside, thresholds),
                auditing.discretise(outside, thresholds),
                significance=0.05,
                delta=1e-5,
            )[1]
        )
    assert max(bounds) <= truth
    assert np.median(bounds) > 0.5 * truth  # and it is not vacuous


def test_required_runs_is_where_a_perfect_attack_first_reaches_epsilon():
    eps, delta, sig, levels = 2.0, 1e-5, 0.05, 32
    n = auditing.required_runs(eps, delta, significance=sig, levels=levels)

    def perfect_bound(runs):
        a = sig / (2 * levels)
        u = 1 - a ** (1 / runs)
        return math.log((1 - delta - u) / u)

    assert perfect_bound(n) >= eps > perfect_bound(n - 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"learner": "dp_sgd_adam"}, "unknown learner 'dp_sgd_adam'; known: dp_gd"),
        ({"learner": "dp_gd", "threat_model": "grey_box"}, "unknown threat_model 'grey_box'"),
        (
            {"learner": "dp_sgd_iteration", "threat_model": "white_box"},
            "hides the intermediate iterates",
        ),
        ({"learner": "dp_gd", "runs": 10}, r"too few: .* fewer than \d+ runs per world"),
        ({"learner": "dp_gd", "epsilon": 0.0}, "epsilon"),
        ({"learner": "dp_gd", "delta": 1.5}, "delta"),
        ({"learner": "dp_sgd_poisson", "batch_size": 100}, "batch_size must be < n"),
        ({"learner": "dpsgdf", "eps_f": 1.0}, "eps_f"),
    ],
)
def test_bad_audit_configs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AuditConfig(**kwargs)


def test_required_runs_error_names_the_number():
    # Each bound runs at level / k for up to k = 4 tests (3 rigorous bounds and the noise test;
    # Bonferroni), at the stricter stage's level: the confirmation's 1e-3 / 0.05 = 0.02 by
    # default, so a perfect attack needs the runs of 0.02 / 4, more than at 0.05.
    assert AuditConfig("dp_gd").stage_levels == pytest.approx((0.05, 0.02))
    needed = auditing.required_runs(4.0, 1e-5, significance=0.02 / (len(auditing.BOUND_NAMES) + 1))
    assert needed > auditing.required_runs(4.0, 1e-5)
    with pytest.raises(ValueError, match=f"fewer than {needed} runs per world"):
        AuditConfig("dp_gd", epsilon=4.0, runs=needed - 1)
    AuditConfig("dp_gd", epsilon=4.0, runs=needed)
    # one stage (screen == significance): its level alone
    alone = auditing.required_runs(4.0, 1e-5, significance=0.05 / (len(auditing.BOUND_NAMES) + 1))
    with pytest.raises(ValueError, match=f"fewer than {alone} runs per world"):
        AuditConfig("dp_gd", epsilon=4.0, runs=alone - 1, significance=0.05, screen=0.05)
    AuditConfig("dp_gd", epsilon=4.0, runs=alone, significance=0.05, screen=0.05)


def test_linear_loss_gradient_does_not_depend_on_theta():
    import jax
    import jax.numpy as jnp

    model = auditing.linear_loss_model(3)
    x = jnp.array([[0.0, 0.0, 1.0], [0.5, -0.2, 0.0]])
    y = jnp.array([1.0, 0.0])
    grad = lambda w: jax.grad(lambda p: jnp.sum(model.per_example_loss(p, x, y)))({"w": w})["w"]  # noqa: E731
    g0, g1 = grad(jnp.zeros((3, 1))), grad(jnp.ones((3, 1)) * 7.0)
    np.testing.assert_allclose(g0, g1)
    np.testing.assert_allclose(g0[:, 0], [0.0, 0.0, -1.0])
    np.testing.assert_allclose(model.residual({"w": jnp.zeros((3, 1))}, x, y)[:, 0], -y)


def test_shuffle_proven_bound_is_epochs_gaussian_releases():
    # E Gaussian releases of multiplier z = one of multiplier z/√E (closed form, analytic Gaussian).
    from dpprep.plan import ExecutionPlan

    z, epochs = 3.0, 4
    plan = ExecutionPlan.create(
        "shuffle", 100, batch_size=10, epochs=epochs, shuffle_bound="no_amplification"
    )
    assert plan.epsilon(z, 1e-5) == pytest.approx(
        dp.analytic_gaussian_epsilon(z / math.sqrt(epochs), 1e-5), rel=1e-3
    )


def test_pipeline_canary_moves_every_imputed_row():
    cfg = AuditConfig("impute_dp_gd", epsilon=0.25, runs=2000, n=20)
    import jax

    x_in, x_out, y, sens = auditing.impute_canary_datasets(cfg, jax.random.key(0))
    changed = np.flatnonzero(np.any(x_in != x_out, axis=1))
    p = int(round(cfg.missing_fraction * (cfg.n - 1)))
    assert len(changed) == p + 1  # the p imputed rows and the canary itself
    assert sens.linf == p
    # Each imputed value moves by exactly 2/(n − p) (the canary's ±1 in the mean of n − p observed).
    np.testing.assert_allclose(
        np.abs(x_in[changed[:-1], 0] - x_out[changed[:-1], 0]), 2 / (cfg.n - p), rtol=1e-5
    )


@pytest.mark.slow
def test_honest_dp_gd_bound_is_below_theory_and_a_broken_one_is_caught():
    # The same audit twice: the learner as accounted, and one adding half the noise its accountant
    # assumes.
    honest = audit(AuditConfig("dp_gd", epsilon=1.0, runs=8000, pilot_runs=1000, seed=3))
    broken = audit(
        AuditConfig("dp_gd", epsilon=1.0, runs=8000, pilot_runs=1000, seed=3, noise_factor=0.5)
    )
    # Held to the requested ε through the independent yardstick (its noise floor is 1 % below the
    # reference calibration, so the ε it holds to is a hair above the request).
    assert 1.0 < honest.theoretical == pytest.approx(1.0, rel=2 * auditing.YARDSTICK_TOLERANCE)
    assert honest.bounds.epsilon_gdp <= honest.theoretical
    assert honest.bounds.epsilon_cp <= honest.theoretical
    assert honest.bounds.epsilon_gdp > 0.5  # the white-box attack is strong, not vacuous
    # DP-GD's trade-off is exactly Gaussian: its GDP bound is rigorous and must expose the lie.
    assert broken.claimed == pytest.approx(1.0, abs=1e-3)
    assert broken.bounds.epsilon_gdp > broken.claimed
    assert broken.runs_per_second > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "learner, threat",
    [
        ("dp_sgd_poisson", "white_box"),
        ("dp_sgd_shuffle", "white_box"),
        ("dp_sgd_iteration", "final_model"),
        ("dpsgdf", "white_box"),
        ("corrdp_sgd", "white_box"),
        ("impute_dp_gd", "white_box"),
        ("dp_sgd_poisson", "final_model"),
    ],
)
def test_every_learner_audits_below_its_theory(learner, threat):
    eps = 0.25 if learner == "impute_dp_gd" else 2.0
    shape = {"dp_sgd_iteration": {"n": 10}}.get(learner, {})
    result = audit(
        AuditConfig(learner, threat, epsilon=eps, runs=3000, pilot_runs=500, seed=5, **shape)
    )
    assert 0 <= result.bounds.epsilon_cp <= result.theoretical
    assert 0 <= result.bounds.epsilon_gdp <= result.theoretical
    assert np.isfinite(result.theoretical) and result.runs_per_second > 0
    if learner in ("corrdp_sgd", "impute_dp_gd"):
        # The audited pair is not what the claimed number covers, and the attack shows it.
        assert result.bounds.epsilon_gdp > result.claimed


def _users_dp_gd(cfg, key):
    """A learner written with a plan's pieces in the user's own loop (not `train`): DP-GD on a sum
    query whose canary adds C·e_0; white-box score = the sum of the released updates (in units of
    the noisy gradient sum). The plan is calibrated to the audit's ε; a learner with
    ``noise_factor`` < 1 runs the pieces of a plan with that much less noise while claiming the
    calibrated plan's ε (the lie the audit must catch)."""
    import jax
    import jax.numpy as jnp
    import optax

    from dpprep import dp_step
    from dpprep.plan import DPPlan

    plan = DPPlan.create(
        "full",
        cfg.n,
        steps=cfg.steps,
        l2_clip_norm=1.0,
        target_epsilon=cfg.epsilon,
        delta=cfg.delta,
    )
    run = (
        plan
        if cfg.noise_factor == 1.0
        else DPPlan.create(
            "full",
            cfg.n,
            steps=cfg.steps,
            l2_clip_norm=1.0,
            noise_multiplier=plan.noise_multiplier * cfg.noise_factor,
            delta=cfg.delta,
        )
    )
    loss = lambda params, batch: -jnp.sum(params * batch[0])  # noqa: E731  (gradient −x: θ-free)
    grad_fn = run.clipped_grad(loss)

    def one(run_key, inside):
        x = jnp.zeros((cfg.n, cfg.dim)).at[0, 0].set(jnp.where(inside, 1.0, 0.0))
        tx = run.optimizer(optax.sgd(1.0), key=run_key)

        def step(carry, _):
            params, state = carry
            new, state, _ = dp_step(params, state, x, grad_fn=grad_fn, tx=tx)
            return (new, state), new[0] - params[0]

        _, updates = jax.lax.scan(
            step, (jnp.zeros(cfg.dim), tx.init(jnp.zeros(cfg.dim))), None, cfg.steps
        )
        # the plan divides each noisy sum by n (full batch)
        return jnp.sum(updates) * run.normalize_by

    claimed = plan.epsilon
    return auditing.AuditTarget(
        jax.jit(jax.vmap(one)), claimed, claimed, {"noise_multiplier": plan.noise_multiplier}
    )


@pytest.mark.slow
def test_a_registered_user_learner_is_audited_and_a_broken_one_caught():
    auditing.register("users_dp_gd", _users_dp_gd)
    try:
        assert "users_dp_gd" in auditing.REGISTRY
        honest = audit(AuditConfig("users_dp_gd", epsilon=1.0, runs=8000, pilot_runs=1000, seed=3))
        broken = audit(
            AuditConfig(
                "users_dp_gd", epsilon=1.0, runs=8000, pilot_runs=1000, seed=3, noise_factor=0.5
            )
        )
        # the user's target claims the plan's ε
        assert honest.theoretical == pytest.approx(1.0, abs=1e-3)
        # a strong attack, no false alarm
        assert 0.5 < honest.bounds.epsilon_gdp <= honest.theoretical
        assert honest.bounds.epsilon_cp <= honest.theoretical
        # full-batch Gaussian: the GDP bound is rigorous
        assert broken.bounds.epsilon_gdp > broken.claimed
        with pytest.raises(ValueError, match="audited under white_box only"):
            AuditConfig("users_dp_gd", "final_model")
    finally:
        auditing.REGISTRY.pop("users_dp_gd", None)


def test_register_refuses_bad_learners():
    with pytest.raises(ValueError, match="non-empty string"):
        auditing.register("", lambda cfg, key: None)
    with pytest.raises(ValueError, match="threat_models"):
        auditing.register("x", lambda cfg, key: None, threat_models=("grey_box",))
    with pytest.raises(ValueError, match="or auditing.register your own"):
        AuditConfig("not_registered")


def test_audit_config_numbers_are_whole_and_seeds_valid():
    cfg = AuditConfig("dp_gd", runs=3000.0, pilot_runs=200.0, n=100.0)
    assert (cfg.runs, cfg.pilot_runs, cfg.n) == (3000, 200, 100) and isinstance(cfg.n, int)
    for kwargs, match in [
        ({"runs": 3000.5}, "runs must be an integer"),
        ({"n": 100.5}, "n must be an integer"),
        ({"seed": 2**80}, "seed must be an integer"),
        ({"seed": "abc"}, "seed must be an integer"),
        ({"seed": -1}, "seed must be an integer"),
    ]:
        with pytest.raises(ValueError, match=match):
            AuditConfig("dp_gd", **{"runs": 3000, **kwargs})
    with pytest.raises(TypeError, match="audit takes an AuditConfig"):
        audit({"learner": "dp_gd"})


def _toy_target(output, host=False):
    """A registered learner whose runner returns ``output(keys, inside)``."""
    import jax

    def build(cfg, key):
        runner = output if host else jax.vmap(output)
        return auditing.AuditTarget(runner, 1.0, 1.0, host=host)

    return build


@pytest.mark.parametrize(
    "output, error, match",
    [
        (lambda k, inside: inside, TypeError, "scores must be real numbers.*got dtype bool"),
        (lambda k, inside: inside + 0j, TypeError, "scores must be real numbers.*complex"),
        (
            lambda k, inside: {"score": inside * 1.0, "null": np.zeros((3, 2), bool)},
            TypeError,
            "'null' output must be floats",
        ),
        # seven values per run: more attacks than MAX_ATTACKS (4)
        (lambda k, inside: np.zeros(7), ValueError, r"must return \(400,\) scores"),
    ],
)
def test_a_target_returning_the_wrong_scores_is_named(output, error, match):
    # boolean scores used to fail inside numpy ("numpy boolean subtract ..."), boolean nulls ran
    auditing.register("wrong_scores", _toy_target(output))
    try:
        with pytest.raises(error, match=f"learner 'wrong_scores': .*{match}"):
            audit(AuditConfig("wrong_scores", runs=4000, pilot_runs=200))
    finally:
        auditing.REGISTRY.pop("wrong_scores", None)


@pytest.mark.parametrize("epsilon", [math.nan, math.inf, -1.0])
def test_yardstick_refuses_an_epsilon_that_is_not_finite_and_positive(epsilon):
    # nan read as "the overflow slack leaves nothing of delta"; -1 never returned; inf ate memory
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        auditing.yardstick("full", 100, epsilon=epsilon, delta=1e-5, steps=10)


def test_an_audit_beyond_the_machine_is_refused_with_its_estimate():
    import time

    big = AuditConfig("dp_gd", n=10**7, dim=100)  # used to grow to 17 GB while building
    cost = auditing.audit_cost(big)
    assert cost.data_bytes == 24 * 10**7 * 104 and cost.bytes > 10**13
    with pytest.raises(ValueError, match=r"would need about .* GB .*above the memory available"):
        audit(big)
    with pytest.raises(ValueError, match=r"above max_bytes \(1e-06 GB\)"):
        audit(AuditConfig("dp_gd", runs=4000, pilot_runs=200), max_bytes=1000)
    # time: the first chunk is timed (a host runner's second: its first compiles) and the rest
    # extrapolated (20M runs per world at 1 ms a chunk of 2000 is 20 s), refused after that
    # chunk, not hours later
    auditing.register(
        "slow_chunks",
        _toy_target(lambda keys, inside: time.sleep(1e-3) or np.asarray(inside, float), host=True),
    )
    try:
        many = AuditConfig("slow_chunks", runs=20_000_000, chunk=2000)
        assert auditing.audit_cost(many).chunks == 20_002
        start = time.perf_counter()
        with pytest.raises(ValueError, match=r"would take about .* s \(20,002 chunks.*max_seconds"):
            audit(many, max_seconds=5.0, max_bytes=10**15)
        assert time.perf_counter() - start < 5.0
        for bad in (0.0, -1.0, math.nan):
            with pytest.raises(ValueError, match="max_seconds must be a number > 0"):
                audit(many, max_seconds=bad)
        with pytest.raises(ValueError, match="max_bytes must be an integer >= 1, got nan"):
            audit(many, max_bytes=math.nan)  # was int()'s "cannot convert float NaN"
    finally:
        auditing.REGISTRY.pop("slow_chunks", None)
