"""Hu, Sanyal, Schölkopf (2024) Table 1: RDP and Smooth-RDP of six mechanisms.

Writes the symbolic table (with the spec §10 corrections applied and flagged) as ``table1.md`` and
``table1.tex``, and a CSV of independent cross-checks of the implemented bounds
(``table1_checks.csv``): each Table-1 RDP value of :mod:`dpprep.preprocess.privacy.table1` against a
value
derived from the mechanism's own noise scale (Gaussian divergence, Lemma C; exact Laplace Rényi
divergence; Feldman et al.'s Thm 26 for DP-SGD-iter), plus the Remark-1 coefficient of spec §11.1.
Every profile does the same (cheap, closed-form) work.
"""

from __future__ import annotations

import json
import math

import pandas as pd

import dp_accounting
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import RdpAccountant

from dpprep.preprocess.privacy import table1
from dpprep.accounting.dp import sgd_iter_rdp
from dpprep.preprocess.privacy.renyi import gaussian_divergence, mixture_gaussian_divergence
from experiments.results import (
    Comparison,
    atomic_write_text,
    config_json,
    provenance_json,
    write_csv,
)
from experiments import RunContext

COLUMNS = ("mechanism", "assumptions", "rdp", "srdp", "range", "note")
HEADERS = (
    "Mechanism",
    "Assumptions",
    "RDP ε(α)",
    "SRDP ε̃(α, τ)",
    "Valid orders",
    "Correction vs. printed",
)
TEX_HEADERS = (
    "Mechanism",
    "Assumptions",
    r"RDP $\varepsilon(\alpha)$",
    r"SRDP $\tilde\varepsilon(\alpha,\tau)$",
    "Orders",
    "Note",
)

# DP-SGD-samp cross-check settings (n, T, ε), z = sqrt(2T)/(εn) ≥ 1; the last is the worst case
# of our (n, z) sweep (n = 20, z = 1.2). Orders: the admissible range (from SGD_SAMP_MIN_ORDER)
# is checked in full; the raw formula below it is reported for information.
SGD_SAMP_SETTINGS = ((1000, 2_000_000, 1.0), (1000, 200_000, 0.3), (20, 100, math.sqrt(200) / 24))
SGD_SAMP_ORDERS = (3.25, 3.5, 4.0, 8.0, 16.0, 24.0)
SGD_SAMP_RAW_ORDERS = (1.25, 1.5, 2.0, 2.5, 3.0)

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

# §11.1: Remark-1 coefficient 1/(2n−3) + (2n−4)(sqrt(2n−3)−1)/(n(2n−3)) and its 2/√n bound.
REMARK1_SPEC = {10: (0.35276, 0.63246), 101: (0.13414, 0.19901), 1000: (0.044167, 0.063246)}


def laplace_renyi(alpha: float, scale_over_sensitivity: float) -> float:
    """Exact D_α(Lap(0, b) || Lap(Δ, b)) with λ = b/Δ (Mironov 2017, Table II)."""
    a, lam = alpha, scale_over_sensitivity
    inner = a / (2 * a - 1) * math.exp((a - 1) / lam) + (a - 1) / (2 * a - 1) * math.exp(-a / lam)
    return math.log(inner) / (a - 1)


def markdown_table() -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in table1.TABLE1_ROWS:
        lines.append("| " + " | ".join(row[c][0].replace("|", "\\|") for c in COLUMNS) + " |")
    return (
        "# Table 1 (Hu, Sanyal, Schölkopf 2024): RDP and Smooth RDP of six mechanisms\n\n"
        "ε is the mechanism's own privacy parameter (noise level); τ an L12 distance budget; "
        "corrections of the printed table follow spec §10.\n\n" + "\n".join(lines) + "\n"
    )


def latex_table() -> str:
    body = [" & ".join(row[c][1] for c in COLUMNS) + r" \\" for row in table1.TABLE1_ROWS]
    return (
        "\\begin{tabular}{llllll}\n\\toprule\n"
        + " & ".join(TEX_HEADERS)
        + " \\\\\n\\midrule\n"
        + "\n".join(body)
        + "\n\\bottomrule\n\\end{tabular}\n"
    )


def cross_checks() -> tuple[pd.DataFrame, list[Comparison]]:
    rows, comparisons = [], []
    config = config_json({"check": "table1"})
    versions = provenance_json()

    def add(
        check: str, table_value: float, independent: float, relation: str, holds: bool, params: dict
    ) -> None:
        rows.append(
            {
                "check": check,
                "table1_value": table_value,
                "independent_value": independent,
                "relation": relation,
                "holds": holds,
                "params": config_json(params),
                "config": config,
                "versions": versions,
            }
        )

    for eps in (0.5, 1.0, 2.0):
        for alpha in (2.0, 11.0):
            g = table1.gaussian(epsilon=eps, sensitivity=1.0)
            indep = gaussian_divergence(alpha, 1.0, g.noise)
            val = g.rdp(alpha)
            add(
                "gaussian_rdp_vs_lemma_c",
                val,
                indep,
                "==",
                math.isclose(val, indep, rel_tol=1e-12),
                {"eps": eps, "alpha": alpha},
            )
            gd = table1.dp_gd(epsilon=eps, lipschitz=1.0)
            n, steps = 1000, 50
            indep = steps * gaussian_divergence(alpha, 2.0 / n, gd.noise_std(n, steps))
            val = gd.rdp(alpha)
            add(
                "dp_gd_rdp_vs_T_gaussian_steps",
                val,
                indep,
                "==",
                math.isclose(val, indep, rel_tol=1e-12),
                {"eps": eps, "alpha": alpha, "n": n, "T": steps},
            )
            lap = table1.laplace(epsilon=eps)
            indep = laplace_renyi(alpha, lap.noise)
            add(
                "laplace_rdp_geq_exact_divergence",
                lap.rdp(alpha),
                indep,
                ">=",
                lap.rdp(alpha) >= indep,
                {"eps": eps, "alpha": alpha},
            )
    # DP-SGD-iter: Feldman et al. Thm 26 as stated, 4αL² log n/(nσ²), is αε²/32 with Theorem 14's σ
    # (spec §3); our dp.sgd_iter_rdp uses the exact random-stopping sum (H_n instead of log n).
    it = table1.dp_sgd_iteration(epsilon=0.05, n=1000, kappa=10)
    alpha = 2.0
    feldman_log = 4 * alpha * it.lipschitz**2 * math.log(it.n) / (it.n * it.noise**2)
    feldman = sgd_iter_rdp(alpha, noise_std=it.noise, lipschitz=it.lipschitz, n=it.n)
    add(
        "dp_sgd_iter_rdp_geq_feldman_thm26",
        it.rdp(alpha),
        feldman,
        ">=",
        it.rdp(alpha) >= feldman,
        {"eps": 0.05, "n": 1000, "alpha": alpha},
    )
    comparisons.append(
        Comparison.numeric(
            "DP-SGD-iter: Feldman Thm 26 RDP (log n form) / Table-1 RDP (spec §3 [DERIVED]: 1/16)",
            1 / 16,
            feldman_log / it.rdp(alpha),
            rel_tol=1e-9,
            note="Table 1's αε²/2 is a valid (16× loose) bound with Theorem 14's σ",
        )
    )
    comparisons.append(
        Comparison.info(
            "DP-SGD-iter: dp.sgd_iter_rdp (exact sum H_n) / Table-1 RDP",
            f"{feldman / it.rdp(alpha):.5f}",
            note=(
                "H_n/(16 log n) at n = 1000: log n understates the random-stopping sum; still far"
                " below the table value"
            ),
        )
    )
    # DP-SGD-samp: Table 1's α²ε²/2 against dp-accounting's RDP of the analysed algorithm (one index
    # sampled per step = sampling without replacement with batch 1, replace-one adjacency).
    below_pairs: list[str] = []
    pair_checks: list[tuple[float, float, float, int, float]] = []
    for n, steps, eps in SGD_SAMP_SETTINGS:
        mech = table1.dp_sgd_sampling(epsilon=eps, n=n, steps=steps)
        # formula only
        raw = table1.dp_sgd_sampling(epsilon=eps, n=n, steps=steps, enforce_range=False)
        lo, hi = mech.alpha_range()
        admissible = sorted({o for o in SGD_SAMP_ORDERS if lo <= o <= hi} | {lo, hi})
        below = [o for o in SGD_SAMP_RAW_ORDERS if o < lo]
        orders = admissible + below
        accountant = RdpAccountant(
            orders=orders, neighboring_relation=NeighboringRelation.REPLACE_ONE
        )
        event = dp_accounting.SampledWithoutReplacementDpEvent(
            n, 1, dp_accounting.GaussianDpEvent(mech.noise_multiplier)
        )
        accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
        values = dict(zip(orders, accountant._rdp))  # RDP per order (no public getter)
        params = {"n": n, "T": steps, "eps": eps, "z": mech.noise_multiplier}
        for order in admissible:
            ok = bool(mech.rdp(order) >= values[order])
            add(
                "dp_sgd_samp_rdp_geq_dp_accounting",
                mech.rdp(order),
                float(values[order]),
                ">=",
                ok,
                params | {"alpha": order},
            )
        # Below the range dp-accounting's value (an upper bound) exceeds the formula, which proves
        # nothing: the realisable pairs decide (a sampled gradient moving by L, and by 2L).
        pair_l, pair_2l = [], []
        for order in below:
            by_l = steps * max(mixture_gaussian_divergence(order, 1 / n, 1 / mech.noise_multiplier))
            by_2l = steps * max(
                mixture_gaussian_divergence(order, 1 / n, 2 / mech.noise_multiplier)
            )
            pair_l += [] if raw.rdp(order) >= by_l else [order]
            pair_2l += [] if raw.rdp(order) >= by_2l else [order]
            add(
                "dp_sgd_samp_raw_formula_below_range",
                raw.rdp(order),
                float(values[order]),
                ">= (an upper bound)",
                bool(raw.rdp(order) >= values[order]),
                params | {"alpha": order},
            )
            add(
                "dp_sgd_samp_below_range_L_pair",
                raw.rdp(order),
                by_l,
                ">= (realisable pair: a lower bound)",
                raw.rdp(order) >= by_l,
                params | {"alpha": order, "shift": "L (z)"},
            )
            add(
                "dp_sgd_samp_below_range_2L_pair",
                raw.rdp(order),
                by_2l,
                ">= (realisable pair: a lower bound)",
                raw.rdp(order) >= by_2l,
                params | {"alpha": order, "shift": "2L (z/2)"},
            )
        below_pairs.append(
            f"n={n}, z={mech.noise_multiplier:.3g}: shift L violates it at {len(pair_l)} of"
            f" {len(below)} orders, shift 2L at {len(pair_2l)} of {len(below)}"
        )
    # Under replace-one a sampled gradient moves by up to 2L. dp-accounting's without-replacement
    # RDP
    # at z/2 is an upper bound, so the paper's value falling below it proves nothing; a realisable
    # pair does: every gradient −L (a linear loss) and one record replaced by +L. Each step's output
    # is then N(0, σ²) against (1 − 1/n)·N(0, σ²) + (1/n)·N(2L, σ²) whatever the iterate, so the
    # pair's exact RDP is T times the mixture's divergence (by quadrature, cross-checked with
    # dp-accounting's Poisson-sampled Gaussian, which computes the same pair's larger direction).
    verdicts = {"violated": 0, "undetermined": 0, "holds": 0}
    first_violation = ""
    for n, steps, eps in SGD_SAMP_SETTINGS:
        mech = table1.dp_sgd_sampling(epsilon=eps, n=n, steps=steps)
        lo, hi = mech.alpha_range()
        orders = sorted({o for o in SGD_SAMP_ORDERS if lo <= o <= hi} | {lo, hi})
        upper = RdpAccountant(orders=orders, neighboring_relation=NeighboringRelation.REPLACE_ONE)
        upper.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.SampledWithoutReplacementDpEvent(
                    n, 1, dp_accounting.GaussianDpEvent(mech.noise_multiplier / 2)
                ),
                steps,
            )
        )
        series = RdpAccountant(
            orders=orders, neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE
        )
        series.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(
                    1 / n, dp_accounting.GaussianDpEvent(mech.noise_multiplier / 2)
                ),
                steps,
            )
        )
        params = {"n": n, "T": steps, "eps": eps, "z": mech.noise_multiplier, "shift": "2L (z/2)"}
        for order, bound, by_series in zip(orders, upper.rdp, series.rdp):
            pair = steps * max(mixture_gaussian_divergence(order, 1 / n, 2 / mech.noise_multiplier))
            paper = mech.rdp(order)
            verdict = "violated" if paper < pair else "holds" if paper >= bound else "undetermined"
            verdicts[verdict] += 1
            if verdict == "violated" and not first_violation:
                first_violation = (
                    f"{pair:.4g} > {paper:.4g} at n = {n}, z = {mech.noise_multiplier:.3g}, α ="
                    f" {order:.4g}"
                )
            add(
                "dp_sgd_samp_replace_one_2L_pair",
                paper,
                pair,
                ">= (realisable pair: a lower bound)",
                paper >= pair,
                params
                | {
                    "alpha": order,
                    "dp_accounting_upper_bound": float(bound),
                    "dp_accounting_poisson_pair": float(by_series),
                    "verdict": verdict,
                },
            )
            pair_checks.append((float(by_series), pair, order, n, mech.noise_multiplier))
    frame = pd.DataFrame(rows)
    raw_frame = frame[frame["check"] == "dp_sgd_samp_raw_formula_below_range"]
    l_frame = frame[frame["check"] == "dp_sgd_samp_below_range_L_pair"]
    at_two = l_frame[
        [json.loads(p)["alpha"] == 2.0 and json.loads(p)["n"] == 1000 for p in l_frame["params"]]
    ].iloc[0]
    comparisons.append(
        Comparison.info(
            "DP-SGD-samp below the library's range (α < 3.25): the raw α²ε²/2 against realisable"
            " pairs",
            "; ".join(below_pairs),
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
    )
    for check, group in frame[
        frame["check"].isin(
            [
                "dp_sgd_samp_rdp_geq_dp_accounting",
                "gaussian_rdp_vs_lemma_c",
                "dp_gd_rdp_vs_T_gaussian_steps",
                "laplace_rdp_geq_exact_divergence",
                "dp_sgd_iter_rdp_geq_feldman_thm26",
            ]
        )
    ].groupby("check", sort=False):
        comparisons.append(
            Comparison.claim(
                f"Table 1 cross-check: {check}",
                "Table-1 bound holds",
                f"{int(group['holds'].sum())}/{len(group)} settings",
                bool(group["holds"].all()),
                note=SAMP_NOTE if check.startswith("dp_sgd_samp") else "",
            )
        )
    comparisons.append(
        Comparison.claim(
            "Table 1 DP-SGD-samp α²ε²/2 under replace-one (a sampled gradient moves by 2L): a"
            " realisable pair",
            "Table-1 bound holds",
            f"violated at {verdicts['violated']} of {sum(verdicts.values())} (setting, α) points, "
            f"{verdicts['undetermined']} undetermined, {verdicts['holds']} proved",
            verdicts["violated"] == 0,
            note=SAMP_2L_NOTE.format(example=first_violation),
        )
    )
    worst = max(pair_checks, key=lambda c: abs(c[1] / c[0] - 1))
    comparisons.append(
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
        )
    )
    for n, (coef_spec, bound_spec) in REMARK1_SPEC.items():
        comparisons.append(
            Comparison.numeric(
                f"Remark-1 coefficient, n={n}",
                coef_spec,
                table1.sgd_remark1_coefficient(n),
                rel_tol=5e-5,
            )
        )
        comparisons.append(
            Comparison.numeric(
                f"Remark-1 bound 2/sqrt(n), n={n}", bound_spec, 2 / math.sqrt(n), rel_tol=5e-5
            )
        )
        comparisons.append(
            Comparison.claim(
                f"Remark-1 coefficient <= 2/sqrt(n), n={n}",
                "holds",
                f"{table1.sgd_remark1_coefficient(n):.6g}",
                table1.sgd_remark1_coefficient(n) <= 2 / math.sqrt(n),
            )
        )
    return frame, comparisons


def run(ctx: RunContext) -> list[Comparison]:
    atomic_write_text(ctx.out_dir / "table1.md", markdown_table())
    atomic_write_text(ctx.out_dir / "table1.tex", latex_table())
    frame, comparisons = cross_checks()
    write_csv(frame, ctx.out_dir / "table1_checks.csv")
    ctx.progress(f"wrote table1.md/.tex and {len(frame)} cross-checks")
    return comparisons
