"""Smoke run of hu2024_fig3 (spec §9): every method runs, outputs are tidy and consistent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiments import REGISTRY, hu2024_fig3, plotting, run_experiment
from experiments.hu2024_fig3 import (
    LEARNING_RATES,
    METHODS,
    PROFILES,
    TRAINERS,
    Fig3Config,
    edge_row,
    run_case,
)


def test_fig3_smoke(smoke_out):
    comparisons = run_experiment("hu2024_fig3", "smoke", smoke_out, quiet=True)
    names = [c.quantity for c in comparisons]
    assert any(q.startswith("Fig 3 (n=300, d=20)") for q in names)
    # the rank case has its own rows
    assert any(q.startswith("Fig 3 (n=300, d=20, k=2)") for q in names)
    spec = [
        c
        for c in comparisons
        if "Theorem 7" in c.quantity or "Prop 8" in c.quantity or "calibration" in c.quantity
    ]
    assert len(spec) == 13 and all(c.status == "pass" for c in spec), [
        c for c in spec if c.status != "pass"
    ]
    out = smoke_out / "hu2024_fig3"
    frame = pd.read_csv(out / "fig3.csv")
    cfg = PROFILES["smoke"]
    assert cfg.all_cases() == ((300, 20, 1), (300, 20, 2))
    assert len(frame) == 2 * len(METHODS) * len(cfg.epsilons) * cfg.seeds * len(cfg.learning_rates)
    assert sorted(frame.k.unique()) == [1, 2]
    # the rank is the data's and the PCA's: the k = 2 data's θ* and the PCA accounting differ
    assert frame.groupby("k")["loss"].apply(lambda x: x.min()).nunique() == 2
    pca_eb = (
        frame[(frame.method == "pca") & (frame.epsilon == 8.0)]
        .groupby(["k", "variant"])["epsilon_b"]
        .first()
    )
    assert pca_eb[(2, "rank")] != pca_eb[(1, "rank")]
    assert {
        "method",
        "variant",
        "n",
        "d",
        "epsilon",
        "epsilon_b",
        "noise_std",
        "seed",
        "learning_rate",
        "excess_risk",
        "bottom",
        "config",
        "versions",
    } <= set(frame.columns)
    # every model lies in the unit ball, θ* is optimal there: excess risk ≥ 0 up to float32
    # evaluation
    assert (frame["excess_risk"] > -1e-5).all()
    assert np.isfinite(frame["excess_risk"]).all()
    # more budget, less noise, for every method
    for (m, v), g in frame.groupby(["method", "variant"]):
        stds = g.groupby("epsilon")["noise_std"].first()
        assert stds.is_monotonic_decreasing, (m, v)
    # the DP-GD noise is L√T/ε_b on the gradient sum
    np.testing.assert_allclose(
        frame["noise_std"], math.sqrt(cfg.steps) / frame["epsilon_b"], rtol=1e-9
    )
    # (b) spends ε/2 on DP-GD; PTR doubles the noise (ε_b = ε_PTR/2)
    ptr_rows = frame[frame.method == "ptr"]
    np.testing.assert_allclose(ptr_rows["epsilon_b"], ptr_rows["ptr_epsilon"] / 2)
    # (c) and (b)'s DP-GD: Lemma M's closed form ε_b = (−c0 + sqrt(c0² + 2ε))/2, c0 = sqrt(2
    # log(1/δ)) (§9.2)
    closed = lambda e, dl: (  # noqa: E731
        (-math.sqrt(2 * math.log(1 / dl)) + math.sqrt(2 * math.log(1 / dl) + 2 * e)) / 2
    )
    first = frame.drop_duplicates(["method", "variant", "epsilon"])
    for row in first.itertuples():
        if row.method == "none":
            assert row.epsilon_b == pytest.approx(closed(row.epsilon, 1e-5), rel=1e-5)
        if row.method == "dp_pca":
            assert row.epsilon_b == pytest.approx(closed(row.epsilon / 2, 5e-6), rel=1e-5)
            assert row.dp_pca_noise == pytest.approx(
                math.sqrt(2) / 300 / (2 * closed(row.epsilon / 2, 5e-6)), rel=1e-9
            )
        if row.method == "pca":  # Table-2 mode makes (a) pay for PCA: far less budget than (c)
            assert row.epsilon_b < closed(row.epsilon, 1e-5) / 10
    # ⊥ runs output θ = 0: loss log 2
    assert np.allclose(frame.loc[frame.bottom, "loss"], math.log(2))
    assert not frame.loc[frame.method != "ptr", "bottom"].any()
    tuned = pd.read_csv(out / "fig3_tuned.csv")
    assert len(tuned) == 2 * len(METHODS) * len(cfg.epsilons)
    assert (out / "fig3.png").stat().st_size > 10_000 and (
        out / "fig3_ranks.png"
    ).stat().st_size > 10_000
    # the grid-edge check is a row that can fail, with both edges counted
    (edge,) = [
        c for c in comparisons if c.quantity.startswith("Fig 3: tuned step sizes inside the grid")
    ]
    assert (
        edge.status in ("pass", "miss")
        and "at the lowest 0.3" in edge.measured
        and "at the highest 1" in edge.measured
    )
    # resumable: a second run reuses the case unit and returns the same verdicts
    again = run_experiment("hu2024_fig3", "smoke", smoke_out, quiet=True)
    assert [c.measured for c in again] == [c.measured for c in comparisons]


def test_registry_and_profiles():
    ids = list(REGISTRY)
    assert ids.index("hu2024_fig3") == ids.index("hu2024_pipeline_demo") + 1
    quick = PROFILES["quick"]
    assert (
        quick.epsilons == (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
        and quick.seeds == 10
        and quick.delta == 1e-5
    )
    assert {d for _, d in quick.cases} == {500, 2000}
    # the spec's step sizes {0.1, 0.3, 1, 3}, widened below and above, for quick and paper alike
    assert (
        {0.1, 0.3, 1.0, 3.0} < set(LEARNING_RATES)
        and min(LEARNING_RATES) < 0.1
        and max(LEARNING_RATES) > 3.0
    )
    assert quick.learning_rates == PROFILES["paper"].learning_rates == LEARNING_RATES
    assert {d for _, d in PROFILES["paper"].cases} == {500, 2000, 8000}
    assert len({n for n, _ in PROFILES["paper"].cases}) > 1
    # the paper's trainer (DP-SGD) beside DP-GD, and the spec's ranks k = 2, 3 beside k = 1
    assert quick.trainers == PROFILES["paper"].trainers == TRAINERS
    assert quick.k == 1 and {(2000, 500, 2), (2000, 500, 3)} <= set(quick.rank_cases)
    assert {k for *_, k in PROFILES["paper"].all_cases()} == {1, 2, 3}
    with pytest.raises(ValueError, match="trainers"):
        Fig3Config(cases=((300, 20),), trainers=("adam",))
    with pytest.raises(ValueError, match="trainers"):
        Fig3Config(cases=((300, 20),), trainers=("dp_sgd",))
    with pytest.raises(ValueError, match="distinct"):
        Fig3Config(cases=((300, 20),), rank_cases=((300, 20, 1),))  # k = 1 is the cases' own rank
    with pytest.raises(ValueError, match="distinct"):
        Fig3Config(cases=((300, 20),), rank_cases=((300, 20, 20),))  # k < d


def _tuned(rows):
    cols = [
        "trainer",
        "n",
        "d",
        "k",
        "method",
        "variant",
        "epsilon",
        "learning_rate",
        "mean",
        "sd",
        "bottom_rate",
    ]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_edge_row_counts_both_edges_and_sets_apart_points_that_learnt_nothing():
    cfg = Fig3Config(cases=((300, 20),), seeds=4, learning_rates=(0.01, 0.1, 1.0))
    zero = {(300, 20, 1): 0.3}
    inside = ("dp_gd", 300, 20, 1, "none", "-", 1.0, 0.1, 0.05, 0.01, 0.0)
    cut_low = (
        "dp_gd",
        300,
        20,
        1,
        "pca",
        "rank",
        1.0,
        0.01,
        0.2,
        0.02,
        0.0,
    )  # 0.1 below θ = 0: it learnt
    flat_low = (
        "dp_gd",
        300,
        20,
        1,
        "dp_pca",
        "dim",
        0.5,
        0.01,
        0.299,
        0.004,
        0.0,
    )  # within 2 s.e. (0.004) of θ = 0
    bottom = (
        "dp_gd",
        300,
        20,
        1,
        "ptr",
        "rank",
        1.0,
        1.0,
        0.3,
        0.0,
        1.0,
    )  # ⊥ for every seed: θ = 0
    row = edge_row(cfg, _tuned([inside, flat_low, bottom]), zero)
    assert row.status == "pass", row
    assert (
        row.measured
        == "of 3 tuned points, 0 (+1 at θ = 0's score) at the lowest 0.01, 0 (+1 at θ = 0's score)"
        " at the highest 1"
    )
    row = edge_row(cfg, _tuned([inside, cut_low, flat_low, bottom]), zero)
    assert row.status == "miss" and "1 (+1 at θ = 0's score) at the lowest" in row.measured
    assert "Cut at the lowest: dp_gd (a) non-private PCA, rank ε=1 (n=300, d=20)" in row.note
    high = ("dp_sgd", 300, 20, 1, "dp_pca", "dim", 8.0, 1.0, 0.001, 0.0005, 0.0)
    row = edge_row(cfg, _tuned([inside, high]), zero)
    assert row.status == "miss" and "1 (+0 at θ = 0's score) at the highest 1" in row.measured


def test_plot_draws_every_lower_bar_that_a_log_axis_can_show(monkeypatch):
    """mean − s.d. > 0 is drawn where it is (not cut at a fraction of the mean); mean − s.d. ≤ 0
    runs to the panel's bottom edge, marked there and said in the title."""
    figures = []
    # the figure module saves through the shared helper: keep the figure instead of writing it
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path, **kwargs: figures.append(fig))
    eps = (0.5, 1.0, 2.0)
    means = {("none", "-"): (0.2, 0.1, 0.05), ("pca", "dim"): (0.1, 0.01, 0.001)}
    sds = {
        ("none", "-"): (0.19, 0.01, 0.005),
        ("pca", "dim"): (0.01, 0.001, 0.002),
    }  # 0.2 − 0.19 = 0.01; 0.001 − 0.002 < 0
    rows = [
        ("dp_gd", 300, 20, 1, m, v, e, 0.1, means[(m, v)][i], sds[(m, v)][i], 0.0)
        for (m, v) in means
        for i, e in enumerate(eps)
    ]
    hu2024_fig3.plot(_tuned(rows), "unused.png")
    (fig,) = figures
    (ax,) = [a for a in fig.axes if a.get_visible()]
    bottom = ax.get_ylim()[0]
    lows = {}
    for container, key in zip(ax.containers, means):
        (bars,) = container.lines[2]
        lows[key] = [min(y for _, y in segment) for segment in bars.get_segments()]
    # the 0.2 ± 0.19 bar not cut
    np.testing.assert_allclose(lows[("none", "-")], [0.01, 0.09, 0.045], rtol=1e-12)
    np.testing.assert_allclose(lows[("pca", "dim")][:2], [0.09, 0.009], rtol=1e-12)
    assert lows[("pca", "dim")][2] == pytest.approx(bottom)  # mean − s.d. < 0: to the edge …
    assert bottom < 0.009 and bottom > 0  # … which lies below every positive lower end
    marks = [line for line in ax.get_lines() if line.get_marker() == hu2024_fig3.CUT_MARKER]
    assert (
        len(marks) == 1
        and list(marks[0].get_xdata()) == [2.0]
        and list(marks[0].get_ydata()) == [bottom]
    )
    assert "mean − s.d. ≤ 0" in fig._suptitle.get_text()


@pytest.mark.slow  # an experiment end to end
def test_dp_sgd_variant_runs_with_rigorous_calibration():
    """Spec §9.4's optional variant: Poisson DP-SGD calibrated by Theorem 2 with sgd_samp's
    replace-one RDP/SRDP; PTR is DP-GD only."""
    cfg = Fig3Config(
        cases=((300, 20),),
        epsilons=(1.0, 8.0),
        seeds=2,
        steps=10,
        learning_rates=(0.3,),
        optimum_steps=200,
        trainers=TRAINERS,
        sgd_epochs=2.0,
        sgd_batch_fraction=0.1,
    )
    case = run_case(cfg, 300, 20)
    frame = pd.DataFrame(case["rows"])
    sgd = frame[frame.trainer == "dp_sgd"]
    assert set(zip(sgd.method, sgd.variant)) == set(METHODS[:5])
    assert len(sgd) == 5 * 2 * 2 and (sgd.excess_risk > -1e-5).all() and not sgd.bottom.any()
    z = sgd.drop_duplicates(["method", "variant", "epsilon"]).set_index(
        ["method", "variant", "epsilon"]
    )["noise_std"]
    for e in cfg.epsilons:
        # pre-processing costs noise; half the budget costs noise; more budget, less noise
        assert (
            z[("pca", "rank", e)] > z[("none", "-", e)]
            and z[("pca", "dim", e)] > z[("pca", "rank", e)]
        )
        assert z[("dp_pca", "dim", e)] == z[("dp_pca", "rank", e)] > z[("none", "-", e)]
    assert z[("none", "-", 1.0)] > z[("none", "-", 8.0)]
    assert case["compiled_functions"] == 6
