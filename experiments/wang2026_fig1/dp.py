"""What DP Figure 1's runs carry: the paper's ε is nominal (σ² = C·K_δ/ε²), so the report opens
with each panel's guarantee (mostly none) and, for the LR panels, the (ε, δ) that dp-accounting
certifies for the Standard run (spec §5.1's optional diagnostic)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from dpprep.corrdp import noise, sgd
from experiments.results import Comparison

from .config import ALL_PANELS, Panel


def dp_diagnostic(records: list[dict], epsilons: Sequence[float]) -> pd.DataFrame:
    """Optional diagnostic (spec §5.1): the (ε, δ)-DP that dp-accounting certifies for the Standard
    run of the LR panels (full-batch Gaussian steps, replace-one: sensitivity 2L/n of the mean,
    PLD), where ``‖∇ℓ‖ ≤ ‖x‖ ≤ L``. ``dp_epsilon`` uses a bound ``L`` over the encoded domain
    (:func:`dpprep.corrdp.data.domain_bound`; Adult's √10) and is a guarantee; where no domain bound
    exists (Credit under
    StandardScaler) it is NaN. ``epsilon_at_data_max`` uses the data's ``max‖x‖`` instead: a DP
    statement only for neighbours whose replacement row is no longer than that, i.e. none in
    general.
    The other panels have no per-example bound at all (least squares; networks clip only the batch
    mean), see :func:`dp_status`. The paper's ε stays nominal."""
    rows = []
    for rec in records:
        panel = ALL_PANELS.get(rec["panel"])
        if panel is None or panel.model != "logistic":
            continue
        domain = rec["domain_lipschitz"]
        for eps in epsilons:
            sigma = math.sqrt(noise.base_variance(eps, panel.delta, rec["C"]))

            def accounted(lipschitz: float) -> float:
                return sgd.standard_dp_epsilon(
                    sigma, n=rec["n"], steps=rec["steps"], lipschitz=lipschitz, delta=panel.delta
                )

            rows.append(
                {
                    "panel": panel.key,
                    "dataset": panel.dataset,
                    "C": rec["C"],
                    "nominal_epsilon": eps,
                    "delta": panel.delta,
                    "sigma_on_mean": sigma,
                    "lipschitz_domain": domain,
                    "domain_basis": rec["domain_basis"],
                    "lipschitz_data_max": rec["lipschitz"],
                    "n": rec["n"],
                    "steps": rec["steps"],
                    "dp_epsilon": math.nan if domain is None else accounted(domain),
                    "epsilon_at_data_max": accounted(rec["lipschitz"]),
                }
            )
    return pd.DataFrame(rows)


def dp_status(panel: Panel, record: dict) -> str:
    """What DP the panel's private runs carry (REPORT's disclosure row), from its protocol."""
    if panel.model in ("ridge", "ols"):
        return (
            "none: least-squares per-example gradients 2(θᵀx − y)x are unbounded and nothing is"
            " clipped (C_theory's L is the data's gradient bound at θ̂, a diagnostic)"
        )
    if not panel.is_glm:
        sigma = math.sqrt(noise.base_variance(1.0, panel.delta, record["C"]))
        return (
            f"none: only the {'minibatch' if panel.sampling != 'full' else 'full-batch'} mean"
            f" gradient is clipped (to {panel.l2_clip_norm:g}), not each example's, so one"
            f" record can move it by up to 2 × {panel.l2_clip_norm:g}, against noise std"
            f" {sigma:.2g} at nominal ε = 1 (C = {record['C']:.3g})"
        )
    if record["domain_lipschitz"] is not None:
        return (
            "Standard only: (ε', δ)-DP by dp-accounting with the domain bound L ="
            f" {record['domain_basis']} (rows '(ε, δ)-DP of the Standard run' below); Semi and"
            " CorrDP are not accounted here"
        )
    return (
        f"none a priori ({record['domain_basis']}); the diagnostic rows below use the data's max‖x‖"
        f" = {record['lipschitz']:.3g}, which bounds only the rows present, not a neighbour's"
        " replacement"
    )


def disclosure_row(records: list[dict], primary: dict[str, float]) -> Comparison:
    """REPORT's first row of this experiment: :func:`dp_status` of each panel at its primary C."""
    first = {
        r["panel"]: r for r in records if np.isclose(r["C"], primary[r["panel"]])
    }  # each panel at its primary C
    return Comparison.info(
        "DP guarantee of each panel's private runs (the figure's ε is nominal: σ² = C·K_δ/ε²)",
        "; ".join(f"({k}) {dp_status(ALL_PANELS[k], first[k])}" for k in ALL_PANELS if k in first),
        note="no panel's ε axis is an accounted ε; only the (ε, δ) rows below are",
    )


def diagnostic_rows(diagnostic: pd.DataFrame) -> list[Comparison]:
    """Per LR panel and C, the accounted ε of the Standard run at each nominal ε
    (:func:`dp_diagnostic`): a guarantee with a domain bound, else only ε under the data's
    max‖x‖."""
    out = []
    for (key, c), d in diagnostic.groupby(["panel", "C"]):
        pairs = lambda col: "; ".join(  # noqa: E731
            f"nominal {e:g} → {v:.3g}" for e, v in zip(d["nominal_epsilon"], d[col])
        )
        data_max = f"L = max‖x‖ of the data = {d['lipschitz_data_max'].iloc[0]:.3g}"
        if d["lipschitz_domain"].notna().all():
            out.append(
                Comparison.info(
                    f"panel {key} C={c:.3g}: (ε, δ)-DP of the Standard run (diagnostic)",
                    pairs("dp_epsilon"),
                    note=(
                        "dp-accounting PLD, full-batch Gaussian, replace-one, domain bound L ="
                        f" {d['domain_basis'].iloc[0]} = {d['lipschitz_domain'].iloc[0]:.3g}, δ ="
                        f" {d['delta'].iloc[0]:g} (with {data_max}:"
                        f" {pairs('epsilon_at_data_max')}); the figure's ε is nominal"
                    ),
                )
            )
        else:
            out.append(
                Comparison.info(
                    f"panel {key} C={c:.3g}: no (ε, δ)-DP guarantee (no domain bound); ε if every"
                    f" record obeyed {data_max}",
                    pairs("epsilon_at_data_max"),
                    note=(
                        f"{d['domain_basis'].iloc[0]}: the data's max‖x‖ bounds only the rows"
                        " present, so this is no DP guarantee; dp-accounting PLD, full-batch"
                        f" Gaussian, replace-one, δ = {d['delta'].iloc[0]:g}"
                    ),
                )
            )
    return out
