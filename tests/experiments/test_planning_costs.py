"""The cost models of ``run_all --plan`` for the experiments that had none: their FLOPs pinned by a
hand computation from each module's grid, their units equal to what the experiment registers, the
dataset shapes they use equal to the real files, and every paper row a real model."""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path

import numpy as np
import pytest

import experiments
from experiments import planning
from experiments.hu2024_fig3 import cost as fig3_cost
from experiments.planning import flops
from experiments.results import Progress, UnitStore

MODELLED = (
    "hu2024_table3",
    "hu2024_pipeline_demo",
    "sun2024_counterexample",
    "wang2026_table2",
    "wang2026_checks",
    "wang2026_fig1",
    "wang2026_fig2",
    "sun2024_selection",
    "wang2026_selection",
)
LOG2 = math.log2


def _glm(d: int, steps: int, rows: int, *, clipped: bool = False) -> float:
    """One GLM run (k = 1) by hand: 4d + 5 per example-step, + 2d + 3 clipped."""
    return steps * rows * (4 * d + 5 + (2 * d + 3 if clipped else 0))


def _mlp(d: int, h: int, k: int) -> tuple[int, int]:
    """(training, forward) FLOPs of one example through d → h → k by hand."""
    return 4 * d * h + 6 * h * k + 8 * h + 5 * k, 2 * d * h + 2 * h * k + 4 * h + 2 * k


# --------------------------------------------------------------------------------------------------
# every paper row is a model


def test_every_paper_row_has_a_flop_model():
    rows = planning.plan_rows(list(experiments.REGISTRY), "paper", cpu_rate=1e11, gpu_flops=1e13)
    by_id = {row["experiment"]: row for row in rows}
    assert set(MODELLED) <= set(by_id)  # wang2026_selection included: it was unknown to planning.py
    for experiment_id in MODELLED:
        row = by_id[experiment_id]
        assert "no cost model" not in row["basis"] and row["basis"].startswith("analytic"), (
            experiment_id
        )
        assert row["FLOPs"] not in ("—", "~0") and float(row["FLOPs"]) > 0, experiment_id
        assert row["units"] != "—" and row["CPU time"].endswith(
            ("(projection)", "(projection, floor)")
        ), experiment_id
    for experiment_id in MODELLED:  # the floors say so
        c = planning.cost(experiment_id, "paper")
        assert by_id[experiment_id]["CPU time"].startswith("≥ ") == c.floor


def test_floor_projections_of_serial_experiments_are_not_run_whole():
    """A floor says nothing about the time: --validate does not run such an experiment whole (the
    counter-example projects ~1 s and took 6 min); the cheap ones (seconds measured) still run
    whole.
    """
    for experiment_id in ("hu2024_table3", "sun2024_counterexample", "wang2026_checks"):
        go, why = planning.should_validate(experiment_id, "paper", cpu_rate=1e11)
        assert not go and "floor" in why, experiment_id
    for experiment_id in ("hu2024_pipeline_demo", "wang2026_table2"):
        assert planning.should_validate(experiment_id, "paper", cpu_rate=1e11) == (True, "")
    assert planning.should_validate("wang2026_fig2", "paper", cpu_rate=1e11) == (
        True,
        "",
    )  # ~3 s, not a floor


# --------------------------------------------------------------------------------------------------
# FLOPs by hand, from each module's grid


def test_hu2024_table3_smoke_by_hand():
    # smoke: 2000 Adult rows (d = 31), one setting (age), one rate, 4 methods, 12 neighbours: per
    # unit
    # the MCAR copy, 13 imputations (11nd + n(log2 n + 16) for one column) and 12 copies + L2
    # changes (4nd).
    n, d = 2000, 31
    unit = n * d + 13 * (11 * n * d + n * (LOG2(n) + 16)) + 12 * 4 * n * d
    c = planning.cost("hu2024_table3", "smoke")
    assert (c.units, c.floor) == (4, True) and c.flops == pytest.approx(4 * unit, rel=1e-12)
    # 2 settings × 3 rates × 4 methods, 300 neighbours, 45,175 rows
    paper = planning.cost("hu2024_table3", "paper")
    assert paper.units == 24 and paper.flops > 100 * c.flops


def test_hu2024_pipeline_demo_smoke_by_hand():
    n, d, k = 2000, 31, 1
    flops = (
        n * d
        + 11 * n * d
        + n * (LOG2(n) + 16)
        + 5 * n * d
        + 3 * n * LOG2(n) * d
        + 3 * n * d
        + 2 * n * d * d
        + 9 * d**3
        + 4 * n * d * k
    )
    c = planning.cost("hu2024_pipeline_demo", "smoke")
    # preprocess; dp_gd's base calibration and its 6 analysed steps
    assert c.units == 1 + 1 * (1 + 6)
    assert c.flops == pytest.approx(flops, rel=1e-12) and c.cheap and c.floor
    assert "paper grid = quick grid" in planning.cost("hu2024_pipeline_demo", "paper").basis


def test_sun2024_counterexample_smoke_by_hand():
    # E1: one cell, T = 10, 4 C × 1 η × 200 repetitions, 25 FLOPs per run-step.
    e1 = 10 * 4 * 200 * 25
    # E2: n = 10⁴, one (μ, ε) cell, T = 100, q = 1, 3 seeds, 1 η: DPSGD 12 runs (32 per run-step, m
    # = d = 2),
    # DPSGD-F 3 + Alg-3 12 runs (46, d = 3); per seed 4 PrivQuantiles on a 2001-point grid + 20n.
    n, grid = 10_000, 2001
    quantile = 11 * grid + 2 * grid * LOG2(n) + n * LOG2(n) + 6 * n
    e2 = 100 * (12 * 32 + 15 * 46) + 3 * (4 * quantile + 20 * n)
    c = planning.cost("sun2024_counterexample", "smoke")
    assert c.units == 1 + 1 + 1 and c.flops == pytest.approx(e1 + e2, rel=1e-12) and c.floor
    quick = planning.cost("sun2024_counterexample", "quick")
    assert quick.units == 2 * 3 * 4 * 3 + 1 + 2 * 6  # E1 cells, crosscheck, E2 cells
    assert planning.cost("sun2024_counterexample", "paper").units == 72 + 1 + 3 * 6 * 3


def test_sun2024_selection_smoke_by_hand():
    # smoke: 3000 MNIST rows, 500 for validation: 2500 training rows; Poisson B = 512, 1 epoch:
    # ⌈2500/512⌉ = 5
    # steps of 512 expected rows; 2 methods × 1 ε × 1 draw × mean K = 2 candidates; non-private: 1
    # η, shuffled epochs of B = 512: 5 steps.
    d, k, val = 784, 10, 500
    candidate = 5 * 512 * (4 * d * k + 2 * d + 8 * k) + 2 * val * d * k
    nonprivate = 5 * 512 * (4 * d * k + 5 * k) + 2 * val * d * k
    c = planning.cost("sun2024_selection", "smoke")
    assert c.units == 3 and c.flops == pytest.approx(2 * 2 * candidate + nonprivate, rel=1e-12)
    assert "mean K = 2" in c.basis
    assert planning.cost("sun2024_selection", "paper").units == 2 * 2 * 5 + 1


def test_wang2026_table2_smoke_by_hand():
    def hist(n, k):
        return (2 + k) * n * LOG2(n) + 8 * k * n

    n_syn, m = 2000, 100
    synthetic = sum(
        2 * (m - s) * (2 * s**3 / 3 + 4 * s**2) + 4 * n_syn * m * m for s in (5, 10, 20, 50, 80)
    )
    # 3 discrete U × (base + 1 bin count); fnlwgt's covariance
    adult = 3 * 2 * hist(5000, 3) + 2 * 5000 * 16
    credit = 4 * 1 * 19 * hist(30_000, 1)
    sepsis = 2 * (hist(110_204, 1) + hist(179_971, 1) + hist(10_000, 1))
    c = planning.cost("wang2026_table2", "smoke")
    assert c.units == 9 and c.flops == pytest.approx(synthetic + adult + credit + sepsis, rel=1e-12)


def test_wang2026_checks_by_hand():
    train8, fwd8 = _mlp(3, 5, 2)
    item7 = _glm(32, 5000, 45_175) + 2 * 45_175 * 32
    item8 = 10 * (200 * 1024 * train8 + 10_000 * fwd8)
    item14 = (10 * 3 * 6 + 2) * (_glm(100, 4000, 101) + 2 * 2000 * 100)
    chain = 20_000 * 50.5 * (LOG2(50.5) + 6)
    laplace = 10_000 * 100 * 10
    c = planning.cost("wang2026_checks", "quick")
    assert c.units == 3 and c.flops == pytest.approx(
        item7 + item8 + item14 + chain + laplace, rel=1e-12
    )


def test_wang2026_fig1_smoke_by_hand():
    # smoke: 2 seeds, 4 ε, one C per panel, T × 0.05. Points: 3 methods × 4 ε (+ 4 population on a,
    # + 1 non-private run for networks); GLMs add a one-seed non-private (+ Partial on a, b)
    # reference.
    def glm(n, d, steps, runs, sketch=False):
        return runs * (_glm(d, steps, d + 1 if sketch else n) + 2 * n * d)

    def net(n, d, h, k, steps, batch, runs):
        train, fwd = _mlp(d, h, k)
        return runs * (steps * batch * train + n * fwd)

    flops = (
        glm(2000, 100, 200, 2 * 16 + 2, sketch=True)  # a: synthetic ridge
        + glm(45_175, 32, 250, 2 * 12 + 2)  # b: Adult LR
        + 2 * net(10_000, 3, 5, 2, 10, 1024, 2 * 13)  # c, c_sgd: Sepsis NN (10 steps of 1024)
        + glm(30_000, 34, 100, 2 * 12 + 1)  # d: Credit LR
        + glm(1000, 9, 250, 2 * 12 + 1, sketch=True)  # e: Medical OLS
        + 2 * net(1000, 8, 20, 1, 50, 1000, 2 * 13)  # f, f_sgd: Medical NN, full batch
        + 2 * net(10_000, 3, 5, 2, 10, 1024, 2 * 2)
        + 2 * net(1000, 8, 20, 1, 50, 1000, 2 * 2)
    )  # mechanism units
    c = planning.cost("wang2026_fig1", "smoke")
    assert c.units == 8 + 4 and c.flops == pytest.approx(flops, rel=1e-12) and c.floor


def test_wang2026_fig2_quick_by_hand():
    # 4 m_s units: 10 seeds × (4 methods × 10 ε) runs + 2 references, T = 4000 on the 101-row
    # sketch.
    c = planning.cost("wang2026_fig2", "quick")
    assert c.units == 4 and c.flops == pytest.approx(
        4 * 402 * (_glm(100, 4000, 101) + 2 * 2000 * 100), rel=1e-12
    )
    assert not c.floor


def test_wang2026_selection_smoke_by_hand():
    # smoke: 2 seeds, ε ∈ {0.5, 2}, 2 C per panel, T × 0.02, mean K 2: 2 methods × 2 ε = 4
    # selections,
    # 8 candidates (one padded chunk of 8). Adult unclipped (n = 45,175, d = 32, T = 100, V = 2000);
    # Credit clipped per example (n = 30,000, d = 34, T = 40, V = 1000).
    flops = 0.0
    for n, d, steps, val, clipped in ((45_175, 32, 100, 2000, False), (30_000, 34, 40, 1000, True)):
        train = (
            2 * 4 * 2 * (_glm(d, steps, n, clipped=clipped) + 2 * n * d)
            + _glm(d, steps, n)
            + 2 * n * d
        )
        select = 2 * (8 * (_glm(d, steps, n - val, clipped=clipped) + 2 * val * d) + 4 * 2 * n * d)
        flops += train + select
    c = planning.cost("wang2026_selection", "smoke")
    assert c.units == 2 * (1 + 2) and c.flops == pytest.approx(flops, rel=1e-12)
    assert planning.cost("wang2026_selection", "paper").units == 2 * (1 + 10)


# --------------------------------------------------------------------------------------------------
# against the data and the experiments themselves


@pytest.mark.slow  # loads every dataset
@pytest.mark.data
def test_shape_constants_equal_the_real_data(data_dir):
    from dpprep import data
    from dpprep.corrdp.data import load_corrdp, sepsis_rebalanced

    for name, shape in flops.DATA_SHAPES.items():
        try:
            ds = data.load(name, data_dir)
        except data.DataNotFoundError:
            # user-supplied; every other set is in the data directory
            assert name == "cifar100_features", name
            continue
        assert (*ds.x_train.shape, ds.num_classes) == shape, name
    for name, (rows, columns, intercept) in flops.CORRDP_SHAPES.items():
        view = load_corrdp(name, data_dir)
        assert (*np.shape(view.x), view.intercept is not None) == (rows, columns, intercept), name
    assert sepsis_rebalanced(data_dir)[0].shape[0] == flops.SEPSIS_REBALANCED_ROWS


def _registered_units(experiment_id: str, profile: str, root: Path, data_dir: Path) -> int:
    """Runs ``experiment_id`` at ``profile`` with a plain store under ``root``; its unit files."""
    progress = Progress(experiment_id, quiet=True, verbose=False)
    store = UnitStore(root / ".units", fresh=True, progress=progress)
    ctx = experiments.RunContext(profile, root / experiment_id, store, progress, data_dir)
    ctx.out_dir.mkdir(parents=True)
    try:
        experiments.load(experiment_id).run(ctx)
    finally:
        progress.close()
    return len(list((root / ".units").rglob("*.json")))


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.data
@pytest.mark.parametrize(
    "experiment_id",
    ["hu2024_table3", "hu2024_pipeline_demo", "sun2024_counterexample", "wang2026_table2"],
)
def test_units_equal_what_the_smoke_run_registers(experiment_id, tmp_path, data_dir):
    """Seconds each at the smoke profile."""
    assert (
        _registered_units(experiment_id, "smoke", tmp_path, data_dir)
        == planning.cost(experiment_id, "smoke").units
    )


@pytest.mark.slow  # over 8 s on the reference machine (2 cores, 2 test workers)
@pytest.mark.data
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_corrdp_figure_units_equal_their_grids(profile, data_dir):
    """wang2026_fig1/fig2's (panel, C) units as the modules build them (C_theory from the data), not
    run."""
    from experiments import wang2026_fig1 as fig1
    from experiments import wang2026_fig2 as fig2

    ctx = types.SimpleNamespace(data_dir=data_dir, progress=None)
    items, _ = fig1.panel_items(
        ctx, list(fig1.ALL_PANELS.values()), fig1.PROFILES[profile], "fig1", {"a"}
    )
    mechanism = fig1.mechanism_items(ctx, fig1.PROFILES[profile])
    # paper: 34, Medical NN's C_theory = 0.1
    assert planning.cost("wang2026_fig1", profile).units == len(items) + len(mechanism)
    pns = fig2.panels()
    items, _ = fig1.panel_items(ctx, pns, fig2.profile_for(profile), "fig2", {pn.key for pn in pns})
    assert planning.cost("wang2026_fig2", profile).units == len(items)


def test_validate_measures_the_rate_only_when_a_projection_needs_it():
    """A callable rate is measured only for an experiment without a sweep grid whose count is no
    floor; the projection in the refusal is at that rate; without any rate nothing is run whole."""
    calls = []

    def rate() -> float:
        calls.append(1)
        return 1e9

    assert planning.should_validate("sun2024_table1", "paper", rate) == (
        True,
        "",
    )  # a sweep grid: no projection
    assert planning.should_validate("hu2024_table1", "paper", rate) == (
        True,
        "",
    )  # cheap: run whole
    assert not calls
    go, why = planning.should_validate("sun2024_table2", "paper", rate)
    flops = planning.cost("sun2024_table2", "paper").flops
    assert not go and calls and f"projected {flops / 1e9:.0f} s here" in why
    go, why = planning.should_validate("wang2026_fig2", "paper")
    assert not go and "no CPU rate" in why


def test_a_short_grid_without_sweeps_is_validated_whole():
    """wang2026_fig2's units are not sweeps, but its count (not a floor) projects well under
    CHEAP_SECONDS: --validate runs it whole (saving nothing) instead of saying 'not validated'."""
    report = planning.validate_experiment("wang2026_fig2", "smoke", cpu_rate=1e11)
    assert report["validated"] and report["mode"].startswith("run whole"), report
    # 1 FLOP/s: far too long
    report = planning.validate_experiment("wang2026_fig2", "smoke", cpu_rate=1.0)
    assert not report["validated"] and "not sweeps" in report["why"]


def test_hu2024_fig3_smoke_by_hand():
    # Two cases (n, d) = (300, 20) at ranks k = 1 and k = 2; ε ∈ {0.5, 8} × 2 seeds × 2 step sizes
    # = 8 runs per method, DP-GD only, 20 steps over all 300 rows; 4 d-dim methods and 2 k-dim ones.
    n, d, runs, steps = 300, 20, 2 * 2 * 2, 20
    d_dim = 4 * runs * _glm(d, steps, n, clipped=True)
    optimum = _glm(d, 500, n, clipped=True)
    releases = 2 * 2 * (4 / 3) * d**3  # d ≤ 200: dense eigh's tridiagonal reduction per (ε, seed)
    k1 = 2 * runs * _glm(1, steps, n, clipped=True)
    # k = 2: the k-dim runs train 2 weights, 4k + 2k + 8 FLOPs per example-step
    k2 = 2 * runs * steps * n * (4 * 2 + 2 * 2 + 8)
    c = planning.cost("hu2024_fig3", "smoke")
    assert (c.units, c.floor) == (2, True)
    case = d_dim + optimum + 2 * n * d * d + releases
    assert c.flops == pytest.approx(2 * case + k1 + k2, rel=1e-12)


def test_hu2024_fig3_counts_every_rank_case_and_step_size(monkeypatch):
    """The plan follows the profile's (n, d, k) cases and its step-size grid: a rank case adds its
    own case's work, the k-dim runs at k features and the Lanczos basis at max(2k + 1, 40)."""
    from experiments import hu2024_fig3

    base = hu2024_fig3.Fig3Config(cases=((2000, 500),), seeds=2, learning_rates=(0.1, 1.0))
    monkeypatch.setitem(hu2024_fig3.PROFILES, "smoke", base)
    one = planning.cost("hu2024_fig3", "smoke")
    wide = dataclasses.replace(base, learning_rates=(0.01, 0.1, 1.0, 10.0))
    monkeypatch.setitem(hu2024_fig3.PROFILES, "smoke", wide)
    # the trained runs, 2 step sizes
    fixed = one.flops - 2 * 7 * 2 * 200 * 2000 * (4 * (6 * 500 + 8) + 2 * (6 + 8))
    assert planning.cost("hu2024_fig3", "smoke").flops == pytest.approx(
        fixed + 2 * (one.flops - fixed), rel=1e-12
    )
    ranked = dataclasses.replace(base, rank_cases=((2000, 500, 3),))
    monkeypatch.setitem(hu2024_fig3.PROFILES, "smoke", ranked)
    c = planning.cost("hu2024_fig3", "smoke")
    # its k-dim runs train 3 weights, not 1
    extra = 2 * 7 * 2 * 200 * 2000 * 2 * ((6 * 3 + 8) - (6 + 8))
    assert (c.units, c.flops) == (2, pytest.approx(2 * one.flops + extra, rel=1e-12))
    assert "k ∈ [1, 3]" in c.basis and "2 step sizes" in c.basis


def test_hu2024_fig3_release_floor_follows_dp_pca_solver():
    """The release floor models dpprep.preprocess.dp_pca's solver: dense up to its threshold, then
    eigsh's first Lanczos basis (40 products of 2d² at k = 1), far below the 9d³ of a full eigh."""
    import inspect

    from dpprep.preprocess import dp_pca

    assert f"max(2 * k + 1, {fig3_cost.FIG3_LANCZOS_VECTORS})" in inspect.getsource(dp_pca._top_k)
    assert fig3_cost.release_flops(8000, 1) == 40 * 2 * 8000**2
    assert fig3_cost.release_flops(200, 1) == pytest.approx(4 / 3 * 200**3)
    assert fig3_cost.release_flops(8000, 1) < 9 * 8000**3 / 500
