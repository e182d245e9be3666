"""Sun, Suresh & Menon (2024), DPSGD-F accounting: the noise multipliers of the paper's events
(PLD alone, composed with the mean step, RDP) and of the engine's run, and σ_F."""

from __future__ import annotations

import math
import time

from dpprep import dpsgdf
from dpprep.accounting import dp
from dpprep.plan import ExecutionPlan

from .config import COST_CASE, COST_EPSILON, DELTA


def paper_schedule(epochs: int, batch_size: int, n: int) -> dp.DpSgdSchedule:
    """The paper's event: T = ⌈E·n/B⌉ Poisson steps at q = B/n (spec A4), built by hand so the
    table is checked against the spec's own arithmetic, not the engine's plan."""
    return dp.DpSgdSchedule(math.ceil(epochs * n / batch_size), "poisson", batch_size / n)


def sigma_f(eps_fs) -> list[dict]:
    """C1: the private mean's Gaussian multiplier σ_F at each (ε_F, δ)."""
    return [{"eps_F": f, "sigma_F": dpsgdf.mean_sigma(f, DELTA)} for f in eps_fs]


def z_row(n: int, b: int, e: int, eps: float) -> dict:
    schedule = paper_schedule(e, b, n)
    start = time.perf_counter()
    out = {"n": n, "B": b, "E": e, "T": schedule.steps, "epsilon": eps}
    out["z_pld"] = dp.calibrate_noise(eps, DELTA, schedule)
    for f in (0.02, 0.05):
        out[f"z_pld_F{f}"] = dp.calibrate_noise(
            eps, DELTA, schedule, fixed_events=(dpsgdf.mean_event(f, DELTA),)
        )
    out["z_rdp"] = dp.calibrate_noise(
        eps, DELTA, schedule, options=dp.AccountingOptions(accountant="rdp")
    )
    plan = ExecutionPlan.create("poisson", n, batch_size=b, epochs=e)
    out["z_pld_as_run"] = plan.calibrate(eps, DELTA)
    out["z_pld_F0.05_as_run"] = plan.calibrate(
        eps, DELTA, fixed_events=(dpsgdf.mean_event(0.05, DELTA),)
    )
    out["seconds"] = time.perf_counter() - start
    return out


def eps_f_cost(fs) -> dict:
    """C4: z of the paper's event for :data:`~.config.COST_CASE` at :data:`~.config.COST_EPSILON`,
    composed with the mean step at each ε_F of ``fs`` (None: without it), keyed by ``str(ε_F)``."""
    n, b, e = COST_CASE
    schedule = paper_schedule(e, b, n)
    return {
        str(f): dp.calibrate_noise(
            COST_EPSILON,
            DELTA,
            schedule,
            fixed_events=() if f is None else (dpsgdf.mean_event(f, DELTA),),
        )
        for f in fs
    }
