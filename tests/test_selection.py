"""Private selection (dpprep.selection): its ε against Papernot & Steinke's closed forms and
dp-accounting, the distribution of K, a one-candidate selection against a plain run, and bad input
refused before any training."""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import optimize, special, stats

from dpprep import models, selection, streams, sweeps
from dpprep.accounting import dp
from dpprep.algorithms import Hyper, TrainConfig, static_config, train
from dpprep.plan import DPPlan, ExecutionPlan
from dpprep.selection import EndToEnd, PrivateSelection, Repetitions

DELTA = 1e-5
ORDERS = np.asarray(rdp_privacy_accountant.DEFAULT_RDP_ORDERS, dtype=float)


# ------------------------------------------------------------------------------------------------
# Papernot & Steinke (ICLR 2022), written out from the paper (independently of dpprep.selection)


def tnb_mean(gamma, eta):
    """E[K] under D_{η,γ} (Definition 1)."""
    if eta == 0:
        return (1 / gamma - 1) / math.log(1 / gamma)
    # 1 − γ^η, accurate near γ = 1
    return eta * (1 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def gamma_of(mean, eta):
    if eta == 1:
        return 1 / mean
    return optimize.brentq(
        lambda g: tnb_mean(g, eta) - mean,
        1e-300,
        1 - 1e-12,
        xtol=1e-300,
        rtol=4 * np.finfo(float).eps,
    )


def pmf(k, mean, eta):
    """P[K = k] (Definition 1): (1−γ)^k/(γ^{−η} − 1) · Γ(k+η)/(Γ(η) k!) for η > 0,
    (1−γ)^k/(k log(1/γ)) for η = 0; the Poisson for η = ∞."""
    k = np.asarray(k, dtype=float)
    if math.isinf(eta):
        return np.exp(k * math.log(mean) - mean - special.gammaln(k + 1))
    g = gamma_of(mean, eta)
    if eta == 0:
        return (1 - g) ** k / (k * math.log(1 / g))
    return np.exp(
        special.gammaln(k + eta)
        - special.gammaln(eta)
        - special.gammaln(k + 1)
        + k * math.log1p(-g)
    ) / (g**-eta - 1)


def theorem2(rdp, mean, eta):
    """Theorem 2: (λ, ε(λ) + (1+η)(1−1/λ̂)ε(λ̂) + (1+η)log(1/γ)/λ̂ + log E[K]/(λ−1))-RDP, the
    best λ̂ of the orders; then RDP's monotonicity in the order."""
    g = gamma_of(mean, eta)
    c = (1 + eta) * np.min((1 - 1 / ORDERS) * rdp + math.log(1 / g) / ORDERS)
    out = rdp + c + math.log(mean) / (ORDERS - 1)
    return np.minimum.accumulate(out[::-1])[::-1]


def prop12_delta(rdp, eps):
    """δ at ε of an RDP curve (Canonne, Kamath & Steinke 2020, Prop. 12; and the KL bound)."""
    kl = 0.5 * np.log1p(-np.exp(-rdp))
    prop = np.where(
        ORDERS > 1.01, (ORDERS - 1) * (rdp - eps + np.log1p(-1 / ORDERS)) - np.log(ORDERS), np.inf
    )
    return float(np.exp(np.min(np.minimum(kl, prop))))


def split_epsilon(runs, counts, in_validation, delta):
    """The smallest ε (bisection, 1e-13) with the two parts' δ averaged over a uniform split,
    (1 − p)·δ_runs(ε) + p·δ_counts(ε) <= δ (joint convexity of the hockey-stick divergence)."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        mixed = (1 - in_validation) * prop12_delta(runs, mid) + in_validation * prop12_delta(
            counts, mid
        )
        lo, hi = (lo, mid) if mixed <= delta else (mid, hi)
        if hi - lo < 1e-13:
            break
    return hi


def theorem6(rdp, mean, delta_of):
    """Theorem 6 (Poisson K): (λ, ε(λ) + μ·δ̂ + log μ/(λ−1))-RDP when Q is (ε̂, δ̂)-DP with
    e^ε̂ = 1 + 1/(λ−1); ``delta_of(ε̂)`` is any valid δ̂."""
    return np.array(
        [
            rdp[i] + mean * delta_of(math.log1p(1 / (a - 1))) + math.log(mean) / (a - 1)
            for i, a in enumerate(ORDERS)
        ]
    )


def to_epsilon(rdp, delta):
    """(ε, δ) of an RDP curve (Canonne et al. Prop. 12)."""
    eps = np.where(
        ORDERS > 1.01, rdp + np.log1p(-1 / ORDERS) - np.log(delta * ORDERS) / (ORDERS - 1), np.inf
    )
    return max(0.0, float(np.min(eps)))


def candidate_rdp(steps, z, score_noise):
    """A candidate of ``steps`` full-batch Gaussian steps at z and one count at std σ: RDP ρλ."""
    return ORDERS * (steps / (2 * z**2) + 1 / (2 * score_noise**2))


def gaussian_delta(rho):
    """The exact δ(ε) of the Gaussian mechanism with μ = sqrt(2ρ) (Balle & Wang 2018)."""
    mu = math.sqrt(2 * rho)
    return lambda eps: (
        stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    )


def _selection(mean, eta, score_noise, validation_size=100, fixed_events=()):
    return PrivateSelection(Repetitions(mean, eta), score_noise, validation_size, fixed_events)


# ------------------------------------------------------------------------------------------------
# ε: pinned against the closed forms and dp-accounting

# (steps, z, score noise, mean K, η) -> ε at δ = 1e-5 from theorem2/theorem6 above (float64).
PINNED = [
    (50, 30.0, 20.0, 10.0, 1.0, 2.0747980173840688),  # geometric (Liu & Talwar's K)
    (50, 30.0, 20.0, 10.0, 0.0, 1.7176339109227026),  # logarithmic
    (100, 20.0, 10.0, 5.0, 0.5, 3.7266169161506246),  # truncated negative binomial
    (200, 40.0, 25.0, 3.0, 2.0, 2.724359678847904),
    (50, 30.0, 20.0, 10.0, math.inf, 2.263384437912892),  # Poisson (Theorem 6)
    (100, 20.0, 10.0, 5.0, math.inf, 3.669999301940888),
]


@pytest.mark.parametrize("steps, z, sigma, mean, eta, pinned", PINNED)
def test_epsilon_matches_papernot_steinke_and_dp_accounting(steps, z, sigma, mean, eta, pinned):
    rdp = candidate_rdp(steps, z, sigma)
    closed = to_epsilon(
        (
            theorem2(rdp, mean, eta)
            if math.isfinite(eta)
            else theorem6(rdp, mean, lambda e: prop12_delta(rdp, e))
        ),
        DELTA,
    )
    assert closed == pytest.approx(pinned, rel=1e-12)
    plan = ExecutionPlan.create("full", 1100, steps=steps)
    ours = _selection(mean, eta, sigma).epsilon(plan, z, DELTA)
    # dp-accounting's γ is the end of a bisection at relative 1e-9: ε within 1e-8.
    assert ours == pytest.approx(closed, rel=1e-8)
    candidate = dp_event.ComposedDpEvent(
        [
            dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z), steps),
            dp_event.GaussianDpEvent(sigma),
        ]
    )
    accountant = rdp_privacy_accountant.RdpAccountant(ORDERS, NeighboringRelation.ADD_OR_REMOVE_ONE)
    theirs = accountant.compose(dp_event.RepeatAndSelectDpEvent(candidate, mean, eta)).get_epsilon(
        DELTA
    )
    assert ours == pytest.approx(theirs, rel=1e-12)
    # the exact Gaussian δ̂ is a valid (smaller) δ̂: a tighter instance of Theorem 6
    if math.isinf(eta):
        exact = to_epsilon(theorem6(rdp, mean, gaussian_delta(rdp[0] / ORDERS[0])), DELTA)
        assert exact < ours
    # More than one candidate costs, less than ⌈E[K]⌉ candidates composed (at mean 3, η = 2: 2.724 <
    # 2.733).
    assert to_epsilon(rdp, DELTA) < ours < to_epsilon(rdp * math.ceil(mean), DELTA)


def test_poisson_batches_charge_the_overflow_of_every_candidate():
    plan = ExecutionPlan.create("poisson", 1000, batch_size=100, epochs=2, max_overflow_prob=1e-8)
    sel = _selection(8.0, 1.0, 10.0)
    eps = sel.epsilon(plan, 2.0, DELTA)
    # A fixed point: ε is the ideal ε at δ minus the slack (1 + e^ε)·E[K]·p.
    slack = (1 + math.exp(eps)) * 8.0 * plan.overflow_probability()
    ideal = dp.composed_epsilon(
        [sel.selection_event(plan, 2.0)],
        DELTA - slack,
        options=dp.AccountingOptions(accountant="rdp"),
    )
    assert slack > 1e-8 and eps == pytest.approx(ideal, rel=1e-9)
    assert eps > dp.composed_epsilon(
        [sel.selection_event(plan, 2.0)], DELTA, options=dp.AccountingOptions(accountant="rdp")
    )


def test_replace_one_doubles_the_training_sensitivity_not_the_counts():
    ar = ExecutionPlan.create("full", 600, steps=40)
    ro = ExecutionPlan.create("full", 600, steps=40, neighboring_relation="replace_one")
    sel = _selection(10.0, 1.0, 15.0)
    # Replace-one moves each clipped sum by 2C (z -> z/2) but a count still by 1; and the replaced
    # record sits in the training part (600 of 700 rows) or in the validation part (100), so the
    # procedure's δ is the two selections' δ (training runs alone; counts alone) averaged over the
    # split select draws: at most the larger of the two, not their composition.
    runs_rdp = theorem2(ORDERS * 40 / (2 * 15.0**2), 10.0, 1.0)
    counts_rdp = theorem2(ORDERS / (2 * 15.0**2), 10.0, 1.0)
    training, counts = to_epsilon(runs_rdp, DELTA), to_epsilon(counts_rdp, DELTA)
    averaged = split_epsilon(runs_rdp, counts_rdp, 100 / 700, DELTA)
    assert sel.epsilon(ro, 30.0, DELTA) == pytest.approx(averaged, rel=1e-8)
    assert averaged < max(training, counts)
    # the caller's split (end_to_end_of_grid, search_many) may be fixed: the larger part
    assert sel.end_to_end_of_grid(ro, [30.0], DELTA).epsilon == pytest.approx(
        max(training, counts), rel=1e-8
    )
    both = to_epsilon(theorem2(candidate_rdp(40, 15.0, 15.0), 10.0, 1.0), DELTA)
    assert sel.epsilon(ar, 15.0, DELTA) == pytest.approx(both, rel=1e-8)
    assert sel.epsilon(ro, 30.0, DELTA) < sel.epsilon(ar, 15.0, DELTA)
    # Where the counts are the costlier part (noisy counts at std 2: ε > 1.5), the average gains
    # most: the record is in the validation part with probability 1/7 only.
    loud = _selection(10.0, 1.0, 2.0)
    counts_rdp = theorem2(ORDERS / (2 * 2.0**2), 10.0, 1.0)
    counts = to_epsilon(counts_rdp, DELTA)
    runs_rdp = theorem2(ORDERS * 40 / (2 * 150.0**2), 10.0, 1.0)
    averaged = split_epsilon(runs_rdp, counts_rdp, 100 / 700, DELTA)
    assert loud.epsilon(ro, 300.0, DELTA) == pytest.approx(averaged, rel=1e-8) and counts > 1.5
    assert averaged < 0.97 * counts
    account = loud.end_to_end(ro, 300.0, DELTA)
    note = account.part("selection").note
    assert f"(epsilon = {counts:.4g} alone), weighted 0.8571 and 0.1429" in note
    assert f"epsilon = {averaged:.4g} is charged" in note
    # Batches without replacement: dp-accounting's replace-one RDP of each part (the count's
    # multiplier as given: 2·15 read at sensitivity 2), selected; the larger of the two for a
    # caller's split, their δ averaged for select's.
    wor = ExecutionPlan.create("without_replacement", 600, batch_size=60, steps=40)
    runs = dp_event.SelfComposedDpEvent(
        dp_event.SampledWithoutReplacementDpEvent(600, 60, dp_event.GaussianDpEvent(1.5)), 40
    )
    theirs, curves = [], []
    for candidate in (runs, dp_event.GaussianDpEvent(15.0)):
        accountant = rdp_privacy_accountant.RdpAccountant(ORDERS, NeighboringRelation.REPLACE_ONE)
        accountant.compose(dp_event.RepeatAndSelectDpEvent(candidate, 10.0, 1.0))
        theirs.append(accountant.get_epsilon(DELTA))
        curves.append(accountant._rdp)  # noqa: SLF001
    assert sel.end_to_end_of_grid(wor, [3.0], DELTA).epsilon == pytest.approx(
        max(theirs), rel=1e-12
    )
    assert sel.epsilon(wor, 3.0, DELTA) == pytest.approx(
        split_epsilon(*curves, 100 / 700, DELTA), rel=1e-8
    )
    for sampler in ("poisson", "shuffle"):
        plan = ExecutionPlan.create(
            sampler, 600, batch_size=60, epochs=4, neighboring_relation="replace_one"
        )
        with pytest.raises(ValueError, match="replace-one"):
            sel.epsilon(plan, 3.0, DELTA)


@pytest.mark.parametrize("neighboring_relation", ["add_remove", "replace_one"])
def test_a_grid_of_noise_levels_is_charged_as_the_mixture_of_its_points(neighboring_relation):
    """Each candidate draws its point (and so its multiplier) uniformly from the grid's entries and
    releases it: its RDP is the log-mean-exp of the points' curves, written out here from the
    closed forms, then Theorem 2; below the least noisy point's, equal to it for a constant grid."""
    plan = ExecutionPlan.create("full", 1100, steps=50, neighboring_relation=neighboring_relation)
    sel = _selection(4.0, 1.0, 20.0, fixed_events=(dp.gaussian_event(30.0),))
    levels = [40.0, 25.0, 60.0, 25.0]  # a repeated entry is drawn twice as often
    # a sum moves by 2 units: (2/z)²/2 per step
    factor = 4.0 if neighboring_relation == "replace_one" else 1.0
    fixed = ORDERS * factor / (2 * 30.0**2)

    def selected(curves):
        mixture = np.log(np.mean(np.exp((ORDERS - 1) * np.asarray(curves)), axis=0)) / (ORDERS - 1)
        return to_epsilon(fixed + theorem2(mixture, 4.0, 1.0), DELTA)

    runs = [ORDERS * 50 * factor / (2 * z**2) for z in levels]
    count = ORDERS / (2 * 20.0**2)
    if neighboring_relation == "replace_one":  # the caller's split: the larger of the two parts
        hand = max(selected(runs), selected([count]))
    else:
        hand = selected([r + count for r in runs])
    grid = sel.end_to_end_of_grid(plan, levels, DELTA)
    assert grid.epsilon == pytest.approx(hand, rel=1e-8)
    assert grid.epsilon < sel.end_to_end(plan, 25.0, DELTA).epsilon
    constant = sel.end_to_end_of_grid(plan, [25.0] * 3, DELTA).epsilon
    if neighboring_relation == "replace_one":  # select's drawn split: the parts' δ averaged
        assert sel.end_to_end(plan, 25.0, DELTA).epsilon < constant
    else:
        assert constant == sel.end_to_end(plan, 25.0, DELTA).epsilon
    assert "mixture" in grid.part("selection").note
    # the order of the entries does not matter, their multiplicity does
    assert sel.end_to_end_of_grid(plan, levels[::-1], DELTA).epsilon == pytest.approx(
        grid.epsilon, rel=1e-12
    )
    assert sel.end_to_end_of_grid(plan, [40.0, 25.0, 60.0], DELTA).epsilon < grid.epsilon
    for bad in ([], [25.0, 0.0], [25.0, math.inf], [[25.0], [math.nan]]):
        with pytest.raises(ValueError, match="noise_multipliers"):
            sel.end_to_end_of_grid(plan, bad, DELTA)


def test_calibration_is_tight_and_refuses_unreachable_targets():
    plan = ExecutionPlan.create("full", 1100, steps=50)
    sel = _selection(10.0, 1.0, 20.0, fixed_events=(dp.gaussian_event(8.0),))
    z = sel.calibrate(plan, 2.5, DELTA)
    assert sel.epsilon(plan, z, DELTA) <= 2.5 < sel.epsilon(plan, z - 2 * dp.CALIBRATION_TOL, DELTA)
    floor = sel.floor(plan, DELTA)
    assert floor < sel.epsilon(plan, 1e6, DELTA) < floor + 1e-3  # z → ∞ tends to the floor
    with pytest.raises(ValueError, match="target_epsilon"):
        sel.calibrate(plan, floor, DELTA)


def test_replace_one_calibration_reaches_below_the_larger_part():
    """Under replace-one (select's drawn split) z → ∞ tends to the floor, the δ-average of the
    shared statistics' part (training runs of no noise) and the counts' part: below the counts'
    ε alone, which the larger-part rule could not go under. Calibration reaches a target between
    the two, with the smallest multiplier, and refuses the floor."""
    plan = ExecutionPlan.create("full", 600, steps=40, neighboring_relation="replace_one")
    fixed = (dp.gaussian_event(30.0),)
    loud = _selection(10.0, 1.0, 2.0, fixed_events=fixed)
    floor = loud.floor(plan, DELTA)
    factor = 4.0  # replace-one: a sum moves by 2 units, the multiplier reads (2/z)²/2
    fixed_rdp = ORDERS * factor / (2 * 30.0**2)
    counts_rdp = fixed_rdp + theorem2(ORDERS / (2 * 2.0**2), 10.0, 1.0)
    runs_rdp = fixed_rdp + theorem2(np.zeros_like(ORDERS), 10.0, 1.0)
    assert floor == pytest.approx(split_epsilon(runs_rdp, counts_rdp, 100 / 700, DELTA), rel=1e-8)
    larger_part = to_epsilon(counts_rdp, DELTA)
    assert floor <= loud.epsilon(plan, 1e6, DELTA) < floor + 1e-3 < larger_part - 0.05
    target = 0.5 * (floor + larger_part)
    z = loud.calibrate(plan, target, DELTA)
    assert (
        loud.epsilon(plan, z, DELTA)
        <= target
        < loud.epsilon(plan, z - 2 * dp.CALIBRATION_TOL, DELTA)
    )
    with pytest.raises(ValueError, match="target_epsilon"):
        loud.calibrate(plan, floor, DELTA)


def test_end_to_end_record_names_every_part():
    plan = ExecutionPlan.create("full", 1100, steps=50)
    rdp = dp.AccountingOptions(accountant="rdp")
    sel = _selection(10.0, 1.0, 20.0, fixed_events=(dp.gaussian_event(8.0),))
    record = sel.end_to_end(plan, 30.0, DELTA)
    assert isinstance(record, EndToEnd) and dataclasses.is_dataclass(record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.epsilon = 0.0  # type: ignore[misc]
    assert record.charged == ("private statistics", "selection", "training")
    assert record.epsilon == sel.epsilon(plan, 30.0, DELTA)
    statistics = dp.composed_epsilon([dp.gaussian_event(8.0)], DELTA, options=rdp)
    assert record.part("private statistics").epsilon == statistics
    assert record.part("training").epsilon == plan.epsilon(30.0, DELTA, options=rdp)
    assert record.part("pre-processing").charged is False
    # The whole is composed, not summed: above each part, below their sum.
    parts = [p.epsilon for p in record.parts if p.name in ("private statistics", "selection")]
    assert max(parts) < record.epsilon < sum(parts)
    row = record.as_row()
    assert (
        row["charged"] == "private statistics+selection+training"
        and row["epsilon_pre_processing"] is None
    )
    paper = selection.training_only(plan, 30.0, DELTA)
    assert paper.charged == ("training",) and paper.epsilon == plan.epsilon(30.0, DELTA)
    assert "not charged" in paper.part("selection").note


# ------------------------------------------------------------------------------------------------
# The distribution of K

# (mean, η, a neighbouring η the test must tell apart)
CASES = [(5.0, 0.0, 0.5), (5.0, 0.5, 1.0), (5.0, 1.0, 2.0), (5.0, math.inf, 10.0), (30.0, 2.0, 3.0)]


def _chi_square(draws, mean, eta):
    """Pearson's test of ``draws`` against ``pmf(·, mean, eta)``: cells of at least 5 expected
    draws, the rest pooled into the two tails."""
    n = len(draws)
    lo = 0 if math.isinf(eta) else 1
    ks = np.arange(lo, 2000)
    expected = n * pmf(ks, mean, eta)
    cells = ks[expected >= 5]
    first, last = cells.min(), cells.max()
    observed = (
        [np.sum(draws <= first)]
        + [np.sum(draws == k) for k in range(first + 1, last)]
        + [np.sum(draws >= last)]
    )
    want = [np.sum(expected[ks <= first])] + [expected[ks == k][0] for k in range(first + 1, last)]
    want.append(n - np.sum(want))
    return stats.chisquare(observed, want).pvalue


@pytest.mark.parametrize("mean, eta, other", CASES)
def test_k_follows_the_accounted_distribution(mean, eta, other):
    reps = Repetitions(mean, eta)
    ks = np.arange(0, 60)
    np.testing.assert_allclose(
        reps.pmf(ks),
        (
            pmf(ks, mean, eta)
            if math.isinf(eta)
            else np.where(ks >= 1, pmf(np.maximum(ks, 1), mean, eta), 0.0)
        ),
        rtol=1e-9,
        atol=1e-300,
    )
    draws = reps.sample(jax.random.key(7), (10_000,))  # a fixed key: the test is deterministic
    assert draws.dtype == np.int64 and draws.min() >= (0 if math.isinf(eta) else 1)
    assert _chi_square(draws, mean, eta) > 1e-3
    assert abs(draws.mean() - mean) < 4 * draws.std() / math.sqrt(len(draws))
    # Power: the same test rejects these draws as coming from a 20 % larger mean or another shape
    # (p-values at most 1e-17 on these draws).
    assert _chi_square(draws, 1.2 * mean, eta) < 1e-9
    assert _chi_square(draws, mean, other) < 1e-9


def test_gamma_is_on_the_safe_side_of_dp_accountings():
    for mean, eta in [(5.0, 0.0), (5.0, 0.5), (30.0, 2.0), (1.5, 0.01), (1000.0, 3.0)]:
        ours = selection.tnb_gamma(mean, eta)
        # the distribution drawn has at most the accounted mean
        assert selection.tnb_mean(ours, eta) <= mean
        assert selection.tnb_mean(ours, eta) == pytest.approx(mean, rel=1e-12)
        assert ours >= rdp_privacy_accountant._gamma_truncated_negative_binomial(eta, mean)
        assert ours == pytest.approx(gamma_of(mean, eta), rel=1e-12)


@pytest.mark.parametrize("mean", [1.5, 5.0, 30.0])
def test_logarithmic_k_is_the_exact_quantile_up_to_the_last_float64_u(mean):
    """The logarithmic K's inverse CDF is exact where scipy's ``logser.ppf`` stops ("updating
    stopped, endless loop" at u = 0.99996375 for mean 5) or is off by one (u within 1e-14 of 1):
    every answer k has cdf(k − 1) < u ≤ cdf(k) with the CDF summed in 60-digit arithmetic."""
    import mpmath

    mpmath.mp.dps = 60
    p = 1.0 - selection.tnb_gamma(mean, 0.0)
    rng = np.random.default_rng(int(mean * 10))
    us = np.concatenate(
        [
            [0.99996375, 0.5, 1e-300, 1 - 2.0**-53],
            rng.random(20),
            1 - 10.0 ** -rng.uniform(1, 15, 20),
        ]
    )
    ks = Repetitions(mean, 0.0).quantile(us)
    big_p = mpmath.mpf(p)
    terms = [big_p**j / j / -mpmath.log(1 - big_p) for j in range(1, int(ks.max()) + 1)]
    cdf = [mpmath.mpf(0)]
    for term in terms:
        cdf.append(cdf[-1] + term)
    for u, k in zip(us, ks):
        assert cdf[k - 1] < mpmath.mpf(u) <= cdf[k], (u, k)
    if mean == 5.0:
        assert ks[0] == 99


def test_mean_one_is_a_single_candidate():
    assert set(Repetitions(1.0, 1.0).sample(jax.random.key(0), (200,))) == {1}
    assert set(Repetitions(1.0, 0.0).sample(jax.random.key(0), (200,))) == {1}


# ------------------------------------------------------------------------------------------------
# Running a selection

RNG = np.random.default_rng(3)
X = RNG.normal(size=(300, 3)).astype(np.float32)
Y = (X @ np.array([1.0, -1.0, 0.5]) > 0).astype(np.int32)
MODEL = models.logistic_regression(3)
PARAMS0 = MODEL.init(None)
# Every candidate's run: Poisson batches of 50 (expected), 20 steps, clipped at 1.
LAYOUT = dict(batch_size=50, steps=20, l2_clip_norm=1.0, delta=DELTA)
GRID = {"learning_rate": [0.0, 0.5, 2.0]}


# A plan accounts its run when it is made: at small multipliers (the refusal tests' z = 1 with
# E[K] = 3 spends ε ≈ 13; a grid's least noisy z = 0.5, ε ≈ 51) the slack of a Poisson pad that may
# overflow, (1 + e^ε)·E[K]·p, would leave nothing of δ, so those plans pad to every row (p = 0).
WHOLE_PAD = dict(max_overflow_prob=1e-30)


def _config(sel, n=300, model=MODEL, **noise):
    """A selection's config: its plan is ``sel.plan`` on the n rows (candidates train on
    n − validation_size), at ``noise_multiplier=z`` or calibrated to ``target_epsilon``."""
    return TrainConfig(model, Hyper(learning_rate=1.0), sel.plan("poisson", n, **LAYOUT, **noise))


def _plain(n=200, noise_multiplier=1.0, **options):
    """A plain private plan's config on n rows (no selection accounting)."""
    options = {**LAYOUT, **options}
    return TrainConfig(
        MODEL,
        Hyper(learning_rate=1.0),
        DPPlan.create("poisson", n, noise_multiplier=noise_multiplier, **options),
    )


def test_a_single_candidate_is_a_plain_run():
    sel = _selection(1.0, 1.0, 2.0, validation_size=80)
    key = jax.random.key(11)
    chosen = _config(sel, noise_multiplier=1.5)
    assert chosen.plan.n == 220 and chosen.plan.noise_multiplier == 1.5
    result = selection.select(chosen, PARAMS0, (X, Y), key, GRID)
    assert result.diagnostics["num_candidates"] == 1
    (x_train, y_train), (x_val, y_val) = selection.split((X, Y), 80, key)
    assert len(x_train) == 220 and len(x_val) == 80
    lr = float(result.point["learning_rate"])
    assert lr in GRID["learning_rate"]
    config = dataclasses.replace(_plain(220, 1.5), hyper=Hyper(learning_rate=lr))
    assert config.plan.execution == chosen.plan.execution  # the same run, accounted alone
    params, _ = train(config, PARAMS0, (x_train, y_train), selection.candidate_key(key, 0))
    for a, b in zip(jax.tree_util.tree_leaves(result.params), jax.tree_util.tree_leaves(params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    correct = round(float(sweeps.evaluate(MODEL, params, x_val, y_val)["accuracy"]) * 80)
    noise = float(
        jax.random.normal(streams.stream(selection.candidate_key(key, 0), selection.SCORE))
    )
    assert result.score == pytest.approx((correct + 2.0 * noise) / 80, rel=1e-12)
    assert result.noise_multiplier == 1.5
    assert (
        result.accounting.epsilon
        == sel.epsilon(chosen.plan.execution, 1.5, DELTA)
        == chosen.plan.epsilon
    )


def test_selection_returns_the_best_noisy_score_and_compiles_once_per_chunk():
    sel = _selection(6.0, 1.0, 5.0, validation_size=100)
    config = _config(sel, target_epsilon=4.0)
    # The plan calibrates z for the whole procedure, with the selection as its accountant.
    assert config.plan.noise_multiplier == sel.calibrate(config.plan.execution, 4.0, DELTA)
    seen = []
    for seed in range(3):  # K = 15, 5, 3
        result = selection.select(config, PARAMS0, (X, Y), jax.random.key(seed), GRID, chunk_size=4)
        assert result.noise_multiplier == config.plan.noise_multiplier
        d = result.diagnostics
        k = d["num_candidates"]
        seen.append(k)
        assert d["noisy_scores"].shape == (k,) and d["best"] == int(np.argmax(d["noisy_scores"]))
        assert result.score == d["noisy_scores"][d["best"]]
        assert (
            float(result.point["learning_rate"])
            == GRID["learning_rate"][d["grid_indices"][d["best"]]]
        )
        # Score noise of std 5 on counts of 100 cannot turn the untrained model (lr 0, ~50 % right)
        # into the winner when a trained one was drawn.
        if np.any(d["grid_indices"] > 0):
            assert d["grid_indices"][d["best"]] > 0
        assert result.accounting.epsilon <= 4.0
    assert len(set(seen)) > 1 and max(seen) > 4  # several K, and several chunks
    fn = sweeps._compiled(
        static_config(config), config.plan.execution, ("learning_rate",), True, True, (True,), False
    )
    assert fn._cache_size() == 1  # every chunk of every draw: one compilation


def test_poisson_k_may_be_zero():
    sel = _selection(1.0, math.inf, 1.0)
    keys = [
        s
        for s in range(40)
        if Repetitions(1.0, math.inf).sample(
            streams.stream(jax.random.key(s), selection.NUM_CANDIDATES)
        )
        == 0
    ]
    result = selection.select(
        _config(sel, noise_multiplier=2.0), PARAMS0, (X, Y), jax.random.key(keys[0]), GRID
    )
    assert result.params is None and result.point is None and result.score is None
    assert result.diagnostics["num_candidates"] == 0


# ------------------------------------------------------------------------------------------------
# Bad input: a ValueError naming the argument, before any training


@pytest.fixture
def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("trained before refusing bad input")

    monkeypatch.setattr(selection.sweeps, "sweep_points", refuse)


@pytest.mark.parametrize(
    "grid, match",
    [
        ({}, "grid"),
        ({"learning_rate": []}, "grid"),
        ({"noise_multiplier": [1.0, 2.0]}, "noise_multiplier"),
        ({"learning_rate": [0.1, 0.2], "l2_clip_norm": [1.0]}, "grid"),
        ({"momentum": [0.9]}, "momentum"),
        ({"learning_rate": [-1.0]}, "learning_rate"),
    ],
)
def test_bad_grids_are_refused(no_training, grid, match):
    config = _config(_selection(3.0, 1.0, 2.0), noise_multiplier=1.0, **WHOLE_PAD)
    with pytest.raises(ValueError, match=match):
        selection.select(config, PARAMS0, (X, Y), jax.random.key(0), grid)


def test_bad_selections_are_refused(no_training):
    with pytest.raises(ValueError, match="shape"):
        Repetitions(3.0, -0.5)
    with pytest.raises(ValueError, match="shape"):
        Repetitions(3.0, math.nan)
    with pytest.raises(ValueError, match="mean"):
        Repetitions(0.5, 1.0)
    with pytest.raises(ValueError, match="score_noise"):
        PrivateSelection(Repetitions(3.0), 0.0, 50)
    with pytest.raises(ValueError, match="validation_size"):
        PrivateSelection(Repetitions(3.0), 1.0, 0)
    for size in (300, 301):  # the selection's plan on the 300 rows leaves nothing to train on
        with pytest.raises(ValueError, match="validation_size"):
            config = _config(
                _selection(3.0, 1.0, 2.0, validation_size=size), noise_multiplier=1.0, **WHOLE_PAD
            )
            selection.select(config, PARAMS0, (X, Y), jax.random.key(0), GRID)
    # A plan made for another number of rows than the data's (400 − 300 = 100 training rows, not 0).
    other = _config(
        _selection(3.0, 1.0, 2.0, validation_size=300), n=400, noise_multiplier=1.0, **WHOLE_PAD
    )
    with pytest.raises(ValueError, match="validation rows"):
        selection.select(other, PARAMS0, (X, Y), jax.random.key(0), GRID)
    with pytest.raises(ValueError, match="target_epsilon"):  # the scores alone cost more
        selection.select(
            _config(_selection(10.0, 1.0, 0.5), target_epsilon=1.0),
            PARAMS0,
            (X, Y),
            jax.random.key(0),
            GRID,
        )
    with pytest.raises(ValueError, match="exactly one"):
        selection.select(
            _config(_selection(3.0, 1.0, 2.0)), PARAMS0, (X, Y), jax.random.key(0), GRID
        )
    regression = _config(
        _selection(3.0, 1.0, 2.0),
        model=models.linear_regression(3),
        noise_multiplier=1.0,
        **WHOLE_PAD,
    )
    with pytest.raises(ValueError, match="classifier"):
        selection.select(
            regression,
            models.linear_regression(3).init(None),
            (X, Y.astype(np.float32)),
            jax.random.key(0),
            GRID,
        )


def _both_entry_points(config, sel, params0=PARAMS0, data=(X, Y)):
    """select and search_many on the same config and selection (one shared check refuses both):
    the config's plan is the selection's, on the 200 training rows of the 300."""
    train_part, validation = selection.split(data, 100, jax.random.key(0))
    yield lambda: selection.select(config, params0, data, jax.random.key(0), GRID)
    yield lambda: selection.search_many(
        config,
        params0,
        train_part,
        validation,
        [selection.Search(jax.random.key(0), GRID)],
        selection=sel,
    )


def _selection_config(sel, model=MODEL):
    # DPPlan.create with the selection as accountant is what sel.plan("poisson", 300, ...) makes,
    # for any validation_size (sel.plan itself needs more rows than 2^23 validation rows).
    plan = DPPlan.create(
        "poisson", 200, noise_multiplier=1.0, accountant=sel, **LAYOUT, **WHOLE_PAD
    )
    return TrainConfig(model, Hyper(learning_rate=1.0), plan)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"hyper": None}, "config.hyper is required"),
        ({"iterates": "both"}, "iterates='both'"),
        ({"selection": PrivateSelection(Repetitions(3.0), 1.0, 2**23)}, "below 2\\^23"),
    ],
)
def test_select_and_search_many_refuse_the_same_configs(no_training, change, match):
    sel = change.get("selection", _selection(3.0, 1.0, 2.0))
    config = dataclasses.replace(
        _selection_config(sel), **{k: v for k, v in change.items() if k != "selection"}
    )
    for run in _both_entry_points(config, sel):
        with pytest.raises(ValueError, match=match):
            run()


def test_select_needs_a_selections_plan_and_search_many_a_selection(no_training):
    """select reads the selection from its plan (a plain plan's ε would not cover the selection);
    search_many takes it as an argument."""
    train_part, validation = selection.split((X, Y), 100, jax.random.key(0))
    non_private = TrainConfig(
        MODEL, Hyper(1.0), DPPlan.non_private("poisson", 200, batch_size=50, steps=20)
    )
    for config in (_plain(), non_private):
        with pytest.raises(ValueError, match="selection's plan"):
            selection.select(config, PARAMS0, (X, Y), jax.random.key(0), GRID)
    with pytest.raises(TypeError, match="must be a PrivateSelection"):
        selection.search_many(
            _plain(),
            PARAMS0,
            train_part,
            validation,
            [selection.Search(jax.random.key(0), GRID)],
            selection="not a selection",
        )  # type: ignore[arg-type]


def test_select_and_search_many_refuse_a_regression_model(no_training):
    regression = models.linear_regression(3)
    sel = _selection(3.0, 1.0, 2.0)
    config = _selection_config(sel, regression)
    for run in _both_entry_points(config, sel, regression.init(None), (X, Y.astype(np.float32))):
        with pytest.raises(ValueError, match="classifier"):
            run()


def test_training_only_charges_a_declared_preprocessing():
    """A pre-processing sensitivity is charged: the total is the smaller of Hu et al.'s Theorem 2
    (plan.epsilon with meta.PreprocessedAccountant) and group privacy (meta.overall_privacy's
    group_epsilon at k = ceil(Δ∞) + 1), it grows with the sensitivity, and it is refused where it
    cannot compose."""
    from dpprep.preprocess.privacy import meta
    from dpprep.preprocess.sensitivity import Sensitivity

    plan = ExecutionPlan.create("full", 2000, steps=200, neighboring_relation="replace_one")
    z = 20.0
    totals = []
    for sens in (Sensitivity(2.0, 0.01), Sensitivity(50.0, 0.5)):
        accountant = meta.PreprocessedAccountant(sens)
        record = selection.training_only(plan, z, DELTA, preprocessing=accountant)
        theorem2 = plan.epsilon(z, DELTA, accountant=accountant)
        group = meta.overall_privacy(accountant.mechanism(plan, z), sens, delta=DELTA).group_epsilon
        assert record.epsilon == pytest.approx(min(theorem2, group), rel=1e-9)
        assert record.charged == ("pre-processing", "training")
        assert record.part("pre-processing").epsilon == record.epsilon
        assert record.part("training").epsilon == plan.epsilon(z, DELTA) < record.epsilon
        assert record.as_row()["epsilon_pre_processing"] == record.epsilon
        totals.append(record.epsilon)
    assert totals[0] < totals[1]
    # Large Δ∞ with a tiny Δ2: Theorem 2 wins by far over group privacy (k = 51).
    assert (
        "the smaller (Theorem 2)" in record.part("pre-processing").note
        and record.accountant == "theorem2"
    )
    with pytest.raises(ValueError, match="fixed_events and options do not compose"):
        selection.training_only(
            plan, z, DELTA, preprocessing=accountant, fixed_events=(dp.gaussian_event(5.0),)
        )
    with pytest.raises(TypeError, match="PreprocessedAccountant"):
        selection.training_only(plan, z, DELTA, preprocessing=Sensitivity(1.0, 0.1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="replace-one"):
        selection.training_only(
            ExecutionPlan.create("full", 2000, steps=200), z, DELTA, preprocessing=accountant
        )


# ------------------------------------------------------------------------------------------------
# Several searches at once; grids whose points set the noise


def test_one_search_is_select_bitwise():
    """search_many with one Search on select's split is select: same candidates, scores and
    model."""
    sel = _selection(6.0, 1.0, 5.0, validation_size=100)
    key = jax.random.key(1)
    chosen = selection.select(
        _config(sel, noise_multiplier=1.5), PARAMS0, (X, Y), key, GRID, chunk_size=4
    )
    train_part, validation = selection.split((X, Y), 100, key)
    config = _plain(200, 1.5)
    (found,) = selection.search_many(
        config,
        PARAMS0,
        train_part,
        validation,
        [selection.Search(key, GRID)],
        selection=sel,
        chunk_size=4,
    )
    # one noise level: the same account
    assert found.accounting.epsilon == chosen.accounting.epsilon
    assert found.diagnostics["num_candidates"] == chosen.diagnostics["num_candidates"] > 4
    np.testing.assert_array_equal(
        found.diagnostics["noisy_scores"], chosen.diagnostics["noisy_scores"]
    )
    assert (
        found.score == chosen.score
        and GRID["learning_rate"][found.index] == chosen.point["learning_rate"]
    )
    for a, b in zip(
        jax.tree_util.tree_leaves(found.params), jax.tree_util.tree_leaves(chosen.params)
    ):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_packed_searches_equal_each_alone_and_noise_levels_are_per_point():
    """Three searches packed two candidates per call give what each gives alone; a grid may set the
    noise per point, and the chosen model is the plain run at its drawn multiplier."""
    sel = _selection(3.0, 1.0, 2.0, validation_size=100)
    train_part, validation = selection.split((X, Y), 100, jax.random.key(5))
    grid = {"noise_multiplier": [0.5, 4.0, 20.0], "learning_rate": [1.0, 1.0, 0.5]}
    searches = [selection.Search(jax.random.key(20 + i), grid) for i in range(3)]
    # every point sets its own noise (checked and accounted against this plan)
    config = _plain(200, 1.0, **WHOLE_PAD)
    packed = selection.search_many(
        config, PARAMS0, train_part, validation, searches, selection=sel, chunk_size=2
    )
    assert sum(r.diagnostics["num_candidates"] for r in packed) > 3
    for search, got in zip(searches, packed):
        (alone,) = selection.search_many(
            config, PARAMS0, train_part, validation, [search], selection=sel, chunk_size=8
        )
        np.testing.assert_array_equal(
            got.diagnostics["noisy_scores"], alone.diagnostics["noisy_scores"]
        )
        assert got.index == alone.index
        assert (
            got.accounting.epsilon
            == sel.end_to_end_of_grid(
                config.plan.execution, grid["noise_multiplier"], DELTA
            ).epsilon
        )
        # the least noisy
        assert got.accounting.epsilon < sel.end_to_end(config.plan.execution, 0.5, DELTA).epsilon
        best = got.diagnostics["best"]
        point = _plain(200, grid["noise_multiplier"][got.index], **WHOLE_PAD)
        point = dataclasses.replace(
            point, hyper=Hyper(learning_rate=grid["learning_rate"][got.index])
        )
        params, _ = train(point, PARAMS0, train_part, selection.candidate_key(search.key, best))
        for a, b in zip(jax.tree_util.tree_leaves(got.params), jax.tree_util.tree_leaves(params)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)


def test_a_grid_of_noise_levels_on_poisson_batches_lies_between_its_points():
    sel = _selection(4.0, 1.0, 20.0, validation_size=100)
    at_least_noisy = _config(sel, noise_multiplier=1.2).plan
    # the candidates' run on the 200 training rows (padded Poisson batches)
    plan = at_least_noisy.execution
    account = sel.end_to_end_of_grid(plan, [3.0, 1.2, 8.0], DELTA)
    assert (
        sel.epsilon(plan, 8.0, DELTA)
        < account.epsilon
        < sel.epsilon(plan, 1.2, DELTA)
        == at_least_noisy.epsilon
    )
    assert account.epsilon > sel.end_to_end_of_grid(plan, [3.0, 8.0], DELTA).epsilon
    assert "z = 1.2 to 8" in account.part("selection").note
    assert "least noisy grid point" in account.part("training").note
    assert account.part("training").epsilon == plan.epsilon(
        1.2, DELTA, options=dp.AccountingOptions(accountant="rdp")
    )
    for bad in ([], [1.0, 0.0], [1.0, math.nan]):
        with pytest.raises(ValueError, match="noise_multipliers"):
            sel.end_to_end_of_grid(plan, bad, DELTA)


def test_bad_searches_are_refused(no_training):
    sel = _selection(3.0, 1.0, 2.0, validation_size=100)
    train_part, validation = selection.split((X, Y), 100, jax.random.key(0))
    key = jax.random.key(0)
    config = _plain(200, 1.0, **WHOLE_PAD)
    with pytest.raises(ValueError, match="searches"):
        selection.search_many(config, PARAMS0, train_part, validation, [], selection=sel)
    with pytest.raises(ValueError, match="same fields"):
        selection.search_many(
            config,
            PARAMS0,
            train_part,
            validation,
            [selection.Search(key, GRID), selection.Search(key, {"l2_clip_norm": [1.0]})],
            selection=sel,
        )
    with pytest.raises(ValueError, match="validation_size"):
        selection.search_many(
            config,
            PARAMS0,
            train_part,
            (X[:50], Y[:50]),
            [selection.Search(key, GRID)],
            selection=sel,
        )
    with pytest.raises(ValueError, match="chunk_size"):
        selection.search_many(
            config,
            PARAMS0,
            train_part,
            validation,
            [selection.Search(key, GRID)],
            selection=sel,
            chunk_size=0,
        )
    with pytest.raises(ValueError, match="learning_rate"):
        selection.search_many(
            config,
            PARAMS0,
            train_part,
            validation,
            [selection.Search(key, {"learning_rate": [-1.0]})],
            selection=sel,
        )


def test_the_scores_warning_fires_only_where_the_scores_share_the_budget():
    """Composed (add/remove), noisy counts costing more than half the total leave the training
    less: a warning. Under replace-one the parts' δ is averaged (at most the larger part), so the
    counts take nothing from the training below the target: no warning for the same selection."""
    loud = _selection(10.0, 1.0, 2.0)
    for neighboring_relation, warns in (("add_remove", True), ("replace_one", False)):
        plan = ExecutionPlan.create(
            "full", 600, steps=40, neighboring_relation=neighboring_relation
        )
        account = loud.end_to_end(plan, 300.0, DELTA)
        scores = loud.scores_epsilon(plan, DELTA)
        assert scores > 0.5 * account.epsilon
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            selection._warn_if_scores_dominate(account, scores, not loud.splits_parts(plan))
        assert bool(caught) == warns, (neighboring_relation, [str(w.message) for w in caught])
