"""Theorem 7 and Proposition 8 of Hu, Sanyal, Schölkopf (2024): privacy and utility constants of
Algorithm 1 (propose-test-release for PCA rank reduction + DP-GD). The algorithm itself lives
elsewhere; these are its closed-form guarantees (§5.2 of the paper, proofs in App. E).

The paper's closed form uses the constant 1.05, valid only for α ≥ 11, but its Lemma-M order
``α = 1 + sqrt(log(1/δ)/(1.05ε²C))`` is typically < 11 (3.7 at ε = 0.1, δ = 1e−5, β = 1,
μ = L = 1), where ``(2α−1)/(2(α−1)) > 1.05``. :func:`theorem7` therefore reports the paper's closed
form *and* a
numerically optimised, rigorous value: ``ε + min_{α>1} [(2α−1)/(2(α−1))·(ε_GD(2α) + ε̃_GD(2α, τ))
+ log(1/δ)/(α−1)]`` with the doubled noise (DP-GD at ε/2) and ``τ = 12.2/β`` (n ≥ 101).
"""

from __future__ import annotations

import dataclasses
import math

from dpprep.preprocess.privacy import table1
from dpprep.preprocess.privacy.meta import eq43
from dpprep.preprocess.privacy.renyi import rdp_to_dp
from dpprep.preprocess.sensitivity import pca_rank_tau_constant
from dpprep.validation import check_delta, check_epsilon, check_positive, check_positive_int

__all__ = ["Theorem7", "theorem7", "proposition8_failure_probability", "proposition8_min_gap"]

# τ*·δ_min^k of PCA rank reduction for every n ≥ 101 (= 12.2).
_PCA_CONSTANT = pca_rank_tau_constant(101)


@dataclasses.dataclass(frozen=True)
class Theorem7:
    """Theorem 7 at (ε, δ, β): Algorithm 1 is ``(total_epsilon, δ)``-DP (paper) — see module doc."""

    constant_c: float  # C = 1 + 12.2²μ²/(L²β²)
    delta_bound: float  # the theorem needs δ ≤ exp(−1.05 ε² C)
    delta_condition_holds: bool
    epsilon_hat: float  # 3ε sqrt(1.05 C log(1/δ))
    total_epsilon: float  # ε̂ + ε (paper's closed form)
    lemma_m_alpha: float  # 1 + sqrt(log(1/δ)/(1.05 ε² C)) — the order the proof uses
    ptr_threshold: float  # log(2/δ)/ε
    numeric_total_epsilon: (
        float  # ε + Lemma M over α > 1 with the exact Eq.-43 factor (rigorous for α < 11)
    )
    numeric_alpha: float


def theorem7(
    epsilon: float, delta: float, beta: float, *, lipschitz: float = 1.0, smoothness: float = 1.0
) -> Theorem7:
    """Theorem 7 constants for PTR parameter ``epsilon``, target ``delta`` and gap lower bound
    ``beta``."""
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_positive(beta, "beta")
    lip = check_positive(lipschitz, "lipschitz")
    mu = check_positive(smoothness, "smoothness")
    log_term = math.log(1.0 / delta)
    c = 1.0 + _PCA_CONSTANT**2 * mu**2 / (lip**2 * beta**2)
    bound = math.exp(-1.05 * eps**2 * c)
    eps_hat = 3.0 * eps * math.sqrt(1.05 * c * log_term)
    # Doubled σ (σ = 2L√T/(εn)) is DP-GD at ε/2; τ = 12.2/β for pairs whose gaps are both > β.
    mech = table1.dp_gd(epsilon=eps / 2.0, lipschitz=lip, smoothness=mu)
    tau = _PCA_CONSTANT / beta
    conv = rdp_to_dp(lambda a: eq43(mech, tau, a, constant="exact"), delta)  # type: ignore[arg-type, return-value]  # array in, array out
    return Theorem7(
        constant_c=c,
        delta_bound=bound,
        delta_condition_holds=delta <= bound,
        epsilon_hat=eps_hat,
        total_epsilon=eps_hat + eps,
        lemma_m_alpha=1.0 + math.sqrt(log_term / (1.05 * eps**2 * c)),
        ptr_threshold=math.log(2.0 / delta) / eps,
        numeric_total_epsilon=eps + conv.epsilon,
        numeric_alpha=conv.alpha,
    )


def proposition8_failure_probability(
    gap: float, beta: float, n: int, epsilon: float, delta: float
) -> float:
    """Prop. 8: ``p_fail = exp(−(δ_k(S) − β)·n·ε/12.2) / (2δ)`` (probability that PTR returns ⊥)."""
    gap = check_positive(gap, "gap")
    beta = check_positive(beta, "beta")
    if gap <= beta:
        raise ValueError(f"gap must exceed beta, got gap={gap}, beta={beta}")
    n = check_positive_int(n, "n", minimum=101)
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    return math.exp(-(gap - beta) * n * eps / _PCA_CONSTANT) / (2.0 * delta)


def proposition8_min_gap(beta: float, n: int, epsilon: float, delta: float) -> float:
    """Prop. 8's validity condition: ``δ_k(S) ≥ β + 12.2 log(1/δ)/(nε)``."""
    beta = check_positive(beta, "beta")
    n = check_positive_int(n, "n", minimum=101)
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    return beta + _PCA_CONSTANT * math.log(1.0 / delta) / (n * eps)
