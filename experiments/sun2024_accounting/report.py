"""Sun, Suresh & Menon (2024), DPSGD-F accounting: the comparison rows C1–C4, each measured
number next to the paper's (``targets.csv``, looked up by check, case and quantity)."""

from __future__ import annotations

import pandas as pd

from experiments.results import Comparison

from .config import COST_CASE, COST_EPSILON

# the noise multipliers of spec §5.4's table, as columns of z_table.csv and quantities of C2
Z_COLUMNS = ("z_pld", "z_pld_F0.02", "z_pld_F0.05", "z_rdp")


def target(targets: pd.DataFrame, check: str, quantity: str, **keys) -> pd.Series:
    """The one row of ``targets`` for ``check``'s ``quantity`` at ``keys`` (None: a blank cell)."""
    rows = targets[(targets.check == check) & (targets.quantity == quantity)]
    for column, value in keys.items():
        rows = rows[rows[column].isna() if value is None else rows[column] == value]
    if len(rows) != 1:
        raise LookupError(f"{len(rows)} targets for {check} {quantity} at {keys}")
    return rows.iloc[0]


def sigma_f(measured: list[dict], targets: pd.DataFrame) -> tuple[pd.DataFrame, list[Comparison]]:
    """C1: ``sigma_f.csv`` (σ_F beside the paper's) and its rows."""
    sig = pd.DataFrame(
        [{**r, "paper": target(targets, "C1", "sigma_F", eps_F=r["eps_F"]).paper} for r in measured]
    )
    tolerance = [target(targets, "C1", "sigma_F", eps_F=f).tolerance for f in sig.eps_F]
    comparisons = [
        Comparison.numeric(
            f"C1 sigma_F(eps_F={r.eps_F:g}, 1e-5)", r.paper, r.sigma_F, rel_tol=tol, digits=5
        )
        for (_, r), tol in zip(sig.iterrows(), tolerance)
    ]
    return sig, comparisons


def z_row(case: tuple, rec: dict, targets: pd.DataFrame) -> tuple[dict, list[Comparison]]:
    """C2 / C3 for one row (n, B, E, ε) of the z table: the unit's record with the paper's
    multipliers beside it, and its rows (T only where it differs)."""
    n, b, e, eps = case
    key = {"n": n, "B": b, "E": e, "epsilon": eps}
    paper = {q: target(targets, "C2", q, **key) for q in ("T", *Z_COLUMNS)}
    rec = dict(rec)
    rec.update({f"paper_{q}": paper[q].paper for q in Z_COLUMNS})
    comparisons = []
    label = f"n={n} B={b} E={e} eps={eps:g}"
    t = int(paper["T"].paper)
    if rec["T"] != t:
        comparisons.append(
            Comparison.numeric(f"C2 T ({label})", t, rec["T"], abs_tol=paper["T"].tolerance)
        )
    for col in Z_COLUMNS:
        comparisons.append(
            Comparison.numeric(
                f"C2 {col} ({label})",
                paper[col].paper,
                rec[col],
                rel_tol=paper[col].tolerance,
                digits=5,
            )
        )
    ratio = rec["z_pld"] / rec["z_rdp"]
    low = target(targets, "C3", "pld_rdp_ratio_min").paper
    high = target(targets, "C3", "pld_rdp_ratio_max").paper
    comparisons.append(
        Comparison.claim(
            f"C3 PLD/RDP ratio ({label})", f"{low:g}–{high:g}", f"{ratio:.4f}", low <= ratio <= high
        )
    )
    comparisons.append(
        Comparison.info(
            f"z as run ({label})",
            f"{rec['z_pld_as_run']:.4f} / +F0.05 {rec['z_pld_F0.05_as_run']:.4f}",
            note=(
                "the engine's padded Poisson batch: overflow slack (≤ 1e-10 per run) charged to δ"
            ),
        )
    )
    return rec, comparisons


def eps_f_cost(zs: dict, fs: tuple, targets: pd.DataFrame) -> tuple[pd.DataFrame, list[Comparison]]:
    """C4: ``eps_f_cost.csv`` (z and the extra noise at each ε_F of ``fs``, beside the paper's z)
    and its rows: each z, and the claim on the extra noise at small ε_F."""
    base = zs["None"]
    frame = pd.DataFrame(
        [
            {
                "eps_F": "none" if f is None else f,
                "z": zs[str(f)],
                "paper": target(targets, "C4", "z", eps_F=f).paper,
                "extra_noise": zs[str(f)] / base - 1,
            }
            for f in fs
        ]
    )
    tolerance = [target(targets, "C4", "z", eps_F=f).tolerance for f in fs]
    n, b, e = COST_CASE
    comparisons = [
        Comparison.numeric(
            f"C4 z at eps_F={r.eps_F} ({n}/{b}/{e}, eps={COST_EPSILON:g})",
            r.paper,
            r.z,
            rel_tol=tol,
            digits=5,
        )
        for (_, r), tol in zip(frame.iterrows(), tolerance)
    ]
    limit = target(targets, "C4", "extra_noise_max")
    small = frame.eps_F.apply(lambda f: f != "none" and f <= limit.eps_F)
    worst = frame[small].extra_noise.max()
    comparisons.append(
        Comparison.claim(
            f"C4 extra DP-SGD noise from the mean step at eps_F <= {limit.eps_F:g}",
            f"<= {100 * limit.paper:g} %",
            f"{100 * worst:.3f} %",
            worst <= limit.paper,
        )
    )
    return frame, comparisons
