"""Rigorous subsampled DP-SGD for Theorem 2 (dpprep.preprocess.privacy.sgd_samp), pinned against
dp-accounting,
closed forms and numerically integrated Rényi divergences of realisable one-step pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SampledWithoutReplacementDpEvent
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import special, stats

from dpprep.preprocess.privacy import meta, sgd_samp, table1
from dpprep.preprocess.sensitivity import Sensitivity

CASES = [(0.1, 1.0), (0.01, 1.0), (0.2, 2.0), (0.05, 0.7)]  # (q, z)
ORDERS = [1.5, 2.0, 5.0, 10.0, 30.0]


def mixture_divergence(alpha, sigma, weights, means_p, means_q):
    """D_α(Σ w N(μp, σ²) ‖ Σ w N(μq, σ²)) in 1-d by a fine Riemann sum in log-space; the range
    covers the tilted density P^α Q^{1−α}, which sits up to ~α·(mean spread) away."""
    lo, hi = min(min(means_p), min(means_q)), max(max(means_p), max(means_q))
    reach = alpha * (hi - lo) + 15 * sigma
    x = np.linspace(lo - reach, hi + reach, 200_001)
    dx = x[1] - x[0]

    def log_density(means):
        comps = [
            math.log(w) - 0.5 * ((x - m) / sigma) ** 2 for w, m in zip(weights, means) if w > 0
        ]
        return special.logsumexp(np.stack(comps), axis=0) - math.log(sigma * math.sqrt(2 * math.pi))

    lp, lq = log_density(means_p), log_density(means_q)
    return float((special.logsumexp(alpha * lp + (1 - alpha) * lq) + math.log(dx)) / (alpha - 1))


@pytest.mark.parametrize("q,z", CASES)
def test_replace_one_rdp_dominates_add_remove(q, z):
    n = round(1 / q)
    ar = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, z, ORDERS)
    # dp-accounting gives up near α = 1 at q = 0.1
    ar = np.where(np.isfinite(ar), ar, sgd_samp.add_remove_step_rdp(q, z, np.array(ORDERS)))
    assert np.all(np.isfinite(ar))
    for sampling in sgd_samp.SAMPLINGS:
        ro = sgd_samp.replace_one_step_rdp(sampling, n, 1, z, np.array(ORDERS))
        assert np.all(ro >= ar * (1 - 1e-9)), (sampling, ro, ar)


@pytest.mark.parametrize("q,z", CASES)
def test_poisson_bound_dominates_exact_one_step_divergences(q, z):
    """Poisson, one step, other records' gradients 0 (the common part only convolves, so this is
    the one-step pair up to post-processing): record i's clipped gradient a vs b in [−1, 1]. The
    antipodal pair a = 1, b = −1 is dp-accounting's PLD pair for Poisson REPLACE."""
    n = round(1 / q)
    rng = np.random.default_rng(0)
    pairs = [(1.0, -1.0), (1.0, 0.0), (0.0, 1.0)] + [tuple(rng.uniform(-1, 1, 2)) for _ in range(2)]
    for alpha in ORDERS:
        bound = float(sgd_samp.replace_one_step_rdp("poisson", n, 1, z, alpha))
        worst = 0.0
        for a, b in pairs:
            exact = mixture_divergence(alpha, z, [1 - q, q], [0.0, a], [0.0, b])
            assert bound >= exact, (alpha, a, b, bound, exact)
            worst = max(worst, exact)
        if alpha >= 2:  # and it is nearly tight (the direct binomial bound; ≤ 1.9x on these cases)
            assert bound <= 2.5 * worst, (alpha, bound, worst)


@pytest.mark.parametrize("q,z", CASES)
def test_without_replacement_bound_dominates_exact_one_step_divergence(q, z):
    """Batch-1 uniform sampling, every other record's gradient at −1, record i at +1 vs −1:
    D_α((1−q)N(0)+qN(2) ‖ N(0)) — realisable, and at least as large as the antipodal pair."""
    n = round(1 / q)
    for alpha in ORDERS:
        bound = float(sgd_samp.replace_one_step_rdp("without_replacement", n, 1, z, alpha))
        exact = mixture_divergence(alpha, z, [1 - q, q], [0.0, 2.0], [0.0, 0.0])
        assert bound >= exact, (alpha, bound, exact)
        anti = mixture_divergence(alpha, z, [1 - q, q], [0.0, 1.0], [0.0, -1.0])
        assert bound >= anti


def test_without_replacement_matches_dp_accounting_and_full_batch_closed_form():
    n, batch, z, steps = 1000, 10, 1.3, 50
    mech = sgd_samp.subsampled_sgd(
        noise_multiplier=z,
        n=n,
        batch_size=batch,
        steps=steps,
        linf=n,
        sampling="without_replacement",
    )
    for alpha in (2.0, 3.0, 8.0, 22.0):  # integer orders: dp-accounting's own accountant
        acc = RdpAccountant(orders=[alpha], neighboring_relation=NeighboringRelation.REPLACE_ONE)
        acc.compose(SampledWithoutReplacementDpEvent(n, batch, GaussianDpEvent(z / 2)), steps)
        grid_value = mech.rdp(alpha)
        assert grid_value >= acc._rdp[0] * (1 - 1e-12)
        assert grid_value == pytest.approx(acc._rdp[0], rel=1e-9)  # integer orders are on the grid
    for sampling in sgd_samp.SAMPLINGS:  # q = 1: the sum moves by 2C, Gaussian 2α/z² per step
        full = sgd_samp.subsampled_sgd(
            noise_multiplier=z, n=20, batch_size=20, steps=steps, linf=20, sampling=sampling
        )
        # WOR: integer grid
        for alpha in (1.5, 4.0, 30.0) if sampling == "poisson" else (4.0, 30.0):
            closed = steps * 2 * alpha / z**2
            assert closed * (1 - 1e-12) <= full.rdp(alpha) <= closed * 1.01


def test_chord_interpolation_is_an_upper_bound_off_the_grid():
    q, z = 0.02, 0.9
    alphas = np.array([1.37, 2.71, 6.3, 17.9, 101.5])
    ours = sgd_samp.add_remove_step_rdp(q, z, alphas)
    direct = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, z, alphas)
    assert np.all(ours >= direct * (1 - 1e-12))
    assert np.all(ours <= direct * 1.1)
    assert np.isinf(sgd_samp.add_remove_step_rdp(q, z, 5000.0))  # beyond the grid: inadmissible


def test_srdp_closed_forms_and_binomial_sum():
    n, batch, z, steps, mu, clip = 200, 8, 1.7, 30, 1.25, 0.8
    tau = 3.0
    d2 = tau / n
    # Fixed batch, every record moved (PCA, Δ∞ = n): spec §9.4, α μ²Δ2² B²/(2z²C²) per step.
    wor = sgd_samp.subsampled_sgd(
        noise_multiplier=z,
        n=n,
        batch_size=batch,
        steps=steps,
        linf=n,
        sampling="without_replacement",
        l2_clip_norm=clip,
        smoothness=mu,
    )
    for alpha in (1.3, 4.0, 25.0):
        closed = steps * alpha * mu**2 * d2**2 * batch**2 / (2 * z**2 * clip**2)
        assert closed <= wor.srdp(alpha, tau) <= closed * 1.01
    # Poisson, Δ∞ = m < n changed records: b ~ Binomial(m, q), enumerated here with math.comb.
    m = 12
    poi = sgd_samp.subsampled_sgd(
        noise_multiplier=z,
        n=n,
        batch_size=batch,
        steps=steps,
        linf=m,
        l2_clip_norm=clip,
        smoothness=mu,
    )
    q, shift = batch / n, mu * (tau / m) / (z * clip)
    for alpha in (2.0, 7.0):
        mgf = sum(
            math.comb(m, b)
            * q**b
            * (1 - q) ** (m - b)
            * math.exp(alpha * (alpha - 1) * (b * shift) ** 2 / 2)
            for b in range(m + 1)
        )
        exact = steps * math.log(mgf) / (alpha - 1)
        assert exact * (1 - 1e-9) <= poi.srdp(alpha, tau) <= exact * 1.01
        assert float(sgd_samp.srdp_step_cgf("poisson", n, batch, m, shift, alpha)) == pytest.approx(
            math.log(mgf), rel=1e-10
        )
    assert poi.srdp(3.0, 0.0) == 0.0


def test_srdp_dominates_exact_divergence_of_a_moved_dataset():
    """ℓ(θ, x) = −θᵀx (gradient −x, μ = 1): S has all-zero records, S' every record at Δ2·e. One
    Poisson step: N(0, z²) vs Σ_b Binom(b; n, q) N(bΔ2, z²). Both directions, by integration."""
    n, batch, z, d2 = 40, 4, 1.0, 0.05
    q = batch / n
    mech = sgd_samp.subsampled_sgd(noise_multiplier=z, n=n, batch_size=batch, steps=1, linf=n)
    b = np.arange(n + 1)
    w = stats.binom.pmf(b, n, q)
    keep = w > 1e-300
    for alpha in (2.0, 6.0, 20.0):
        bound = mech.srdp(alpha, n * d2)
        one = mixture_divergence(
            alpha, z, list(w[keep]), list(b[keep] * d2), [0.0] * int(keep.sum())
        )
        other = mixture_divergence(
            alpha, z, list(w[keep]), [0.0] * int(keep.sum()), list(b[keep] * d2)
        )
        assert bound >= max(one, other)


def test_theorem2_of_full_batch_matches_closed_form():
    """B = n: RDP 2αT/z² and SRDP αμ²τ²T/(2z²C²) are linear in α, so exact Theorem 2 has the closed
    form α(√a + √b)² (meta.theorem2's docstring); ours may exceed it only by the chord's slack."""
    n, z, steps, tau, mu = 100, 4.0, 10, 2.0, 1.25
    mech = sgd_samp.subsampled_sgd(
        noise_multiplier=z, n=n, batch_size=n, steps=steps, linf=n, smoothness=mu
    )
    a, b = 2 * steps / z**2, mu**2 * tau**2 * steps / (2 * z**2)
    for alpha in (1.5, 3.0, 10.0):
        closed = alpha * (math.sqrt(a) + math.sqrt(b)) ** 2
        value = meta.theorem2(mech, tau, alpha)
        assert closed * (1 - 1e-6) <= value <= closed * 1.02


def test_overall_privacy_accepts_table1_sgd_samp_and_is_monotone_in_noise():
    sens = Sensitivity(linf=1000.0, l2=12.2 / 1000)
    eps = []
    for mech_eps in (0.05, 0.1, 0.2):  # z = sqrt(2T)/(εn) = 4, 2, 1: larger ε, less noise
        m = table1.dp_sgd_sampling(epsilon=mech_eps, n=1000, steps=20_000)
        res = meta.overall_privacy(m, sens, delta=1e-5)
        assert isinstance(res.mechanism, sgd_samp.SubsampledSGD)
        assert res.mechanism.noise_multiplier == pytest.approx(m.noise_multiplier)
        assert res.mechanism.sampling == "without_replacement" and res.mechanism.batch_size == 1
        eps.append(res.epsilon)
    assert eps[0] < eps[1] < eps[2]
    # No pre-processing (τ = 0): the RDP alone, i.e. Lemma M on dp-accounting's curve.
    m = table1.dp_sgd_sampling(epsilon=0.1, n=1000, steps=20_000)
    plain = meta.overall_privacy(m, Sensitivity(0, 0), delta=1e-5)
    rig = sgd_samp.from_table1(m, 0.0)
    alphas = np.linspace(1.5, 60, 2000)
    direct = np.min(rig.rdp(alphas) + math.log(1e5) / (alphas - 1))
    assert plain.epsilon == pytest.approx(direct, rel=1e-3) and plain.epsilon <= direct


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
def test_calibrate_round_trips():
    sens = Sensitivity(linf=2000.0, l2=14.81 / 2000)
    cal = meta.calibrate_mechanism(
        lambda e: table1.dp_sgd_sampling(epsilon=e, n=2000, steps=40_000),
        sens,
        target_epsilon=8.0,
        delta=1e-5,
        rtol=1e-4,
    )
    assert cal.overall.epsilon <= 8.0 and cal.overall.epsilon == pytest.approx(8.0, rel=1e-3)
    again = meta.overall_privacy(
        table1.dp_sgd_sampling(epsilon=cal.mechanism_epsilon, n=2000, steps=40_000),
        sens,
        delta=1e-5,
    )
    assert again.epsilon == pytest.approx(cal.overall.epsilon, rel=1e-9)

    fig3 = meta.calibrate_subsampled_sgd(
        target_epsilon=4.0,
        delta=1e-5,
        n=10_000,
        batch_size=100,
        steps=1000,
        sensitivity=Sensitivity(10_000, 14.81 / 10_000),
        smoothness=1.25,
    )
    assert fig3.overall.epsilon <= 4.0 and fig3.overall.epsilon == pytest.approx(4.0, rel=1e-3)
    assert fig3.noise_std == pytest.approx(fig3.noise_multiplier / 100)
    more = sgd_samp.subsampled_sgd(
        noise_multiplier=fig3.noise_multiplier * 0.98,
        n=10_000,
        batch_size=100,
        steps=1000,
        linf=10_000,
        smoothness=1.25,
    )
    assert meta.overall_privacy(more, Sensitivity(10_000, 14.81 / 10_000), delta=1e-5).epsilon > 4.0


def test_bad_input():
    ok = dict(noise_multiplier=1.0, n=100, batch_size=10, steps=5, linf=100)
    for key, value in (
        ("sampling", "shuffle"),
        ("batch_size", 101),
        ("noise_multiplier", 0.0),
        ("linf", 101.0),
        ("steps", 0),
        ("l2_clip_norm", -1.0),
    ):
        with pytest.raises(ValueError, match=key):
            sgd_samp.subsampled_sgd(**{**ok, key: value})
    with pytest.raises(ValueError, match="linf"):  # its SRDP is for another pre-processing
        meta.overall_privacy(sgd_samp.subsampled_sgd(**ok), Sensitivity(10, 0.1), delta=1e-5)
    with pytest.raises(TypeError, match="sensitivity"):
        meta.calibrate_subsampled_sgd(
            target_epsilon=1.0, delta=1e-5, n=100, batch_size=10, steps=5, sensitivity=(1, 0.1)
        )
    with pytest.raises(TypeError, match="DPSGDSampling"):
        sgd_samp.from_table1(table1.dp_gd(epsilon=1.0), 10)
    # theorem2's direct path still refuses the formula
    with pytest.raises(ValueError, match="rigorous"):
        meta.check_mechanism(
            table1.dp_sgd_sampling(epsilon=1.0, n=1000, steps=2_000_000), Sensitivity(10, 0.1)
        )


# ---- property tests: the order-grid chord is an upper bound everywhere ---------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=20, deadline=None)
@given(
    q=st.sampled_from([0.01, 0.05]),
    z=st.sampled_from([0.8, 2.0]),  # few (q, z): each new pair computes a whole order grid
    alpha=st.floats(1.02, 200.0),
)
def test_chord_dominates_dp_accounting_at_any_order(q, z, alpha):
    n = round(1 / q)
    direct_ar = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, z, [alpha])[0]
    if np.isfinite(direct_ar):
        assert sgd_samp.add_remove_step_rdp(q, z, alpha) >= direct_ar * (1 - 1e-9)
    direct_wor = rdp_lib._compute_rdp_sample_wor_gaussian(q, z / 2, [alpha])[0]
    assert sgd_samp.replace_one_step_rdp("without_replacement", n, 1, z, alpha) >= direct_wor * (
        1 - 1e-9
    )


@settings(max_examples=25, deadline=None)
@given(
    sampling=st.sampled_from(sgd_samp.SAMPLINGS),
    n=st.integers(20, 400),
    batch_frac=st.floats(0.01, 1.0),
    changed_frac=st.floats(0.0, 1.0),
    shift=st.floats(1e-4, 0.5),
    alpha=st.floats(1.05, 60.0),
)
def test_srdp_chord_dominates_the_exact_sum_and_sits_between_jensen_and_worst_case(
    sampling, n, batch_frac, changed_frac, shift, alpha
):
    batch = max(1, round(batch_frac * n))
    m = round(changed_frac * n)
    mech = sgd_samp.subsampled_sgd(
        noise_multiplier=1.0, n=n, batch_size=batch, steps=1, linf=m, sampling=sampling
    )
    value = mech.srdp(alpha, shift * m)  # Δ2 = τ/m = shift (z = C = μ = 1)
    exact = float(sgd_samp.srdp_step_cgf(sampling, n, batch, m, shift, alpha)) / (alpha - 1)
    assert value >= exact * (1 - 1e-9) - 1e-12
    b_max = m if sampling == "poisson" else min(m, batch)
    mean_b = m * batch / n
    assert exact <= alpha * (b_max * shift) ** 2 / 2 * (1 + 1e-9) + 1e-12  # b ≤ b_max
    assert exact >= alpha * (mean_b * shift) ** 2 / 2 * (1 - 1e-9) - 1e-12  # Jensen: E b² ≥ (E b)²


def test_calibrate_tiny_target_is_refused_clearly():
    # Issue 21: "math domain error" (log1p(-1) at huge z) instead of saying the target is out of
    # reach.
    with pytest.raises(
        ValueError,
        match=r"target_epsilon=1e-12 is not reachable at delta=1e-05: Lemma M .* "
        r"= 0.0115\d* whatever the noise",
    ):
        meta.calibrate_subsampled_sgd(
            target_epsilon=1e-12,
            delta=1e-5,
            n=10_000,
            batch_size=100,
            steps=1000,
            sensitivity=Sensitivity(0.0, 0.0),
        )
    # The per-step bound itself stays finite at such multipliers.
    grid, cgf = sgd_samp._replace_one_cgf("poisson", 10_000, 100, 1e12)
    assert grid.size and np.all(np.isfinite(cgf))
