"""Table 1 mechanisms: formulas against independent derivations, α-ranges, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpprep.accounting import dp
from dpprep.preprocess.privacy import table1
from dpprep.preprocess.privacy.renyi import gaussian_divergence


def test_gaussian_formulas_and_lemma_c():
    g = table1.gaussian(epsilon=0.5, lipschitz=2.0, sensitivity=4.0)
    assert g.rdp(3.0) == pytest.approx(3 * 0.25 / 2)
    assert g.srdp(3.0, 1.5) == pytest.approx(3 * 4 * 2.25 * 0.25 / (2 * 16))
    # The RDP is the divergence of N(f, σ²) vs N(f + Δ_f, σ²) with σ = Δ_f/ε (Lemma C).
    assert g.rdp(3.0) == pytest.approx(gaussian_divergence(3.0, 4.0, g.noise))
    # SRDP: f moves by at most L·τ, same noise.
    assert g.srdp(3.0, 1.5) == pytest.approx(gaussian_divergence(3.0, 2.0 * 1.5, g.noise))
    np.testing.assert_allclose(g.rdp(np.array([2.0, 4.0])), [0.25, 0.5])


def test_dp_gd_is_T_gaussian_steps_with_sensitivity_2L_over_n():
    gd = table1.dp_gd(epsilon=0.7, lipschitz=1.5, smoothness=2.0)
    n, steps, alpha, tau = 500, 40, 5.0, 0.3
    sigma = gd.noise_std(n, steps)
    assert sigma == pytest.approx(1.5 * math.sqrt(steps) / (0.7 * n))
    assert gd.rdp(alpha) == pytest.approx(steps * gaussian_divergence(alpha, 2 * 1.5 / n, sigma))
    assert gd.rdp(alpha) == pytest.approx(2 * alpha * 0.49)  # 2αε², not the statement's αε²/2
    # SRDP: the average gradient moves by ≤ μτ/n per step.
    assert gd.srdp(alpha, tau) == pytest.approx(
        steps * gaussian_divergence(alpha, 2.0 * tau / n, sigma)
    )


def _laplace_renyi_numeric(alpha: float, scale: float, shift: float) -> float:
    p, q = stats.laplace(0.0, scale), stats.laplace(shift, scale)

    def integrand(x: float) -> float:
        return math.exp(alpha * p.logpdf(x) + (1 - alpha) * q.logpdf(x))

    val, _ = integrate.quad(integrand, -60, 60, points=[0.0, shift], limit=200)
    return math.log(val) / (alpha - 1)


@pytest.mark.parametrize("alpha", [1.5, 4.0, 40.0])
def test_laplace_and_exponential_bound_true_divergence(alpha):
    lap = table1.laplace(epsilon=0.8, lipschitz=1.0, sensitivity=2.0)
    true = _laplace_renyi_numeric(alpha, lap.noise, 2.0)
    assert true <= lap.rdp(alpha) + 1e-12
    assert lap.rdp(math.inf) == 0.8  # pure DP: α = ∞ allowed
    assert lap.srdp(alpha, 3.0) == pytest.approx(0.8 * 3.0 / 2.0)
    assert _laplace_renyi_numeric(alpha, lap.noise, 3.0) <= lap.srdp(alpha, 3.0) + 1e-12
    ex = table1.exponential(epsilon=0.8, lipschitz=0.5, sensitivity=2.0)
    assert ex.rdp(alpha) == 0.8 and ex.srdp(alpha, 4.0) == pytest.approx(0.8)
    assert ex.noise == pytest.approx(0.8 / 4.0)


def test_dp_sgd_sampling_range_and_values():
    m = table1.dp_sgd_sampling(epsilon=1.0, n=1000, steps=2_000_000, smoothness=1.25, gamma_pw=3.0)
    assert m.noise_multiplier == pytest.approx(2.0)  # sqrt(2cT)/(εn)
    lo, hi = m.alpha_range()
    assert lo == table1.SGD_SAMP_MIN_ORDER == 3.25 and m.low_inclusive
    assert hi == pytest.approx(min(math.sqrt(2e6), 4 * math.log(500)))
    assert m.rdp(24.0) == pytest.approx(24.0**2 / 2)
    assert m.rdp(3.25) == pytest.approx(3.25**2 / 2)  # the lower end itself is admissible
    assert m.srdp(30.0, 2.0) == pytest.approx(30 * 1.5625 * 4 * 9 / 2)  # SRDP holds for every α
    with pytest.raises(ValueError, match="outside the range"):
        m.rdp(25.0)
    weak = table1.dp_sgd_sampling(epsilon=1.0, n=1000, steps=1000)  # z < 1: Abadi's lemma unusable
    with pytest.raises(ValueError, match="noise multiplier"):
        weak.rdp(1.5)
    assert np.isinf(weak.rdp_or_inf(np.array([1.5]))).all()
    with pytest.raises(ValueError, match="gamma_pw"):
        table1.dp_sgd_sampling(epsilon=1.0, n=10, steps=100, gamma_pw=11)


def test_dp_sgd_sampling_refuses_small_orders():
    # Reviewer's setting n = 1000, T = 8e6, ε = 2 (z = 2): the true RDP at α = 1.5 is >= 6.06 but
    # α²ε²/2 = 4.5, so orders below the verified range must raise (old range: any α > 1).
    m = table1.dp_sgd_sampling(epsilon=2.0, n=1000, steps=8_000_000)
    assert m.noise_multiplier == pytest.approx(2.0)
    for alpha in (1.5, 2.0, 3.0, 3.2):
        with pytest.raises(ValueError, match="outside the range"):
            m.rdp(alpha)
    assert np.isinf(m.rdp_or_inf(np.array([1.5, 3.0]))).all()
    assert m.srdp(1.5, 0.1) > 0  # SRDP (a Gaussian bound) is unaffected


def test_dp_sgd_sampling_needs_z_below_n_over_16():
    # Abadi et al.'s lemma needs q = 1/n < 1/(16 z): z = 7 > 100/16 leaves no admissible order.
    eps = math.sqrt(2 * 100) / (7.0 * 100)
    m = table1.dp_sgd_sampling(epsilon=eps, n=100, steps=100)
    assert m.noise_multiplier == pytest.approx(7.0)
    with pytest.raises(ValueError, match="n/16"):
        m.rdp(4.0)
    # z = 6 < 6.25
    ok = table1.dp_sgd_sampling(epsilon=math.sqrt(2 * 100) / (6.0 * 100), n=100, steps=100)
    assert ok.rdp(4.0) == pytest.approx(8 * ok.epsilon**2)


def test_dp_sgd_sampling_lower_order_against_dp_accounting():
    # dp-accounting's RDP bound for this algorithm (batch-1 sampling without replacement,
    # replace-one, multiplier z = σ/L) depends on (n, z) only. Worst case of our sweep: n = 20,
    # z = 1.2 — the table value is below it at α = 3 (why the lower end is 3.25, not 3) and above
    # it from 3.25 on. Same for the other settings at the lower end and a few orders above it.
    import dp_accounting
    from dp_accounting.privacy_accountant import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    def accountant_rdp(n, z, orders):
        acc = RdpAccountant(
            orders=list(orders), neighboring_relation=NeighboringRelation.REPLACE_ONE
        )
        acc.compose(
            dp_accounting.SampledWithoutReplacementDpEvent(n, 1, dp_accounting.GaussianDpEvent(z))
        )
        return np.array(acc._rdp)  # T = 1: both sides scale linearly in T

    for n, z in ((20, 1.2), (1000, 2.0), (1000, 1.0), (10_000, 5.0)):
        m = table1.dp_sgd_sampling(epsilon=math.sqrt(2.0) / (z * n), n=n, steps=1)
        lo, hi = m.alpha_range()
        orders = np.unique(np.clip([lo, 3.5, 4.0, 6.0, 10.0, hi], lo, hi))
        assert np.all(m.rdp(orders) >= accountant_rdp(n, z, orders)), (n, z)
    worst = table1.dp_sgd_sampling(
        epsilon=math.sqrt(2.0) / (1.2 * 20), n=20, steps=1, enforce_range=False
    )
    assert worst.rdp(3.0) < accountant_rdp(20, 1.2, [3.0])[0]


def test_dp_sgd_iteration_constants_and_range():
    it = table1.dp_sgd_iteration(epsilon=0.05, n=1000, kappa=10, smoothness=2.0)
    sigma = math.sqrt(2 * math.log(1000) / 1000) * 8 / 0.05
    assert it.noise == pytest.approx(sigma)
    alpha_max = (1 + math.sqrt(1 + 2 * sigma**2)) / 2
    assert it.alpha_range()[1] == pytest.approx(alpha_max)
    assert it.rdp(alpha_max * 0.999) == pytest.approx(alpha_max * 0.999 * 0.0025 / 2)
    with pytest.raises(ValueError, match="outside the range"):
        it.rdp(alpha_max * 1.001)
    # Same range as dp.sgd_iter_max_order, but Theorem 14 is strict: the end itself is excluded.
    assert (
        it.alpha_range()[1] == dp.sgd_iter_max_order(it.noise, it.lipschitz)
        and not it.high_inclusive
    )
    with pytest.raises(ValueError, match="alpha <"):
        it.rdp(it.alpha_range()[1])
    # Thm 26: allowed
    dp.sgd_iter_linearized_rdp(it.alpha_range()[1], stddev=it.noise, lipschitz=1.0, n=1000)
    # Feldman et al. Thm 26 with this σ gives 4αL²log n/(nσ²) = αε²/32 ≤ αε²/2.
    assert 4 * 2.0 * math.log(1000) / (1000 * sigma**2) == pytest.approx(it.rdp(2.0) / 16)
    factor = 1000 * math.log(992) / (991 * math.log(1000))
    assert it.srdp(2.0, 0.5) == pytest.approx(2.0 * 0.0025 * 0.25 * 4.0 * factor / 2)
    # The τ-condition τμ·sqrt(2α(α−1)) < σ restricts SRDP but not RDP.
    big_tau = sigma / (2.0 * math.sqrt(2 * 2.0 * 1.0)) * 1.01
    it.rdp(2.0)
    with pytest.raises(ValueError):
        it.srdp(2.0, big_tau)
    with pytest.raises(ValueError, match="kappa"):
        table1.dp_sgd_iteration(epsilon=1.0, n=10, kappa=11)


def test_enforce_range_false_evaluates_formula_only():
    it = table1.dp_sgd_iteration(epsilon=1.0, n=1000, kappa=10, enforce_range=False)
    assert it.rdp(22.0) == pytest.approx(11.0)
    with pytest.raises(ValueError):
        table1.dp_sgd_iteration(epsilon=1.0, n=1000, kappa=10).rdp(22.0)


@pytest.mark.parametrize(
    "mech",
    [
        table1.gaussian(epsilon=1.0),
        table1.laplace(epsilon=1.0),
        table1.exponential(epsilon=1.0),
        table1.dp_gd(epsilon=1.0),
        table1.dp_sgd_sampling(epsilon=1.0, n=1000, steps=2_000_000),
        table1.dp_sgd_iteration(epsilon=0.01, n=1000, kappa=5),
    ],
    ids=lambda m: m.name,
)
def test_bad_input_raises(mech):
    for alpha in (1.0, 0.5, math.nan):
        with pytest.raises(ValueError, match="alpha"):
            mech.rdp(alpha)
    with pytest.raises(ValueError, match="tau"):
        mech.srdp(2.0, -0.1)
    with pytest.raises(ValueError, match="tau"):
        mech.srdp(2.0, math.inf)
    if not mech.pure:
        with pytest.raises(ValueError, match="alpha"):
            mech.rdp(math.inf)
    assert mech.srdp(1.5, 0.0) == 0.0 or mech.pure
    kwargs = {k: v for k, v in mech.params().items() if k != "mechanism"}
    with pytest.raises(ValueError, match="epsilon"):
        type(mech)(**(kwargs | {"epsilon": 0.0}))


def test_constants_validated():
    with pytest.raises(ValueError, match="lipschitz"):
        table1.gaussian(epsilon=1.0, lipschitz=0.0)
    with pytest.raises(ValueError, match="smoothness"):
        table1.dp_gd(epsilon=1.0, smoothness=-1.0)
    with pytest.raises(ValueError, match="epsilon"):
        table1.laplace(epsilon=math.inf)
    with pytest.raises(ValueError, match="n"):
        table1.dp_gd(epsilon=1.0).noise_std(0, 10)


@pytest.mark.parametrize(
    "n,coef,bound", [(10, 0.35276, 0.63246), (101, 0.13414, 0.19901), (1000, 0.044167, 0.063246)]
)
def test_remark1_coefficient_spec_11_1(n, coef, bound):
    value = table1.sgd_remark1_coefficient(n)
    assert value == pytest.approx(coef, rel=5e-5)
    assert 2 / math.sqrt(n) == pytest.approx(bound, rel=5e-5)
    # It is the paper's k = sqrt(2n−3) instance of min_k [(1/k²)(1−(k−1)/n) + (k−1)/n].
    k = math.sqrt(2 * n - 3)
    assert value == pytest.approx((1 / k**2) * (1 - (k - 1) / n) + (k - 1) / n, rel=1e-12)
    assert value <= bound
