"""Smoke runs of hu2024_table3 and hu2024_pipeline_demo on the real Adult data."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import run_experiment
from experiments.hu2024_table3 import inject_mcar, symbolic_latex, symbolic_markdown

pytestmark = pytest.mark.data


def test_table3_smoke(smoke_out, data_dir):
    comparisons = run_experiment("hu2024_table3", "smoke", smoke_out, data_dir=data_dir, quiet=True)
    assert comparisons and all(c.status in ("pass", "info") for c in comparisons), [
        c for c in comparisons if c.status == "miss"
    ]
    names = {c.quantity for c in comparisons}
    assert "4(3n+2)/(n−1) at n=101 (PCA τ*·δ)" in names
    out = smoke_out / "hu2024_table3"
    frame = pd.read_csv(out / "table3_adult.csv")
    assert {"config", "versions", "seed", "l2", "measured_l2", "worst_ratio"} <= set(frame.columns)
    assert set(frame["method"]) == {"mean", "median", "trimmed_mean", "regression"}
    mean = frame[frame["method"] == "mean"].iloc[0]
    assert mean["l2"] == pytest.approx(2 / (mean["n"] - mean["p"]))
    assert (frame["worst_ratio"] <= 1 + 1e-9).all()
    assert (frame["measured_linf"] <= frame["linf"]).all()
    assert "| Median |" in (out / "table3.md").read_text()
    assert "tabular" in (out / "table3.tex").read_text()


def test_pipeline_demo_smoke(smoke_out, data_dir):
    comparisons = run_experiment(
        "hu2024_pipeline_demo", "smoke", smoke_out, data_dir=data_dir, quiet=True
    )
    assert comparisons and all(c.status in ("pass", "info") for c in comparisons)
    out = smoke_out / "hu2024_pipeline_demo"
    frame = pd.read_csv(out / "pipeline_demo.csv")
    assert list(frame["step"])[:2] == ["none", "mean imputation"]
    assert {
        "config",
        "versions",
        "overall_epsilon_exact",
        "overall_epsilon_table2",
        "group_epsilon",
    } <= set(frame.columns)
    imp = frame[frame["step"] == "mean imputation"].iloc[0]
    # Few missing values: Theorem 2 is far below group privacy over p records.
    assert imp["overall_epsilon_exact"] < imp["group_epsilon"]
    assert "Worked example" in (out / "pipeline_demo.md").read_text()
    # Chained imputation → quantization (issue 12): the composed sensitivity is the Pipeline's, with
    # Δ∞ = p + (p+1)·p_q and Δ2 = 2/(n−p) + 2η (chain + displacement rule), and still beats group
    # privacy.
    from dpprep.preprocess import Pipeline
    from dpprep.preprocess import pipeline as pl
    from experiments.hu2024_pipeline_demo import PROFILES
    from experiments.hu2024_table3 import load_adult_unit_ball

    cfg = PROFILES["smoke"]
    rows = frame.set_index("step")
    imp, quant = rows.loc["mean imputation"], rows.loc[f"quantization (η={cfg.eta:g})"]
    both = rows.loc["imputation → quantization (composed)"]
    assert both["linf"] == imp["linf"] + (imp["linf"] + 1) * quant["linf"]
    assert both["l2"] == pytest.approx(imp["l2"] + 2 * cfg.eta)
    assert imp["overall_epsilon_exact"] < both["overall_epsilon_exact"] < both["group_epsilon"]
    x, _, groups = load_adult_unit_ball(data_dir, cfg.n_rows, cfg.seed)
    xm = inject_mcar(x, [groups[cfg.missing_column][0]], cfg.missing_rate, cfg.seed)
    run = Pipeline((pl.impute_mean_step(), pl.quantize_step(cfg.eta))).run(xm)
    assert run.sensitivity.linf == both["linf"] and run.sensitivity.l2 == pytest.approx(
        both["l2"], rel=1e-12
    )
    three = rows.loc["imputation → quantization → PCA rank-1 (composed)"]
    assert three["linf"] == len(x) and three["l2"] == 2.0
    assert any("valid overall ε = min" in c.quantity for c in comparisons)


def test_symbolic_table_and_mcar_injection():
    md, tex = symbolic_markdown(), symbolic_latex()
    assert md.count("\n| ") >= 5 and tex.count("\\\\") >= 5
    x = pd.DataFrame({"a": [0.1] * 1000, "b": [0.2] * 1000}).to_numpy()
    a, b = inject_mcar(x, [0], 0.1, seed=3), inject_mcar(x, [0], 0.1, seed=3)
    assert pd.isna(a[:, 0]).sum() == pd.isna(b[:, 0]).sum() and 60 < pd.isna(a[:, 0]).sum() < 140
    assert not pd.isna(a[:, 1]).any()
