"""The false alarms of honest audits: how many were suspected and how many reported as violations,
with their 95 % Clopper–Pearson intervals (``alarms.md`` and the REPORT row)."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd
from scipy import stats

from .config import TITLES


class Rate(NamedTuple):
    """``count`` alarms in ``trials`` audits, with the two-sided 95 % Clopper–Pearson interval of
    the rate."""

    count: int
    trials: int
    low: float
    high: float


def rate(count: int, trials: int, confidence: float = 0.95) -> Rate:
    """``count`` of ``trials`` with its exact (Clopper–Pearson) two-sided interval."""
    alpha = 1 - confidence
    low = 0.0 if count == 0 else float(stats.beta.ppf(alpha / 2, count, trials - count + 1))
    high = (
        1.0 if count == trials else float(stats.beta.ppf(1 - alpha / 2, count + 1, trials - count))
    )
    return Rate(count, trials, low, high)


def interval(r: Rate) -> str:
    return f"[{r.low:.2%}, {r.high:.2%}]"


def alarm_rates(honest: pd.DataFrame) -> dict[str, Rate]:
    """The honest audits' alarm rates: ``suspected`` (the first stage fired) and ``confirmed``
    (reported as a violation), each with its 95 % interval."""
    trials = len(honest)
    return {
        "suspected": rate(int(honest["suspected"].astype(bool).sum()), trials),
        "confirmed": rate(int(honest["violation"].astype(bool).sum()), trials),
    }


def alarms_table(honest: pd.DataFrame) -> str:
    """``alarms.md``: every honest audit's alarms by learner and threat model, and in all, with
    95 % Clopper–Pearson intervals; and the suspected audits, with the tests that fired."""
    lines = [
        "# False alarms of honest audits",
        "",
        "Each audit is suspected when its tests fire on the first runs (each at 5 % / k over its k"
        " tests) and reported as a violation only when they fire again on as many fresh,"
        " independent runs (at 2 % / k): an honest learner is suspected with probability ≤ 5 % and"
        " reported with probability ≤ 1e-3 (the audit's family-wise error rate). Every audit draws"
        " its runs from its own key (its seed folded with its whole config). Intervals: 95 %,"
        " Clopper–Pearson.",
        "",
        "| learner | threat model | audits | suspected | reported as violations |",
        "|---|---|---|---|---|",
    ]
    for (learner, threat), part in honest.groupby(["path", "threat_model"], sort=False):
        rates = alarm_rates(part)
        lines.append(
            f"| {TITLES[learner]} | {threat} | {len(part)} | {rates['suspected'].count} |"
            f" {rates['confirmed'].count} |"
        )
    rates = alarm_rates(honest)
    lines.append(
        f"| **all** | | **{len(honest)}** | **{rates['suspected'].count}**"
        f" ({rates['suspected'].count / max(len(honest), 1):.1%}, {interval(rates['suspected'])})"
        f" | **{rates['confirmed'].count}** ({interval(rates['confirmed'])}) |"
    )
    suspected = honest[honest["suspected"].astype(bool)]
    lines += ["", f"## Suspected audits ({len(suspected)})", ""]
    if suspected.empty:
        lines.append("None.")
    else:
        lines += [
            "| learner | threat model | ε | seed | fired on the first runs | fired again |",
            "|---|---|---|---|---|---|",
        ]
        for _, r in suspected.iterrows():
            again = r.get("confirmed_by", "")
            again = again.replace("+", ", ") if isinstance(again, str) and again else "nothing"
            lines.append(
                f"| {TITLES[r['path']]} | {r['threat_model']} | {r['epsilon_target']:g} |"
                f" {int(r['seed'])} | {str(r['suspected_by']).replace('+', ', ')} | {again} |"
            )
    return "\n".join(lines) + "\n"
