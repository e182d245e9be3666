"""Rényi primitives and Lemma M (Hu et al. 2024, App. A) against closed forms and integration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpprep.preprocess.privacy import renyi


def test_lemma_m_pointwise():
    assert renyi.lemma_m(2.0, 3.0, 1e-3) == pytest.approx(2.0 + math.log(1000) / 2.0, rel=1e-15)
    out = renyi.lemma_m(np.array([1.0, 2.0]), np.array([2.0, 5.0]), 0.5)
    np.testing.assert_allclose(out, [1.0 + math.log(2), 2.0 + math.log(2) / 4])


def test_gaussian_lemma_m_closed_form_spec_11_3():
    # Spec §11.3: Gaussian ε = 1, δ = 1e-3: ε_DP = 1/2 + sqrt(2 ln 1000) = 4.2169 at α* = 4.7169.
    conv = renyi.rdp_to_dp(lambda a: a / 2.0, 1e-3)
    closed = 0.5 + math.sqrt(2 * math.log(1000))
    assert conv.epsilon == pytest.approx(closed, rel=1e-9)
    assert conv.epsilon == pytest.approx(4.2169, abs=5e-5)
    assert conv.alpha == pytest.approx(1 + math.sqrt(2 * math.log(1000)), rel=1e-4)
    assert conv.alpha == pytest.approx(4.7169, abs=5e-4)
    # Table-2 mode (α >= 11): 11.55 + ln(1000)/10 = 12.2408.
    t2 = renyi.rdp_to_dp(lambda a: 1.05 * a, 1e-3, alpha_min=11)
    assert t2.epsilon == pytest.approx(12.2408, abs=5e-5)
    assert t2.alpha == pytest.approx(11.0)


@pytest.mark.parametrize("slope", [1e-4, 0.02, 0.5, 7.0])
@pytest.mark.parametrize("delta", [1e-8, 1e-3, 0.2])
@pytest.mark.parametrize("alpha_min", [1.0, 11.0])
def test_numeric_conversion_matches_linear_closed_form(slope, delta, alpha_min):
    numeric = renyi.rdp_to_dp(lambda a: slope * a, delta, alpha_min=alpha_min)
    closed = renyi.rdp_to_dp_linear(slope, delta, alpha_min=alpha_min)
    assert numeric.epsilon == pytest.approx(closed.epsilon, rel=1e-8)
    # a grid minimum cannot undercut the true one
    assert numeric.epsilon >= closed.epsilon * (1 - 1e-12)


def test_discrete_orders_and_inadmissible_curve():
    orders = np.array([2.0, 4.0, 8.0])
    conv = renyi.rdp_to_dp(lambda a: a / 2.0, 1e-3, alphas=orders)
    expected = min(a / 2 + math.log(1000) / (a - 1) for a in orders)
    assert conv.epsilon == pytest.approx(expected)
    assert conv.alpha == 4.0
    with pytest.raises(renyi.NoAdmissibleOrder):
        renyi.rdp_to_dp(lambda a: np.full(np.shape(a), np.inf), 1e-3)
    # A curve admissible only below α = 3 is minimised inside that range.
    capped = renyi.rdp_to_dp(lambda a: np.where(a <= 3.0, a / 2.0, np.inf), 1e-3)
    assert capped.alpha == pytest.approx(3.0, rel=1e-3)


def test_gaussian_divergence_matches_numerical_integration():
    alpha, mu, sigma = 3.0, 0.7, 1.3
    p, q = stats.norm(mu, sigma), stats.norm(0.0, sigma)
    integral, _ = integrate.quad(lambda x: p.pdf(x) ** alpha * q.pdf(x) ** (1 - alpha), -30, 30)
    assert renyi.gaussian_divergence(alpha, mu, sigma) == pytest.approx(
        math.log(integral) / (alpha - 1), rel=1e-8
    )


@pytest.mark.parametrize("k", [1, 10, 101])
def test_group_privacy_numeric_matches_closed_form(k):
    numeric = renyi.rdp_to_dp(lambda a: renyi.gaussian_group_rdp(a, k, 1.0), 1e-3)
    assert numeric.epsilon == pytest.approx(renyi.gaussian_group_epsilon(k, 1.0, 1e-3), rel=1e-9)
    # Spec §11.4: k = 10 -> 87.169, k = 11 -> 101.386, k = 101 -> 5475.9.
    expected = {1: 4.2169, 10: 87.169, 101: 5475.9}[k]
    assert numeric.epsilon == pytest.approx(expected, rel=5e-5)


@pytest.mark.parametrize("bad", [1.0, 0.5, -2.0, math.nan])
def test_bad_orders_raise(bad):
    with pytest.raises(ValueError, match="alpha"):
        renyi.check_alpha(bad)
    with pytest.raises(ValueError):
        renyi.gaussian_divergence(bad, 1.0, 1.0)


def test_bad_delta_and_arguments_raise():
    for delta in (0.0, 1.0, -0.1, math.nan):
        with pytest.raises(ValueError, match="delta"):
            renyi.rdp_to_dp(lambda a: a, delta)
    with pytest.raises(ValueError, match="alpha"):
        renyi.check_alpha(math.inf)
    assert renyi.check_alpha(math.inf, allow_inf=True) == math.inf
    with pytest.raises(ValueError, match="epsilon"):
        renyi.gaussian_group_epsilon(3, 0.0, 1e-3)
    with pytest.raises(ValueError, match="sigma"):
        renyi.gaussian_divergence(2.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="empty order range"):
        renyi.rdp_to_dp(lambda a: a, 1e-3, alpha_min=20, alpha_max=11)


@pytest.mark.parametrize("alpha", [2.0, 3.0, 8.0, 3.25, 1.5])
@pytest.mark.parametrize(
    "q, shift", [(1e-3, 1.0), (0.05, 1.0 / 1.2), (0.05, 2.0 / 1.2), (0.5, 0.3)]
)
def test_mixture_divergence_matches_independent_evaluations(alpha, q, shift):
    """Quadrature of both directions against mpmath's 30-digit quadrature of the larger (forward)
    one, and at integer orders against dp-accounting's Poisson-sampled Gaussian (Mironov, Talwar &
    Zhang 2019's closed form). dp-accounting's series for fractional orders is not a reference:
    at α = 1.5 it overstates these divergences by up to 15 % (or returns inf)."""
    import mpmath
    import dp_accounting
    from dp_accounting.privacy_accountant import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    forward, backward = renyi.mixture_gaussian_divergence(alpha, q, shift)
    assert forward >= backward > 0
    with mpmath.workdps(30):
        moment = mpmath.quad(
            lambda x: (
                mpmath.npdf(x) * ((1 - q) + q * mpmath.exp(shift * x - shift**2 / 2)) ** alpha
            ),
            [-mpmath.inf, 0, shift, alpha * shift, mpmath.inf],
        )
        assert forward == pytest.approx(float(mpmath.log(moment) / (alpha - 1)), rel=1e-9)
    if float(alpha).is_integer():
        accountant = RdpAccountant(
            orders=[alpha], neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE
        )
        accountant.compose(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(1.0 / shift))
        )
        assert forward == pytest.approx(accountant.rdp[0], rel=1e-9)


def test_mixture_divergence_closed_forms_and_limits():
    # α = 2 forward: log(1 + q²(e^{μ²} − 1)); q = 1: the Gaussian pair both ways (Lemma C).
    assert renyi.mixture_gaussian_divergence(2.0, 0.01, 1.5)[0] == pytest.approx(
        math.log1p(1e-4 * math.expm1(2.25)), rel=1e-9
    )
    assert renyi.mixture_gaussian_divergence(3.0, 1.0, 0.7) == pytest.approx(
        (3 * 0.49 / 2,) * 2, rel=1e-9
    )
    # a large divergence stays finite (the integral is scaled) and matches the closed form at
    # integer α
    q, mu = 0.05, 2.0 / 1.2
    big = renyi.mixture_gaussian_divergence(27.0, q, mu)[0]
    from scipy.special import logsumexp

    closed = (
        logsumexp(
            [
                math.log(math.comb(27, k))
                + (27 - k) * math.log1p(-q)
                + k * math.log(q)
                + (k * k - k) * mu * mu / 2
                for k in range(28)
            ]
        )
        / 26
    )
    assert closed > 30 and big == pytest.approx(closed, rel=1e-9)
    with pytest.raises(ValueError, match="alpha"):
        renyi.mixture_gaussian_divergence(1.0, 0.1, 1.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        renyi.mixture_gaussian_divergence(2.0, 1.5, 1.0)
