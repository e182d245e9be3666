"""Smoke runs of wang2026_table2 and wang2026_checks (real data; no training)."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import run_experiment


def _by_status(comparisons):
    out = {"pass": [], "miss": [], "info": []}
    for c in comparisons:
        out[c.status].append(c)
    return out


@pytest.mark.data
def test_table2_smoke(smoke_out, data_dir):
    comparisons = run_experiment(
        "wang2026_table2", "smoke", smoke_out, data_dir=data_dir, quiet=True
    )
    status = _by_status(comparisons)
    assert status["miss"] == []
    passed = sorted(c.quantity for c in status["pass"])
    assert passed == sorted(
        [f"13 synthetic population TV(i), m_s={m}" for m in (5, 10, 20, 50, 80)]
        + ["11 Sepsis TV_max on the rebalanced data"]
    )
    info = {c.quantity.split(" ")[0] for c in status["info"]}
    assert info == {"9", "10", "11", "12", "13"}
    table = pd.read_csv(smoke_out / "wang2026_table2" / "table2.csv")
    assert set(table["dataset"]) == {"synthetic", "adult", "credit", "sepsis", "medical"}
    assert table["ours"].between(0, 1).all()
    assert {"profile", "config", "versions", "paper_factor"} <= set(table.columns)
    # rerun: every unit comes from the store, same numbers
    again = run_experiment("wang2026_table2", "smoke", smoke_out, data_dir=data_dir, quiet=True)
    assert [c.measured for c in again] == [c.measured for c in comparisons]


@pytest.mark.data
def test_checks_smoke(smoke_out, data_dir):
    comparisons = run_experiment(
        "wang2026_checks", "smoke", smoke_out, data_dir=data_dir, quiet=True
    )
    status = _by_status(comparisons)
    assert status["miss"] == [] and status["info"] == []
    items = {c.quantity.split(" ")[0] for c in comparisons}
    assert {"1", "2", "3", "4", "5", "6", "24", "25"} <= items
    tail = pd.read_csv(smoke_out / "wang2026_checks" / "laplace_tail.csv")
    assert tail["coverage"].iloc[0] >= 0.89 and tail["draws"].iloc[0] == 10_000
