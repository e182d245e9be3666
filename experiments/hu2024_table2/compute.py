"""Table 2 evaluated: every defined cell at a point (printed formula, our Eq.-43 derivation,
exact Theorem 2, the cell's sensitivities), and the DP-SGD-samp × PCA cell's rigorous replace-one
bound at the same point (:mod:`dpprep.preprocess.privacy.sgd_samp`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from dpprep.preprocess.privacy import sgd_samp
from dpprep.preprocess.privacy import table2 as t2
from dpprep.preprocess.privacy.meta import eq43, overall_privacy, rigorous_mechanism, theorem2
from experiments.results import config_json, provenance_json

from .config import SGD_SAMP_DELTA


def numeric_frame(
    point: t2.Table2Point, reference: Mapping[tuple[str, str], float]
) -> pd.DataFrame:
    """Every defined cell at ``point``, beside ``reference``'s value for it (the paper's formula
    at the point of docs/papers/decisions.md, keyed by (mechanism, pre-processing))."""
    rows = []
    config, versions = config_json(point), provenance_json()
    for m in t2.MECHANISMS:
        for p in t2.PREPROCESSINGS:
            if not t2.cell_defined(m, p):
                continue
            sens = t2.table2_sensitivity(p, point)
            valid = t2.in_valid_range(m, p, point)
            mech = t2.table2_mechanism(m, p, point)
            exact = (
                float(theorem2(mech, sens.tau, point.alpha))
                if valid and not mech.pure
                else math.nan
            )
            rows.append(
                {
                    "mechanism": m,
                    "preprocessing": p,
                    "formula_printed": t2.PRINTED_MD[(m, p)],
                    "reference_value": reference.get((m, p), math.nan),
                    "printed_value": t2.printed_cell(m, p, point),
                    "derived_eq43_value": t2.derived_cell(m, p, point),
                    "exact_theorem2_value": exact,
                    "table1_assumptions_hold": valid,
                    "linf": sens.linf,
                    "l2": sens.l2,
                    "tau": sens.tau,
                    "config": config,
                    "versions": versions,
                }
            )
    return pd.DataFrame(rows)


def sgd_samp_rigorous_frame(point: t2.Table2Point) -> pd.DataFrame:
    """Rigorous RDP of the DP-SGD-samp × PCA cell at ``point``, beside the printed one: one
    uniform index per step, noise multiplier z = sqrt(2T)/(εn) = 2 (T =
    ``Table2Point.sgd_samp_steps``), RDP of batch-1 sampling under replace-one from dp-accounting
    (multiplier z/2), SRDP of spec §9.4 for PCA's hybrids (every record moves ≤ Δ2 = 12.2/n),
    combined by Eq. 43 at α = 11 and by exact Theorem 2; a Poisson-sampled variant (q = 1/n) for
    comparison."""
    cell = ("dp_sgd_sampling", "pca_rank")
    sens = t2.table2_sensitivity("pca_rank", point)
    table_mech = t2.table2_mechanism(*cell, point)
    a = point.alpha
    rows = []
    for sampling in ("without_replacement", "poisson"):
        mech = rigorous_mechanism(table_mech, sens)
        if sampling == "poisson":
            mech = sgd_samp.subsampled_sgd(
                noise_multiplier=mech.noise_multiplier,
                n=point.n,
                batch_size=1,
                steps=point.sgd_samp_steps,
                linf=sens.linf,
                sampling="poisson",
            )
        overall = overall_privacy(mech, sens, delta=SGD_SAMP_DELTA)
        rows.append(
            {
                "sampling": sampling,
                "alpha": a,
                "noise_multiplier": mech.noise_multiplier,
                "steps": mech.steps,
                "n": point.n,
                "tau": sens.tau,
                "printed_value": t2.printed_cell(*cell, point),
                "table1_rdp_2alpha": float(table_mech.rdp(2 * a)),
                "table1_srdp_2alpha": float(table_mech.srdp(2 * a, sens.tau)),
                "rigorous_rdp_2alpha": float(mech.rdp(2 * a)),
                "rigorous_srdp_2alpha": float(mech.srdp(2 * a, sens.tau)),
                "rigorous_eq43_value": float(eq43(mech, sens.tau, a)),
                "rigorous_theorem2_value": float(theorem2(mech, sens.tau, a)),
                "rigorous_epsilon": overall.epsilon,
                "rigorous_epsilon_alpha": overall.optimal_alpha,
                "delta": SGD_SAMP_DELTA,
                "config": config_json(point),
                "versions": provenance_json(),
            }
        )
    return pd.DataFrame(rows)
