"""The bug catalogue (issue 19, :mod:`experiments.audit.bugs`): bugs planted in the library code a
learner runs are caught by a rigorous bound; the honest learners are not flagged; the switches act
where they say and nowhere else (nor after their block)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpprep import auditing, clipping, dpsgdf, noise, sampling
from dpprep.auditing import AuditConfig
from dpprep.corrdp import noise as corr_noise
from experiments.audit import bugs
from experiments.audit.inject import audit_with_bug, inject

pytestmark = pytest.mark.slow  # the bug catalogue's audits, minutes in all

# Test-suite size: 8,000 evaluation runs per world (DP-GD: ~2 s an audit on 2 cores).
RUNS, PILOT = 8000, 1000


def test_unknown_bug_names_the_available_ones():
    for call in (
        lambda: bugs.check_bug("noise_half"),
        lambda: inject("noise_half").__enter__(),
        lambda: audit_with_bug("noise_half", AuditConfig("dp_gd", runs=RUNS)),
    ):
        with pytest.raises(
            ValueError,
            match="unknown bug 'noise_half'; available: noise_0.7x, clip_2c, one_unclipped",
        ):
            call()
    # A bug that does not reach the learner would make an honest audit look like a bug audit.
    with pytest.raises(ValueError, match="does not reach learner 'dp_gd'; it reaches dpsgdf"):
        audit_with_bug("mean_noiseless", AuditConfig("dp_gd", runs=RUNS))


def test_inject_restores_the_library_even_on_error():
    from dpprep import algorithms, selection, step, sweeps

    from dpprep import plan
    from dpprep.accounting import dp

    def patched():  # every attribute the catalogue patches
        return (
            noise.add_noise,
            clipping.clip_factors,
            sampling.poisson_batch,
            sampling.poisson_pad_size,
            algorithms.apply_step,
            dpsgdf.mean_from_parts,
            corr_noise.corrdp_factors,
            plan._calibrate,
            dp.dpsgd_event,
            noise.privatizer,
            clipping._global_norms,
            dpsgdf.mean_sigma,
            clipping._microbatched,
            algorithms.run_in_calls,
            algorithms.update_transform,
            algorithms.fit,
            step._privatizer_state,
            sweeps.sweep_points,
            plan.ExecutionPlan._options,
            clipping.clipped_grad,
            selection.PrivateSelection._selected,
            selection._run_searches,
        )

    originals = patched()
    assert {
        (module, attribute) for bug in bugs.BUGS.values() for module, attribute, _ in bug.patches
    } == {
        ("dpprep.noise", "add_noise"),
        ("dpprep.clipping", "clip_factors"),
        ("dpprep.sampling", "poisson_batch"),
        ("dpprep.sampling", "poisson_pad_size"),
        ("dpprep.algorithms", "apply_step"),
        ("dpprep.dpsgdf", "mean_from_parts"),
        ("dpprep.corrdp.noise", "corrdp_factors"),
        ("dpprep.plan", "_calibrate"),
        ("dpprep.accounting.dp", "dpsgd_event"),
        ("dpprep.noise", "privatizer"),
        ("dpprep.clipping", "_global_norms"),
        ("dpprep.dpsgdf", "mean_sigma"),
        ("dpprep.clipping", "_microbatched"),
        ("dpprep.algorithms", "run_in_calls"),
        ("dpprep.algorithms", "update_transform"),
        ("dpprep.algorithms", "fit"),
        ("dpprep.step", "_privatizer_state"),
        ("dpprep.sweeps", "sweep_points"),
        ("dpprep.plan", "ExecutionPlan._options"),
        ("dpprep.clipping", "clipped_grad"),
        ("dpprep.selection", "PrivateSelection._selected"),
        ("dpprep.selection", "_run_searches"),
    }
    for name in bugs.BUGS:
        with pytest.raises(RuntimeError, match="inside"):
            with inject(name):
                raise RuntimeError("inside")
    assert originals == patched()
    assert algorithms.apply_step is step.apply_step


def test_injection_leaves_no_cached_result_of_library_code_behind():
    """Every functools cache of dpprep's code (compilations, accounts, calibrations: the plan's
    and the selection's) is empty after an injection, so no answer computed under a planted bug
    is served after it, nor an honest one inside it; a cache added to the library later is
    covered by the same sweep. Only the data loaders' keep their entries."""
    import sys

    from dpprep import selection
    from dpprep.plan import ExecutionPlan

    choice = selection.PrivateSelection(
        selection.Repetitions(2.0, 1.0), score_noise=8.0, validation_size=4
    )
    execution = ExecutionPlan.create("full", 36, steps=4, neighboring_relation="replace_one")
    honest = choice.calibrate(execution, 1.0, 1e-5)
    assert selection._calibrate.cache_info().currsize > 0
    with inject("selection_unrepeated"):
        # the repetition left out: less noise, not the honest answer from the cache
        assert choice.calibrate(execution, 1.0, 1e-5) < 0.7 * honest
    caches = [
        (name, key)
        for name, module in list(sys.modules.items())
        if name.startswith("dpprep") and not name.startswith(("dpprep.data.", "dpprep.corrdp.data"))
        for key, value in vars(module).items()
        if hasattr(value, "cache_info") and getattr(value, "__module__", None) == name
    ]
    assert ("dpprep.selection", "_calibrate") in caches and len(caches) >= 10
    filled = [c for c in caches if getattr(sys.modules[c[0]], c[1]).cache_info().currsize]
    assert not filled
    assert choice.calibrate(execution, 1.0, 1e-5) == honest


def test_each_bug_acts_in_the_library_function_it_names():
    # Clipping: a gradient of norm 4 leaves the honest code at norm 1, at 2 with clip_2c, and at 4
    # (last row only) with one_unclipped.
    model = auditing.linear_loss_model(2)
    params = model.init(None)
    x = jnp.array([[4.0, 0.0], [0.0, 4.0]])
    y = jnp.ones(2)

    def column_norms():
        grad = clipping.clipped_grad(model, l2_clip_norm=1.0)(params, (x, y)).grad
        return np.abs(np.asarray(grad["w"][:, 0]))

    np.testing.assert_allclose(column_norms(), [1.0, 1.0], rtol=1e-5)
    with inject("clip_2c"):
        np.testing.assert_allclose(column_norms(), [2.0, 2.0], rtol=1e-5)
    with inject("one_unclipped"):
        np.testing.assert_allclose(column_norms(), [1.0, 4.0], rtol=1e-5)
        # A padded (Poisson) batch: the last *real* row per the mask is unclipped, not the padding
        # slot after it (which stays at weight 0), and an all-padding batch stays all zero.
        norms = jnp.array([4.0, 4.0, 4.0, 4.0])
        np.testing.assert_allclose(
            clipping.clip_factors(norms, 1.0, jnp.array([1.0, 1.0, 0.0, 0.0])),
            [0.25, 1.0, 0.0, 0.0],
        )
        np.testing.assert_allclose(
            clipping.clip_factors(norms, 1.0, jnp.zeros(4)), [0.0, 0.0, 0.0, 0.0]
        )
    # Noise: the privatizer's std on a zero sum is z·C, 0.7·z·C with noise_0.7x (and an
    # extension's absolute std is scaled the same way).
    zeros = jnp.zeros(200_000)
    honest = np.std(np.asarray(noise.add_noise(jax.random.key(0), zeros, 2.0, 1.5)))
    honest_abs = np.std(np.asarray(noise.add_noise(jax.random.key(0), zeros, 0.0, 1.0, None, 3.0)))
    with inject("noise_0.7x"):
        broken = np.std(np.asarray(noise.add_noise(jax.random.key(0), zeros, 2.0, 1.5)))
        broken_abs = np.std(
            np.asarray(noise.add_noise(jax.random.key(0), zeros, 0.0, 1.0, None, 3.0))
        )
    assert honest == pytest.approx(3.0, rel=0.01) and broken == pytest.approx(
        0.7 * honest, rel=1e-5
    )
    assert honest_abs == pytest.approx(3.0, rel=0.01) and broken_abs == pytest.approx(
        0.7 * honest_abs, rel=1e-5
    )
    # Sampling: rate 2q, and a pad that holds the larger batches.
    with inject("poisson_2q"):
        _, _, size, _ = sampling.poisson_batch(jax.random.key(1), 100_000, 0.1, 30_000)
        pad = sampling.poisson_pad_size(100, 0.1, 10)
    assert int(size) == pytest.approx(20_000, abs=600)
    assert pad == sampling.poisson_pad_size(100, 0.2, 10) > sampling.poisson_pad_size(100, 0.1, 10)
    # DPSGD-F's mean and CorrDP's factors.
    xi = np.ones(3, np.float32)
    with inject("mean_noiseless"):
        np.testing.assert_allclose(dpsgdf.mean_from_parts(np.zeros(3), 10, 2.0, 5.0, xi), 0.0)
    np.testing.assert_allclose(dpsgdf.mean_from_parts(np.zeros(3), 10, 2.0, 5.0, xi), 1.0)
    with inject("corrdp_factors_halved"):
        np.testing.assert_allclose(corr_noise.corrdp_factors(3, [0], 0.5), [1.0, 0.25, 0.25])
    # The mean from the rows' sum: n times the mean's signal, the noise scaled for a mean.
    with inject("mean_of_sum"):
        np.testing.assert_allclose(dpsgdf.mean_from_parts(np.full(3, 0.1), 10, 2.0, 5.0, xi), 3.0)
    np.testing.assert_allclose(dpsgdf.mean_from_parts(np.full(3, 0.1), 10, 2.0, 5.0, xi), 1.2)
    # The neighbouring relation dropped: a replace-one plan calibrated as add/remove (at full
    # batch, exactly half the noise).
    from dpprep.plan import DPPlan

    def replace_one_noise() -> float:
        return DPPlan.create(
            "full",
            100,
            steps=10,
            l2_clip_norm=1.0,
            target_epsilon=1.0,
            delta=1e-5,
            neighboring_relation="replace_one",
        ).noise_multiplier

    honest_z = replace_one_noise()
    with inject("relation_dropped"):
        assert replace_one_noise() == pytest.approx(honest_z / 2, rel=1e-3)


def test_a_catalogue_bug_does_not_leak_into_later_compilations():
    # inject clears JAX's and dpprep's compilation caches on entry and exit: the run inside the
    # block is traced afresh with the bug (not served from the honest compilation made before it),
    # and the same config and key after the block is honest again, bit for bit (not served from
    # the broken compilation). Checked for train and for the sweeps' own cached compilations.
    from dpprep import models
    from dpprep.algorithms import Hyper, TrainConfig, train
    from dpprep.plan import DPPlan
    from dpprep.sweeps import sweep_points

    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    model = models.logistic_regression(3)
    params0 = model.init(None)
    plan = DPPlan.create(
        "poisson", 50, batch_size=10, steps=5, l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5
    )
    config = TrainConfig(model, Hyper(0.5), plan)
    key, keys, points = (
        jax.random.key(3),
        jax.random.split(jax.random.key(4), 2),
        {"learning_rate": [0.5, 1.0]},
    )

    def runs():
        params, metrics = train(config, params0, (x, y), key)
        swept = sweep_points(config, params0, (x, y), keys, points)
        assert metrics["epsilon"] == plan.epsilon  # the bug never touches the account
        return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves((params, swept.params))]

    honest = runs()
    with inject("noise_0.7x"):
        injected = runs()
    after = runs()
    for h, i, a in zip(honest, injected, after, strict=True):
        np.testing.assert_allclose(a, h, rtol=0, atol=1e-7)
        # the bug acted inside the block (0.3 of the noise is missing)
        assert np.max(np.abs(i - h)) > 1e-3


def test_audit_target_refuses_a_nan_yardstick_and_audit_explains_an_untraceable_runner():
    def runner(keys, inside):  # plain Python and numpy: runs on arrays, cannot be traced by jax.jit
        return np.where(np.asarray(inside), 1.0, 0.0)

    # A NaN ε would make every "bound > theoretical" comparison False, so every audit would pass.
    for theoretical, claimed in ((math.nan, 1.0), (1.0, math.nan)):
        with pytest.raises(ValueError, match="NaN yardstick would make every bound compare False"):
            auditing.AuditTarget(runner, theoretical, claimed)
    with pytest.raises(
        TypeError, match=r"runner must be a callable runner\(keys, inside\) -> scores"
    ):
        auditing.AuditTarget(None, 1.0, 1.0)

    auditing.register("untraceable", lambda cfg, key: auditing.AuditTarget(runner, 1.0, 1.0))
    try:
        with pytest.raises(
            ValueError,
            match=r"learner 'untraceable': AuditTarget.runner\(keys, inside\) must be "
            r"jittable and vmapped over runs .* tracing it failed",
        ):
            auditing.audit(AuditConfig("untraceable", runs=RUNS, pilot_runs=PILOT))
    finally:
        auditing.REGISTRY.pop("untraceable", None)


def test_dpsgdf_mean_from_parts_is_the_same_traced_and_on_the_host():
    unit_mean, xi = np.array([0.1, -0.2, 0.3]), np.array([0.5, 1.0, -2.0], np.float32)
    host = dpsgdf.mean_from_parts(unit_mean, 50, 2.0, 7.0, xi)
    traced = jax.jit(lambda m, e: dpsgdf.mean_from_parts(m, 50, 2.0, 7.0, e))(
        jnp.asarray(unit_mean), jnp.asarray(xi)
    )
    assert isinstance(host, np.ndarray) and host.dtype == np.float32
    np.testing.assert_allclose(np.asarray(traced), host, rtol=1e-6)


def _scores(cfg, keys, inside):
    out = auditing.REGISTRY[cfg.learner].build(cfg, jax.random.key(0)).runner(keys, inside)
    return np.asarray(out["score"] if isinstance(out, dict) else out)


def test_the_canary_exercises_clipping():
    # Honest learner: a canary of norm 4C is clipped to C, so its scores equal those of a canary of
    # norm C run for run. With clipping to 2C they do not (at norm C they would: the old blind
    # spot).
    keys = jax.random.split(jax.random.key(7), 64)
    inside = jnp.arange(64) < 32
    big, unit = AuditConfig("dp_gd", runs=RUNS), AuditConfig("dp_gd", runs=RUNS, canary_norm=1.0)
    np.testing.assert_allclose(
        _scores(big, keys, inside), _scores(unit, keys, inside), rtol=1e-4, atol=1e-4
    )
    with inject("clip_2c"):
        broken_big, broken_unit = _scores(big, keys, inside), _scores(unit, keys, inside)
    np.testing.assert_allclose(broken_unit, _scores(unit, keys, inside), rtol=1e-4, atol=1e-4)
    # in-runs move by T·C/(zC) ≈ 0.85
    assert np.all(broken_big[:32] > _scores(big, keys, inside)[:32] + 0.5)
    with pytest.raises(ValueError, match="canary_norm must be a finite number >= 1"):
        AuditConfig("dp_gd", canary_norm=0.5)


def test_corrdp_reference_is_independent_of_the_factors_under_test():
    from dpprep.corrdp import sgd as corr_sgd

    cfg = AuditConfig("corrdp_sgd", runs=RUNS)
    honest = auditing.REGISTRY["corrdp_sgd"].build(cfg, jax.random.key(0))
    # Eq. 4 by hand agrees with the library's own path when the library is honest (the audit's
    # columns: dim background + one null column sensitive; the canary's and one null insensitive)
    # ...
    factors = corr_noise.corrdp_factors(cfg.dim + 3, [*range(cfg.dim), cfg.dim + 1], cfg.tv)
    c = corr_noise.theory_constant(1.0, cfg.steps, cfg.n)
    sigma_lib = math.sqrt(corr_noise.base_variance(cfg.epsilon, cfg.delta, c) * factors[cfg.dim])
    assert honest.details["sigma_canary_coordinate"] == pytest.approx(sigma_lib, rel=1e-9)
    assert honest.theoretical == pytest.approx(
        corr_sgd.standard_dp_epsilon(
            sigma_lib, n=cfg.n, steps=cfg.steps, lipschitz=1.0, delta=cfg.delta
        ),
        rel=2e-3,
    )
    # ... and does not move with a bug in it.
    with inject("corrdp_factors_halved"):
        broken = auditing.REGISTRY["corrdp_sgd"].build(cfg, jax.random.key(0))
    assert broken.theoretical == honest.theoretical
    assert broken.details["factor_insensitive_library"] == pytest.approx(
        0.5 * honest.details["factor_insensitive"]
    )


@pytest.mark.filterwarnings("ignore:shuffled DP-SGD")
def test_rigorous_bounds_are_stated_per_learner():
    # GDP: full-batch Gaussian learners only; the trade-off test: learners with an accountant curve.
    expected = {
        "dp_gd": {"gdp", "clopper_pearson", "tradeoff"},
        "dp_sgd_poisson": {"clopper_pearson", "tradeoff"},
        "dp_sgd_shuffle": {"clopper_pearson", "tradeoff"},
        "dpsgdf": {"clopper_pearson", "tradeoff"},
        "corrdp_sgd": {"gdp", "clopper_pearson"},
        "impute_dp_gd": {"gdp", "clopper_pearson"},
    }
    for learner, rigorous in expected.items():
        target = auditing.REGISTRY[learner].build(
            AuditConfig(learner, runs=RUNS), jax.random.key(0)
        )
        assert set(target.rigorous) == rigorous
        assert (target.profile is not None) == ("tradeoff" in rigorous)


def test_tradeoff_test_is_valid_for_the_true_curve_and_refutes_a_false_one():
    # Exact μ-GDP scores against μ-GDP's own profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2): no
    # excess in 30 repetitions (valid at 95 %; Bonferroni makes it conservative); against the
    # profile of μ/2 (a claim of twice the noise) it is refuted every time.
    from scipy import stats

    def gdp_profile(mu):
        return lambda e: (
            stats.norm.cdf(-e / mu + mu / 2) - np.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
        )

    rng = np.random.default_rng(4)
    mu = 1.0
    true_excess, false_excess = [], []
    for _ in range(30):
        inside, outside = rng.normal(mu, 1, 5000), rng.normal(0, 1, 5000)
        thresholds = np.quantile(rng.normal(mu / 2, 1, 2000), np.linspace(0, 1, 34)[1:-1])
        d_in, d_out = (
            auditing.discretise(inside, thresholds),
            auditing.discretise(outside, thresholds),
        )
        true_excess.append(
            auditing.tradeoff_excess(d_in, d_out, gdp_profile(mu), significance=0.05)[0]
        )
        false_excess.append(
            auditing.tradeoff_excess(d_in, d_out, gdp_profile(mu / 2), significance=0.05)[0]
        )
    assert max(true_excess) <= 0 < min(false_excess)


def test_privacy_profile_matches_the_accountant_at_its_delta():
    from dpprep.plan import ExecutionPlan

    plan = ExecutionPlan.create("poisson", 100, batch_size=20, epochs=5)
    z = plan.calibrate(1.0, 1e-5)
    profile = auditing.privacy_profile(plan.dp_event(z), overflow_prob=plan.overflow_probability())
    # δ(ε) at the calibrated ε is the δ the plan was calibrated to (PLD, same event), and it falls
    # in ε.
    assert profile(np.array([plan.epsilon(z, 1e-5)]))[0] == pytest.approx(1e-5, rel=0.05)
    values = profile(np.array([0.1, 0.5, 1.0, 2.0]))
    assert np.all(np.diff(values) < 0)


def test_a_tradeoff_claim_without_a_curve_is_refused():
    def build(cfg, key):
        import dataclasses

        target = auditing.REGISTRY["dp_gd"].build(dataclasses.replace(cfg, learner="dp_gd"), key)
        return auditing.AuditTarget(
            target.runner,
            target.theoretical,
            target.claimed,
            rigorous=("clopper_pearson", "tradeoff"),
        )

    auditing.register("no_curve", build)
    try:
        with pytest.raises(
            ValueError,
            match=(
                "needs AuditTarget.profile .* with one: "
                "dp_gd, dp_sgd_poisson, dp_sgd_shuffle, dpsgdf"
            ),
        ):
            auditing.audit(AuditConfig("no_curve", runs=RUNS))
    finally:
        auditing.REGISTRY.pop("no_curve", None)


@pytest.mark.parametrize(
    "learner, bug",
    [
        ("dp_gd", None),
        ("dp_gd", "noise_0.7x"),
        ("dp_gd", "clip_2c"),
        ("corrdp_sgd", None),
        ("corrdp_sgd", "corrdp_factors_halved"),
    ],
)
def test_catalogue_bugs_are_caught_by_a_rigorous_bound_and_honest_runs_are_not(learner, bug):
    # Full-batch Gaussian learners: the GDP bound is rigorous (AuditTarget.rigorous) and the
    # verdict uses only rigorous bounds. Same seed for honest and broken runs. 1.5x the module's
    # runs: each test now runs at 5 %/4 (the noise test joined the verdict), not 5 %/3.
    result = audit_with_bug(
        bug, AuditConfig(learner, epsilon=1.0, runs=3 * RUNS // 2, pilot_runs=PILOT, seed=3)
    )
    assert "gdp" in result.rigorous
    if bug is None:
        assert not result.violation
        assert (
            result.bounds.epsilon_gdp <= result.theoretical
            and result.bounds.epsilon_cp <= result.theoretical
        )
        # a strong attack, so a miss would mean something
        assert result.bounds.epsilon_gdp > 0.6 * result.theoretical
    else:
        assert result.violation and result.bounds.epsilon_gdp > result.theoretical
    assert result.row()["violation"] == result.violation


@pytest.mark.parametrize("bug", [None, "clip_2c", "poisson_2q"])
def test_poisson_bugs_are_caught_by_the_tradeoff_test(bug):
    # Subsampled: Clopper–Pearson reaches ~0.9 of ε here and cannot catch these; the trade-off
    # test against the accountant's whole curve does, and does not flag the honest learner.
    result = audit_with_bug(
        bug,
        AuditConfig(
            "dp_sgd_poisson",
            epsilon=1.0,
            runs=RUNS,
            pilot_runs=PILOT,
            seed=3,
            epochs=5,
            batch_size=20,
        ),
    )
    assert result.rigorous == ("clopper_pearson", "tradeoff")
    assert result.bounds.epsilon_cp <= result.theoretical  # not caught by C-P at this size ...
    if bug is None:
        assert not result.violation and result.bounds.delta_excess <= 0
    else:
        # ... but refuted by the trade-off test
        assert result.violation and result.bounds.delta_excess > 0


def test_dpsgdf_noiseless_mean_is_caught_through_the_library_mean():
    # Subsampled learner: only Clopper–Pearson is rigorous, and it catches the noiseless mean
    # (true ε = ∞) because the audit releases μ̂ through dpsgdf.mean_from_parts.
    shape = {"epochs": 2, "batch_size": 20}
    honest = audit_with_bug(
        None, AuditConfig("dpsgdf", epsilon=1.0, runs=2000, pilot_runs=500, seed=3, **shape)
    )
    broken = audit_with_bug(
        "mean_noiseless",
        AuditConfig("dpsgdf", epsilon=1.0, runs=2000, pilot_runs=500, seed=3, **shape),
    )
    assert honest.rigorous == ("clopper_pearson", "tradeoff") and not honest.violation
    assert broken.violation and broken.bounds.epsilon_cp > 3 * broken.theoretical


def test_the_verdict_splits_its_significance_over_its_rigorous_tests(monkeypatch):
    # violation is the union of k rigorous tests: each must run at 0.05 / k (Bonferroni) so that an
    # honest learner is flagged with probability <= 0.05, not up to k·0.05.
    seen: list[float] = []
    lower_bounds, tradeoff = auditing.lower_bounds, auditing.tradeoff_excess
    monkeypatch.setattr(
        auditing,
        "lower_bounds",
        lambda *a, **kw: seen.append(kw["significance"]) or lower_bounds(*a, **kw),
    )
    monkeypatch.setattr(
        auditing,
        "tradeoff_excess",
        lambda *a, **kw: seen.append(kw["significance"]) or tradeoff(*a, **kw),
    )
    result = auditing.audit(AuditConfig("dp_gd", runs=1000, pilot_runs=200))
    # Three rigorous bounds and the noise test: k = 4, at the first stage's 5 % (and the point
    # estimates beside them at ~50 %); DP-GD has one attack, so no further split.
    assert not result.suspected and result.confirmation is None
    assert result.rigorous == ("clopper_pearson", "gdp", "tradeoff") and seen == [
        0.05 / 4,
        0.05 / 4,
        auditing.ESTIMATE_SIGNIFICANCE,
    ]
    assert result.noise is not None and result.noise.significance == 0.05 / 4
    row = result.row()
    assert row["significance_per_test"] == 0.05 / 4 and row["screen"] == 0.05
    assert row["significance"] == 1e-3  # the family-wise error rate of a reported violation
    assert auditing.test_significance(0.05, ("clopper_pearson", "gdp")) == 0.025


def test_false_alarm_rate_of_the_verdict_on_exact_gaussian_scores():
    # The test-sized version of issue 19's "≥ 50 honest audits, no rigorous bound above its claim":
    # DP-GD's white-box scores are exactly N(μ, 1) in and N(0, 1) out (μ = √T/z), so 300 honest
    # audits are drawn here without training, at three ε, through the audit's own statistics
    # (pilot thresholds, every bound at 0.05 / 3) against the true ε and the true μ-GDP profile.
    # The verdict's false-alarm rate is at most 5 %: at exactly 5 % the chance of <= 5 alarms in
    # 300 is 0.2 %, at the 15 % of an unsplit union 2e-15, so this fails for a broken split. A
    # false alarm can happen (seed 19 gives 1 in 60 at μ = 2: GDP and trade-off on the same
    # sample) — the statistics promise a rate, not zero.
    from scipy import stats

    def gdp_profile(mu):
        return lambda e: (
            stats.norm.cdf(-e / mu + mu / 2) - np.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
        )

    rng = np.random.default_rng(0)
    alarms, total = 0, 0
    per_test = auditing.test_significance(0.05, ("clopper_pearson", "gdp", "tradeoff"))
    for mu in (0.5, 1.0, 2.0):
        claimed, profile = auditing.gdp_epsilon(mu, 1e-5), gdp_profile(mu)
        for _ in range(100):
            pilot = np.concatenate([rng.normal(mu, 1, 1000), rng.normal(0, 1, 1000)])
            thresholds = np.unique(np.quantile(pilot, np.linspace(0, 1, 34)[1:-1]))
            d_in = auditing.discretise(rng.normal(mu, 1, RUNS), thresholds)
            d_out = auditing.discretise(rng.normal(0, 1, RUNS), thresholds)
            bounds = auditing.lower_bounds(d_in, d_out, delta=1e-5, significance=per_test)
            excess, _ = auditing.tradeoff_excess(d_in, d_out, profile, significance=per_test)
            alarms += int(max(bounds.epsilon_gdp, bounds.epsilon_cp) > claimed or excess > 0)
            total += 1
            # the attack is strong: the verdicts were not vacuous
            assert bounds.epsilon_gdp > 0.5 * claimed
    assert total == 300 and alarms <= 5
    assert alarms == 0  # measured: none of the 300 at seed 0


def test_one_unclipped_reaches_the_poisson_canary():
    # The Poisson batch lists its sampled indices in order and the canary is the last record, so
    # the last *real* row is the canary whenever it is sampled (the padding slot after it is not).
    result = audit_with_bug(
        "one_unclipped",
        AuditConfig(
            "dp_sgd_poisson",
            epsilon=1.0,
            runs=RUNS,
            pilot_runs=PILOT,
            seed=3,
            epochs=5,
            batch_size=20,
        ),
    )
    assert result.violation and result.bounds.delta_excess > 0


def test_shuffled_learner_is_tested_against_its_proven_profile():
    # The shuffled learner is held to the no-amplification bound (``epochs`` Gaussian releases): its
    # claimed curve is that event's PLD profile, so δ(theoretical ε) is the audit's δ — not the
    # as-if-Poisson curve, at which δ(theoretical ε) would be far below it.
    cfg = AuditConfig("dp_sgd_shuffle", epsilon=1.0, runs=RUNS, epochs=5, batch_size=20)
    target = auditing.REGISTRY["dp_sgd_shuffle"].build(cfg, jax.random.key(0))
    assert "tradeoff" in target.rigorous and target.claimed < target.theoretical
    assert target.profile(np.array([target.theoretical]))[0] == pytest.approx(1e-5, rel=0.05)
    # the as-if-Poisson ε is not what is tested
    assert target.profile(np.array([target.claimed]))[0] > 1e-3
