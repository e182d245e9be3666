"""Table 1's comparison rows: the cross-checks' verdicts (:mod:`.compute`), the paper-side
numbers of ``targets.csv`` (the Feldman ratio, Remark 1's coefficient and bound, spec §11.1)
against ours, and the finding that DP-SGD-samp's α²ε²/2 is not a valid replace-one bound."""

from __future__ import annotations

import json
import math

import pandas as pd

from dpprep.preprocess.privacy import table1
from experiments.results import Comparison

from .compute import Findings

SAMP_2L_NOTE = (
    "every gradient −L (a linear loss) and one record replaced by +L: each step releases N(0, σ²)"
    " against (1 − 1/n)·N(0, σ²) + (1/n)·N(2L, σ²), so the pair's exact RDP is T times that"
    " mixture's divergence (a Poisson-sampled Gaussian at q = 1/n, multiplier z/2; e.g. {example})."
    " 'violated': the pair exceeds α²ε²/2; 'undetermined': α²ε²/2 is at or above the pair's value"
    " but below dp-accounting's without-replacement RDP (an upper bound), which leaves room;"
    " 'proved': at or above that upper bound. So α²ε²/2 is not a valid replace-one bound;"
    " dpprep.preprocess.privacy.meta never uses it: overall_privacy/calibrate account DP-SGD-samp"
    " with the rigorous dpprep.preprocess.privacy.sgd_samp bound (Table 2 prints the paper's cell"
    " beside it)"
)
SAMP_NOTE = (
    "checked on the library's admissible range α ≥ 3.25 (plus its upper end); below it the paper's "
    "α²ε²/2 is refused — see the info line and table1_checks.csv"
)
# The cross-checks summarised as one claim each ("the Table-1 bound holds at every setting").
CLAIMED_CHECKS = (
    "dp_sgd_samp_rdp_geq_dp_accounting",
    "gaussian_rdp_vs_lemma_c",
    "dp_gd_rdp_vs_T_gaussian_steps",
    "laplace_rdp_geq_exact_divergence",
    "dp_sgd_iter_rdp_geq_feldman_thm26",
)


def sgd_iter_comparisons(findings: Findings, targets: pd.DataFrame) -> list[Comparison]:
    """DP-SGD-iter: Table 1's αε²/2 against Feldman et al.'s Thm 26 (log n and H_n forms)."""
    (target,) = targets[targets["quantity"] == "feldman_thm26_over_table1"].itertuples()
    return [
        Comparison.numeric(
            "DP-SGD-iter: Feldman Thm 26 RDP (log n form) / Table-1 RDP"
            " (1/16 with Hu et al. Thm 14's σ)",
            target.value,
            findings.feldman_log / findings.sgd_iter_rdp,
            rel_tol=target.rel_tol,
            note="Table 1's αε²/2 is a valid (16× loose) bound with Theorem 14's σ",
        ),
        Comparison.info(
            "DP-SGD-iter: dp.sgd_iter_linearized_rdp (Thm 26, exact sum H_n) / Table-1 RDP",
            f"{findings.feldman / findings.sgd_iter_rdp:.5f}",
            note=(
                "H_n/(16 log n) at n = 1000: log n understates the random-stopping sum; still far"
                " below the table value"
            ),
        ),
    ]


def below_range_comparison(frame: pd.DataFrame, findings: Findings) -> Comparison:
    """DP-SGD-samp below the library's admissible range: the raw formula against the pairs."""
    raw_frame = frame[frame["check"] == "dp_sgd_samp_raw_formula_below_range"]
    l_frame = frame[frame["check"] == "dp_sgd_samp_below_range_L_pair"]
    at_two = l_frame[
        [json.loads(p)["alpha"] == 2.0 and json.loads(p)["n"] == 1000 for p in l_frame["params"]]
    ].iloc[0]
    return Comparison.info(
        "DP-SGD-samp below the library's range (α < 3.25): the raw α²ε²/2 against realisable pairs",
        "; ".join(findings.below_pairs),
        note=(
            "dp-accounting's without-replacement RDP at z (an upper bound) exceeds the formula"
            f" at {int((~raw_frame['holds']).sum())} of {len(raw_frame)} of these orders, which"
            " proves nothing; the exact pair whose sampled gradient moves by L satisfies it at"
            f" every one (e.g. {at_two['independent_value']:.2f} vs"
            f" {at_two['table1_value']:.1f} at α = 2, n = 1000, z = 2), the replace-one pair"
            " (2L) violates it at every one. The library refuses orders below 3.25 either way;"
            " Table 2 / Eq. 43 use 2α ≥ 22."
        ),
    )


def replace_one_comparisons(findings: Findings) -> list[Comparison]:
    """The replace-one (2L) pair's verdicts, and its two independent evaluations agreeing."""
    verdicts, pair_checks = findings.verdicts, findings.pair_checks
    worst = max(pair_checks, key=lambda c: abs(c[1] / c[0] - 1))
    return [
        Comparison.claim(
            "Table 1 DP-SGD-samp α²ε²/2 under replace-one (a sampled gradient moves by 2L): a"
            " realisable pair",
            "Table-1 bound holds",
            f"violated at {verdicts['violated']} of {sum(verdicts.values())} (setting, α) points, "
            f"{verdicts['undetermined']} undetermined, {verdicts['holds']} proved",
            verdicts["violated"] == 0,
            note=SAMP_2L_NOTE.format(example=findings.first_violation),
        ),
        Comparison.numeric(
            "the 2L pair's RDP, quadrature vs dp-accounting's Poisson-sampled Gaussian (worst of "
            f"{len(pair_checks)} points: n={worst[3]}, z={worst[4]:.3g}, α={worst[2]:.4g})",
            worst[0],
            worst[1],
            rel_tol=1e-4,
            note=(
                "two independent evaluations of the same divergence (quadrature of both directions,"
                " the larger; Mironov, Talwar & Zhang's series); fractional orders differ in the"
                " 5th digit at most"
            ),
        ),
    ]


def remark1_comparisons(targets: pd.DataFrame) -> list[Comparison]:
    """Remark 1's coefficient and its 2/√n bound at spec §11.1's n."""
    out = []
    coefficients = targets[targets["quantity"] == "remark1_coefficient"]
    bounds = targets[targets["quantity"] == "remark1_bound"].set_index("n")
    for coef in coefficients.itertuples():
        n, bound = int(coef.n), bounds.loc[coef.n]
        out.append(
            Comparison.numeric(
                f"Remark-1 coefficient, n={n}",
                coef.value,
                table1.sgd_remark1_coefficient(n),
                rel_tol=coef.rel_tol,
            )
        )
        out.append(
            Comparison.numeric(
                f"Remark-1 bound 2/sqrt(n), n={n}",
                bound["value"],
                2 / math.sqrt(n),
                rel_tol=bound["rel_tol"],
            )
        )
        out.append(
            Comparison.claim(
                f"Remark-1 coefficient <= 2/sqrt(n), n={n}",
                "holds",
                f"{table1.sgd_remark1_coefficient(n):.6g}",
                table1.sgd_remark1_coefficient(n) <= 2 / math.sqrt(n),
            )
        )
    return out


def comparisons(frame: pd.DataFrame, findings: Findings, targets: pd.DataFrame) -> list[Comparison]:
    """Every comparison row of Table 1, in the report's order."""
    out = sgd_iter_comparisons(findings, targets)
    out.append(below_range_comparison(frame, findings))
    for check, group in frame[frame["check"].isin(list(CLAIMED_CHECKS))].groupby(
        "check", sort=False
    ):
        out.append(
            Comparison.claim(
                f"Table 1 cross-check: {check}",
                "Table-1 bound holds",
                f"{int(group['holds'].sum())}/{len(group)} settings",
                bool(group["holds"].all()),
                note=SAMP_NOTE if check.startswith("dp_sgd_samp") else "",
            )
        )
    out += replace_one_comparisons(findings)
    out += remark1_comparisons(targets)
    return out
