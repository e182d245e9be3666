"""Smoke run of hu2024_fig3 (spec §9): every method runs, outputs are tidy and consistent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments import REGISTRY, run_experiment
from experiments.hu2024_fig3 import METHODS, PROFILES, TRAINERS, Fig3Config, run_case


def test_fig3_smoke(smoke_out):
    comparisons = run_experiment("hu2024_fig3", "smoke", smoke_out, quiet=True)
    names = [c.quantity for c in comparisons]
    assert any(q.startswith("Fig 3 (n=300, d=20)") for q in names)
    spec = [c for c in comparisons if "Theorem 7" in c.quantity or "Prop 8" in c.quantity or "calibration" in c.quantity]
    assert len(spec) == 13 and all(c.status == "pass" for c in spec), [c for c in spec if c.status != "pass"]
    out = smoke_out / "hu2024_fig3"
    frame = pd.read_csv(out / "fig3.csv")
    cfg = PROFILES["smoke"]
    assert len(frame) == len(METHODS) * len(cfg.epsilons) * cfg.seeds * len(cfg.learning_rates)
    assert {"method", "variant", "n", "d", "epsilon", "epsilon_b", "noise_std", "seed", "learning_rate",
            "excess_risk", "bottom", "config", "versions"} <= set(frame.columns)
    # every model lies in the unit ball, θ* is optimal there: excess risk ≥ 0 up to float32 evaluation
    assert (frame["excess_risk"] > -1e-5).all()
    assert np.isfinite(frame["excess_risk"]).all()
    # more budget, less noise, for every method
    for (m, v), g in frame.groupby(["method", "variant"]):
        stds = g.groupby("epsilon")["noise_std"].first()
        assert stds.is_monotonic_decreasing, (m, v)
    # the DP-GD noise is L√T/ε_b on the gradient sum
    np.testing.assert_allclose(frame["noise_std"], math.sqrt(cfg.steps) / frame["epsilon_b"], rtol=1e-9)
    # (b) spends ε/2 on DP-GD; PTR doubles the noise (ε_b = ε_PTR/2)
    ptr_rows = frame[frame.method == "ptr"]
    np.testing.assert_allclose(ptr_rows["epsilon_b"], ptr_rows["ptr_epsilon"] / 2)
    # (c) and (b)'s DP-GD: Lemma M's closed form ε_b = (−c0 + sqrt(c0² + 2ε))/2, c0 = sqrt(2 log(1/δ)) (§9.2)
    closed = lambda e, dl: (-math.sqrt(2 * math.log(1 / dl)) + math.sqrt(2 * math.log(1 / dl) + 2 * e)) / 2  # noqa: E731
    first = frame.drop_duplicates(["method", "variant", "epsilon"])
    for row in first.itertuples():
        if row.method == "none":
            assert row.epsilon_b == pytest.approx(closed(row.epsilon, 1e-5), rel=1e-5)
        if row.method == "dp_pca":
            assert row.epsilon_b == pytest.approx(closed(row.epsilon / 2, 5e-6), rel=1e-5)
            assert row.dp_pca_noise == pytest.approx(math.sqrt(2) / 300 / (2 * closed(row.epsilon / 2, 5e-6)), rel=1e-9)
        if row.method == "pca":  # Table-2 mode makes (a) pay for PCA: far less budget than (c)
            assert row.epsilon_b < closed(row.epsilon, 1e-5) / 10
    # ⊥ runs output θ = 0: loss log 2
    assert np.allclose(frame.loc[frame.bottom, "loss"], math.log(2))
    assert not frame.loc[frame.method != "ptr", "bottom"].any()
    tuned = pd.read_csv(out / "fig3_tuned.csv")
    assert len(tuned) == len(METHODS) * len(cfg.epsilons)
    assert (out / "fig3.png").stat().st_size > 10_000
    # resumable: a second run reuses the case unit and returns the same verdicts
    again = run_experiment("hu2024_fig3", "smoke", smoke_out, quiet=True)
    assert [c.measured for c in again] == [c.measured for c in comparisons]


def test_registry_and_profiles():
    ids = list(REGISTRY)
    assert ids.index("hu2024_fig3") == ids.index("hu2024_pipeline_demo") + 1
    quick = PROFILES["quick"]
    assert quick.epsilons == (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0) and quick.seeds == 10 and quick.delta == 1e-5
    assert quick.learning_rates == (0.1, 0.3, 1.0, 3.0) and {d for _, d in quick.cases} == {500, 2000}
    assert {d for _, d in PROFILES["paper"].cases} == {500, 2000, 8000}
    assert len({n for n, _ in PROFILES["paper"].cases}) > 1
    assert PROFILES["quick"].trainers == ("dp_gd",) and "dp_sgd" in PROFILES["paper"].trainers
    with pytest.raises(ValueError, match="trainers"):
        Fig3Config(cases=((300, 20),), trainers=("adam",))
    with pytest.raises(ValueError, match="trainers"):
        Fig3Config(cases=((300, 20),), trainers=("dp_sgd",))


def test_dp_sgd_variant_runs_with_rigorous_calibration():
    """Spec §9.4's optional variant: Poisson DP-SGD calibrated by Theorem 2 with sgd_samp's replace-one
    RDP/SRDP; PTR is DP-GD only."""
    cfg = Fig3Config(cases=((300, 20),), epsilons=(1.0, 8.0), seeds=2, steps=10, learning_rates=(0.3,),
                     optimum_steps=200, trainers=TRAINERS, sgd_epochs=2.0, sgd_batch_fraction=0.1)
    case = run_case(cfg, 300, 20)
    frame = pd.DataFrame(case["rows"])
    sgd = frame[frame.trainer == "dp_sgd"]
    assert set(zip(sgd.method, sgd.variant)) == set(METHODS[:5])
    assert len(sgd) == 5 * 2 * 2 and (sgd.excess_risk > -1e-5).all() and not sgd.bottom.any()
    z = sgd.drop_duplicates(["method", "variant", "epsilon"]).set_index(["method", "variant", "epsilon"])["noise_std"]
    for e in cfg.epsilons:
        # pre-processing costs noise; half the budget costs noise; more budget, less noise
        assert z[("pca", "rank", e)] > z[("none", "-", e)] and z[("pca", "dim", e)] > z[("pca", "rank", e)]
        assert z[("dp_pca", "dim", e)] == z[("dp_pca", "rank", e)] > z[("none", "-", e)]
    assert z[("none", "-", 1.0)] > z[("none", "-", 8.0)]
    assert case["compiled_functions"] == 6
