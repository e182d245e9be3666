"""Table 2's comparison rows: the spec's §11.1 constants, every cell's printed formula and our
Eq.-43 derivation against the paper's value (spec §11.2), the DP-SGD-samp × PCA cell's rigorous
bound, and Theorem 7 / Proposition 8 (spec §11.5). The paper-side numbers are ``targets.csv``'s."""

from __future__ import annotations

import math

import pandas as pd

from dpprep.preprocess.privacy.meta import TABLE2_ALPHA_MIN
from dpprep.preprocess.privacy.theorem7 import (
    proposition8_failure_probability,
    proposition8_min_gap,
    theorem7,
)
from dpprep.preprocess.sensitivity import pca_covariance_perturbation, pca_rank_tau_constant
from experiments.results import Comparison


def _tolerance(value: float) -> float | None:
    """A tolerance column's entry, ``None`` where the target has none (an empty cell)."""
    return None if math.isnan(value) else float(value)


def _numeric(quantity: str, target, measured: float, **kwargs) -> Comparison:
    """``measured`` against a targets row (its value and tolerances)."""
    return Comparison.numeric(
        quantity,
        target.value,
        measured,
        rel_tol=_tolerance(target.rel_tol),
        abs_tol=_tolerance(target.abs_tol),
        **kwargs,
    )


def cell_targets(targets: pd.DataFrame) -> dict[tuple[str, str], float]:
    """The paper's value of each Table 2 cell (spec §11.2), keyed by (mechanism, pre-processing)."""
    cells = targets[targets["kind"] == "cell"]
    return {(r.mechanism, r.preprocessing): r.value for r in cells.itertuples()}


def constants_comparisons(targets: pd.DataFrame) -> list[Comparison]:
    """Spec §11.1 constants."""
    measured = {
        "4(3n+2)/(n-1) at n=101": pca_rank_tau_constant(101),
        "4(3n+2)/(n-1) at n=1000": pca_rank_tau_constant(1000),
        "2(3n+2)/(n-1) at n=101": 101 * pca_covariance_perturbation(101),
        "(2a-1)/(2(a-1)) at a=11": (2 * TABLE2_ALPHA_MIN - 1) / (2 * (TABLE2_ALPHA_MIN - 1)),
    }
    rows = targets[targets["kind"] == "constant"].itertuples()
    return [_numeric(r.quantity, r, measured[r.quantity]) for r in rows]


def cell_comparisons(frame: pd.DataFrame, targets: pd.DataFrame) -> list[Comparison]:
    """Each cell's printed formula against the paper's value, and our derivation against it (or,
    for DP-SGD-iter, where the paper rounds up, below the printed value)."""
    tolerance = {
        (r.mechanism, r.preprocessing): r.rel_tol
        for r in targets[targets["kind"] == "cell"].itertuples()
    }
    out = []
    for r in frame.itertuples():
        cell = f"{r.mechanism} × {r.preprocessing}"
        rel_tol = tolerance[(r.mechanism, r.preprocessing)]
        out.append(
            Comparison.numeric(
                f"Table 2 printed formula, {cell}",
                r.reference_value,
                r.printed_value,
                rel_tol=rel_tol,
            )
        )
        if r.mechanism == "dp_sgd_iteration":
            out.append(
                Comparison.claim(
                    f"Table 2 derived (Eq. 43) <= printed, {cell}",
                    f"printed {r.printed_value:.7g} upper-bounds the derivation",
                    f"derived {r.derived_eq43_value:.7g}",
                    r.derived_eq43_value <= r.printed_value,
                    note=(
                        "paper rounds 1.05→1.1 and log(n−κ+2)/(n−κ+1)→log(n−p)/(n−p); Thm-14 range"
                        " violated at ε=1"
                    ),
                )
            )
        else:
            out.append(
                Comparison.numeric(
                    f"Table 2 derived (Eq. 43 + Table 1), {cell}",
                    r.reference_value,
                    r.derived_eq43_value,
                    rel_tol=rel_tol,
                )
            )
    return out


def sgd_samp_comparisons(frame: pd.DataFrame) -> list[Comparison]:
    out = []
    assumptions = (
        "batch-1 uniform sampling (Poisson row: rate 1/n), z = 2, T = 2e6, n = 1000, L = μ = 1, PCA"
        " Δ∞ = n, Δ2 = 12.2/n; replace-one RDP from dp-accounting (Poisson:"
        " dpprep.preprocess.privacy.sgd_samp's proved bound), SRDP without amplification (every"
        " record moves ≤ Δ2; sgd_samp)"
    )
    for r in frame.itertuples():
        tag = f"dp_sgd_sampling × pca_rank, {r.sampling}"
        out.append(
            Comparison.info(
                f"Table 2 rigorous Eq. 43 at alpha=11, {tag}",
                f"{r.rigorous_eq43_value:.6g}",
                paper=f"{r.printed_value:.7g} (printed formula)",
                note=assumptions,
            )
        )
        out.append(
            Comparison.info(
                f"Table 2 rigorous exact Theorem 2 at alpha=11, {tag}",
                f"{r.rigorous_theorem2_value:.6g}",
                paper=f"{r.printed_value:.7g} (printed formula)",
                note=assumptions,
            )
        )
        out.append(
            Comparison.info(
                f"Table 2 rigorous (eps, delta=1e-5) of the pipeline, {tag}",
                f"{r.rigorous_epsilon:.5g} at alpha={r.rigorous_epsilon_alpha:.4g}",
                note="Lemma M over all α > 1 (overall_privacy)",
            )
        )
        out.append(
            Comparison.info(
                f"Table 2 printed cell / rigorous Theorem-2 RDP at alpha=11, {tag}",
                f"{r.printed_value / r.rigorous_theorem2_value:.4g}",
                note=(
                    f"ε(2α): Table 1 {r.table1_rdp_2alpha:.5g} vs replace-one"
                    f" {r.rigorous_rdp_2alpha:.5g}; ε̃(2α, τ*): Table 1 {r.table1_srdp_2alpha:.5g}"
                    f" vs {r.rigorous_srdp_2alpha:.5g}. Ours is an upper bound: a printed cell"
                    " below it is not certified (not shown false)"
                ),
            )
        )
        out.append(
            Comparison.claim(
                f"Table 2 rigorous: exact Theorem 2 <= Eq. 43 at alpha=11, {tag}",
                "optimised Hölder exponents never lose to p = q = 2 with 1.05",
                f"{r.rigorous_theorem2_value:.6g} <= {r.rigorous_eq43_value:.6g}",
                r.rigorous_theorem2_value <= r.rigorous_eq43_value,
            )
        )
    return out


def theorem7_comparisons(targets: pd.DataFrame) -> list[Comparison]:
    """Spec §11.5: Theorem 7 (PTR + PCA-rank + DP-GD, the unconditional version of the PCA × DP-GD
    cell) and Proposition 8, μ = L = 1."""
    out = []
    settings = targets[targets["kind"] == "theorem7"]
    for (eps, delta, beta), refs in settings.groupby(["epsilon", "delta", "beta"], sort=False):
        eps, delta, beta = float(eps), float(delta), float(beta)
        r = theorem7(eps, delta, beta)
        tag = f"eps={eps}, delta={delta:g}, beta={beta}"
        measured = {
            "C": r.constant_c,
            "eps_hat": r.epsilon_hat,
            "eps_hat + eps": r.total_epsilon,
            "PTR threshold": r.ptr_threshold,
        }
        for ref in refs.itertuples():
            out.append(_numeric(f"Theorem 7 {ref.quantity}, {tag}", ref, measured[ref.quantity]))
        out.append(
            Comparison.claim(
                f"Theorem 7 delta condition, {tag}",
                "satisfied",
                f"bound {r.delta_bound:.4g}",
                r.delta_condition_holds,
            )
        )
        out.append(
            Comparison.info(
                f"Theorem 7 rigorous numeric eps (exact factor, all α > 1), {tag}",
                f"{r.numeric_total_epsilon:.5g} at alpha={r.numeric_alpha:.4g}",
                note=(
                    f"paper's Lemma-M alpha = {r.lemma_m_alpha:.4g} < 11, so its 1.05 does not"
                    " apply; the exact factor (2α−1)/(2(α−1)) with the doubled-noise RDP"
                    " αε²(1+τ²/4) gives a valid and smaller level"
                ),
            )
        )
    measured = {
        "Prop 8 p_fail (gap 0.5, beta 0.25, n 1e4, eps 1, delta 1e-5)": (
            proposition8_failure_probability(0.5, 0.25, 10_000, 1.0, 1e-5)
        ),
        "Prop 8 minimum gap (beta 0.25, n 1e4, eps 1, delta 1e-5)": proposition8_min_gap(
            0.25, 10_000, 1.0, 1e-5
        ),
    }
    for ref in targets[targets["kind"] == "proposition8"].itertuples():
        out.append(_numeric(ref.quantity, ref, measured[ref.quantity]))
    return out


def comparisons(frame: pd.DataFrame, sgd: pd.DataFrame, targets: pd.DataFrame) -> list[Comparison]:
    """Every comparison row of Table 2, in the report's order."""
    return (
        constants_comparisons(targets)
        + cell_comparisons(frame, targets)
        + sgd_samp_comparisons(sgd)
        + theorem7_comparisons(targets)
    )
