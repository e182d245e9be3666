"""Sun et al. (2024) Table 1, C16: the selected configurations' standard deviations at the paper's
10 seeds (a rerun of each cell's configuration), and how often a factor-2 test of a standard
deviation fails a perfect reproduction."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pandas as pd
import pytest

from experiments import sun2024_table1 as t1

SHAPES = {"mnist": 60_000, "fashion_mnist": 60_000, "cifar100_features": 50_000}


def _units(grid: t1.Grid, name: str = "mnist") -> tuple[dict, list[t1.Unit]]:
    ds = {"name": name, "unit": np.zeros((SHAPES[name], 1), np.float32)}
    return ds, t1.build_units(ds, grid)


def test_factor2_false_failure_by_hand_and_by_simulation():
    # 3 seeds, the paper's s.d. exact: 2·s²/σ² ~ χ²(2), whose cdf is 1 − exp(−x/2), outside [1/4,
    # 4]·2
    assert t1.factor2_false_failure(3) == pytest.approx(
        math.exp(-4) + 1 - math.exp(-0.25), rel=1e-12
    )
    # the paper's s.d. a 10-run estimate as well: at 10 seeds both are F(9, 9), symmetric in 1/x
    from scipy import stats

    assert t1.factor2_false_failure(10, 10) == pytest.approx(2 * stats.f.sf(4, 9, 9), rel=1e-12)
    # the module docstring's numbers
    assert (
        round(100 * t1.factor2_false_failure(3)),
        round(100 * t1.factor2_false_failure(10), 1),
    ) == (24, 1.3)
    assert (
        round(100 * t1.factor2_false_failure(3, 10)),
        round(100 * t1.factor2_false_failure(10, 10), 1),
    ) == (27, 5.1)
    # a simulated perfect reproduction: normal runs of the paper's σ, ours and (for F) the paper's
    # sample s.d.
    rng = np.random.default_rng(0)
    trials = 200_000
    ours = rng.normal(0, 0.3, (trials, 10)).std(axis=1, ddof=1)
    paper = rng.normal(0, 0.3, (trials, 10)).std(axis=1, ddof=1)
    for reference, want in (
        (0.3, t1.factor2_false_failure(10)),
        (paper, t1.factor2_false_failure(10, 10)),
    ):
        missed = np.mean((ours < reference / 2) | (ours > 2 * reference))
        assert abs(missed - want) < 4 * math.sqrt(want * (1 - want) / trials)
    with pytest.raises(ValueError):
        t1.factor2_false_failure(1)


def test_seed_keys_of_more_seeds_extend_those_of_fewer():
    """The rerun's seed i is the search's seed i (same Poisson batches, noise and μ̂ draws)."""
    few, many = t1.seed_keys("mnist", 3), t1.seed_keys("mnist", t1.PAPER_SEEDS)
    assert np.array_equal(jax.random.key_data(few), jax.random.key_data(many)[:3])


def test_profiles_rerun_at_the_papers_ten_seeds_only_where_the_search_has_fewer():
    assert t1.GRIDS["quick"].seeds == 3 and t1.GRIDS["quick"].spread_seeds == t1.PAPER_SEEDS == 10
    assert t1.GRIDS["quick"].rerun_spread
    # its search has the 10 seeds
    assert t1.GRIDS["paper"].seeds == 10 and not t1.GRIDS["paper"].rerun_spread
    assert not t1.GRIDS["smoke"].rerun_spread
    with pytest.raises(ValueError, match="spread_seeds"):
        dataclasses.replace(t1.GRIDS["quick"], spread_seeds=-1)


def _best(units: list[t1.Unit], pick: dict[tuple, tuple]) -> pd.DataFrame:
    """A selection frame (the columns :func:`select` gives) choosing, per (method, ε), the model
    ``pick[(method, ε)] = (C_F, lr, eps_F)`` of the main units."""
    rows = []
    for unit in units:
        if unit.variant != "main":
            continue
        for m in unit.models:
            if pick.get((m.method, m.epsilon)) == (m.feature_norm, m.learning_rate, m.eps_F):
                rows.append(
                    {
                        "dataset": "mnist",
                        "variant": "main",
                        "method": m.method,
                        "epsilon": m.epsilon,
                        "B": unit.batch_size,
                        "E": unit.epochs,
                        "C_F": m.feature_norm,
                        "lr": m.learning_rate,
                        "eps_F": m.eps_F,
                        "mean": 90.0,
                        "std": 0.1,
                        "seeds": 3,
                        "mean_average_iterate": 90.0,
                    }
                )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("search", ["full", "staged"])
def test_spread_units_rerun_exactly_the_selected_configurations(search):
    grid = t1.grid_for("quick", search)
    ds, units = _units(grid)
    pick = {
        ("dpsgd", 1.0): (100.0, 0.5, None),
        ("dpsgdf", 1.0): (100.0, 2.0, 0.02),
        ("dpsgd", 2.0): (10.0, 2.0, None),
        ("dpsgdf", 2.0): (10.0, 0.5, 0.05),
        ("nonprivate", None): (10.0, 0.25, None),
    }
    best = _best(units, pick)
    assert len(best) == len(pick)
    spread = t1.spread_units(ds, grid, units, best)
    assert len(spread) == 3  # one per ε (DPSGD and DPSGD-F share a sampler) and one non-private
    got = {
        (m.method, m.epsilon): (m.feature_norm, m.learning_rate, m.eps_F)
        for u in spread
        for m in u.models
    }
    assert got == pick and sum(len(u.models) for u in spread) == len(pick)
    search_keys = {u.key for u in units}
    for u in spread:
        assert (
            u.seeds == 10
            and u.stage == "spread"
            and "/spread/" in u.key
            and u.key not in search_keys
        )
        # the search unit whose noise it reuses
        source = next(s for s in units if s.key == u.calibration)
        assert source.variant == "main" and (source.batch_size, source.epochs) == (
            u.batch_size,
            u.epochs,
        )
        assert source.meta["epsilon"] == u.meta["epsilon"] and set(u.models) <= set(source.models)
    # the same configurations give the same rerun units under either protocol
    if search == "staged":
        full_ds, full_units = _units(t1.grid_for("quick", "full"))
        assert [
            u.key for u in t1.spread_units(full_ds, t1.grid_for("quick", "full"), full_units, best)
        ] == [u.key for u in spread]
    # the paper profile's search has 10 seeds
    assert t1.spread_units(ds, t1.GRIDS["paper"], units, best) == []


def test_with_spread_takes_the_reruns_seeds_and_falls_back_to_the_search():
    best = pd.DataFrame(
        [
            {
                "dataset": "mnist",
                "variant": "main",
                "method": "dpsgdf",
                "epsilon": 1.0,
                "B": 4096,
                "E": 40,
                "C_F": 100.0,
                "lr": 2.0,
                "eps_F": 0.02,
                "mean": 91.0,
                "std": 0.05,
                "seeds": 3,
            },
            {
                "dataset": "mnist",
                "variant": "main",
                "method": "nonprivate",
                "epsilon": np.nan,
                "B": 1024,
                "E": 80,
                "C_F": 10.0,
                "lr": 1.0,
                "eps_F": np.nan,
                "mean": 92.0,
                "std": 0.2,
                "seeds": 3,
            },
            {
                "dataset": "mnist",
                "variant": "no_bias",
                "method": "dpsgd",
                "epsilon": 1.0,
                "B": 4096,
                "E": 40,
                "C_F": 100.0,
                "lr": 0.5,
                "eps_F": np.nan,
                "mean": 90.0,
                "std": 0.3,
                "seeds": 2,
            },
        ]
    )
    acc = np.array([91.0, 91.4, 90.7, 91.2, 90.9, 91.6, 91.1, 90.8, 91.3, 91.5])
    rows = pd.DataFrame(
        {
            "dataset": "mnist",
            "variant": "main",
            "method": "nonprivate",
            "epsilon": np.nan,
            "B": 1024,
            "E": 80,
            "C_F": 10.0,
            "lr": 1.0,
            "eps_F": np.nan,
            "seed": range(10),
            "acc_last": acc,
            "stage": "spread",
        }
    )
    out = t1.with_spread(best, rows)
    assert list(out.spread_source) == ["search", "rerun", "search"]
    assert list(out.spread_seeds) == [3, 10, 2]
    assert out.spread_std[1] == pytest.approx(np.std(acc, ddof=1)) and out.spread_mean[
        1
    ] == pytest.approx(acc.mean())
    assert (out.spread_std[0], out.spread_std[2]) == (0.05, 0.3)
    # the search's, kept
    assert list(out["mean"]) == list(best["mean"]) and list(out["std"]) == list(best["std"])
    assert list(t1.with_spread(best, pd.DataFrame()).spread_source) == ["search"] * 3


def test_grid_flops_count_the_rerun_by_hand():
    """The tiny grid of test_grid_flops_by_hand (MNIST subset n = 1000, 2 seeds; private (100, 1):
    10 steps of 100; non-private (250, 2): 8 steps of 250) with 5 spread seeds: one configuration
    per (method, ε) at 5 seeds, here DPSGD-F and DPSGD clipped, non-private not."""
    grid = t1.Grid(
        ("mnist",),
        (1.0,),
        2,
        ((100, 1),),
        (1.0,),
        (1.0,),
        (0.5,),
        ((250, 2),),
        (1.0,),
        (1.0,),
        subset=1000,
        top_k=1,
    )
    clipped, plain = t1.example_step_flops(784, 10), t1.example_step_flops(784, 10, clipped=False)
    base = t1.grid_flops(grid)
    spread = 5 * (2 * 10 * 100 * clipped + 8 * 250 * plain)
    got = t1.grid_flops(dataclasses.replace(grid, spread_seeds=5))
    assert got == {
        "total": base["total"] + spread,
        "mnist": base["mnist"] + spread,
        "spread": spread,
    }
    # no more seeds than the search's
    assert t1.grid_flops(dataclasses.replace(grid, spread_seeds=2)) == base
    staged = t1.grid_flops(dataclasses.replace(grid, spread_seeds=5), "staged")
    assert (
        staged["spread"] == spread
        and staged["total"] == staged["stage1"] + staged["stage2"] + spread
    )
    assert "spread" not in t1.grid_flops("paper")


def _cell_frames(spread_std: float, dpsgd_mean: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A one-dataset (MNIST) search frame and selection with spread columns: every cell's rerun s.d.
    ``spread_std`` (10 seeds), the search's 0.5 (3 seeds; the other configuration, lr = 2, has 1.0);
    DPSGD's mean ``dpsgd_mean``."""
    rows, cells = [], []
    for (method, eps), (paper_mean, _) in t1.PAPER["mnist"].items():
        mean = dpsgd_mean if method == "dpsgd" else paper_mean
        cfg = {
            "dataset": "mnist",
            "variant": "main",
            "method": method,
            "epsilon": eps,
            "B": 4096,
            "E": 40,
            "C_F": 100.0,
            "lr": 0.5,
            "eps_F": 0.02 if method == "dpsgdf" else None,
        }
        for lr, shift, spread in ((0.5, 0.0, 0.5), (2.0, -1.0, 1.0)):
            rows += [
                dict(cfg, lr=lr, seed=s, acc_last=mean + shift + spread * d, acc_average=mean)
                for s, d in enumerate((-1, 0, 1))
            ]
        cells.append(
            dict(
                cfg,
                mean=mean,
                std=0.5,
                seeds=3,
                mean_average_iterate=mean,
                spread_seeds=10,
                spread_mean=mean + 0.01,
                spread_std=spread_std,
                spread_source="rerun",
            )
        )
    return pd.DataFrame(rows), pd.DataFrame(cells)


@pytest.mark.parametrize("spread_std", [0.06, 0.3])
def test_c16_rows_test_the_reruns_spread_and_say_why_dpsgds_differs(spread_std):
    grid = t1.GRIDS["quick"]
    frame, best = _cell_frames(spread_std, dpsgd_mean=91.5)
    out = {c.quantity: c for c in t1.comparisons_for(frame, best, grid, "quick", [])}
    for (method, eps), (_, paper_std) in t1.PAPER["mnist"].items():
        qty = (
            f"C16 std Table 1 MNIST {method} eps={eps:g}"
            if eps is not None
            else "C16 std Table 1 MNIST non-private SGD"
        )
        row = out[qty]
        assert row.measured == f"{spread_std:.2f}"  # the rerun's s.d., not the search's 0.5
        assert row.status == ("pass" if paper_std / 2 <= spread_std <= 2 * paper_std else "miss")
        assert "10 seeds: the selected configuration rerun" in row.note and "s.d. 0.50" in row.note
        if method == "dpsgd":
            assert "stronger configuration than the paper's" in row.note
            assert row.note.startswith(
                "expected miss" if row.status == "miss" else "passes, but not like for like"
            )
            assert "of this grid's 2 DPSGD configurations at this eps" in row.note
            assert "3-seed s.d. 0.50-1.00" in row.note and "means 90.50-91.50" in row.note
            # within a factor 2 of the paper's 0.1 (eps = 1): none; of its 1.2 (eps = 2): lr = 2's
            # 1.0
            near = (
                "1 within a factor 2 of the paper's 1.2; C_F=100 lr=2: s.d. 1.00, mean 90.50"
                if eps == 2
                else "0 within a factor 2 of the paper's 0.1. 10 seeds"
            )
            assert near in row.note
        else:
            assert "stronger" not in row.note
    info = out["C16 factor-2 test on a s.d.: chance a perfect reproduction misses"]
    assert info.status == "info" and f"{t1.factor2_false_failure(10):.1%}" in info.measured
    assert f"{t1.factor2_false_failure(10, 10):.1%}" in info.measured
    fair = 1 - (1 - t1.factor2_false_failure(10, 10)) ** 3  # DPSGD-F at two ε and non-private SGD
    assert f"among the 3 DPSGD-F and non-private rows: {fair:.0%}" in info.note


def test_c16_dpsgd_row_claims_no_stronger_configuration_where_ours_is_weaker():
    frame, best = _cell_frames(0.06, dpsgd_mean=85.0)  # below the paper's 87.4 / 89.6
    out = {c.quantity: c for c in t1.comparisons_for(frame, best, t1.GRIDS["quick"], "quick", [])}
    note = out["C16 std Table 1 MNIST dpsgd eps=1"].note
    assert (
        "stronger" not in note
        and "expected" not in note
        and "mean 85.00 against the paper's 87.4" in note
    )


@pytest.mark.slow  # an experiment end to end, twice
@pytest.mark.data
def test_spread_rerun_smoke_end_to_end_and_resumes(tmp_path, data_dir):
    """A smoke grid (2 seeds) with 3 spread seeds: the selected configurations rerun at 3 seeds,
    seeds 0 and 1 the search's own streams; selection.csv has the rerun's spread beside the
    search's mean; a rerun of the experiment recomputes nothing."""
    from experiments import RunContext
    from experiments.results import Progress, UnitStore

    grid = dataclasses.replace(
        t1.GRIDS["smoke"], learning_rates=(0.5, 4.0), np_learning_rates=(0.5, 4.0), spread_seeds=3
    )

    def run():
        store = UnitStore(tmp_path / ".units")
        ctx = RunContext("smoke", tmp_path, store, Progress("t", quiet=True), data_dir)
        return t1.run_grid(ctx, grid)

    comparisons = run()
    runs = pd.read_csv(tmp_path / "runs.csv")
    search, spread = runs[runs.stage == "full"], runs[runs.stage == "spread"]
    selection = pd.read_csv(tmp_path / "selection.csv")
    cfg = lambda f: sorted(  # noqa: E731
        (r.method, r.lr, -1 if pd.isna(r.eps_F) else r.eps_F) for r in f.itertuples()
    )
    assert cfg(spread[spread.seed == 0]) == cfg(selection)  # exactly the selected configurations
    assert set(spread.seed) == {0, 1, 2} and len(spread) == 3 * len(selection)
    assert all("/spread/" in g for g in spread.group) and (spread.search == "full").all()
    assert (selection.spread_source == "rerun").all() and (selection.spread_seeds == 3).all()
    assert (selection.seeds == 2).all()  # the cells' means stay the search's
    for r in selection.itertuples():
        mine = spread[(spread.method == r.method) & (spread.lr == r.lr)]
        assert r.spread_std == pytest.approx(np.std(mine.acc_last, ddof=1))
        assert r.spread_mean == pytest.approx(mine.acc_last.mean())
        assert r.mean == pytest.approx(
            search[
                (search.method == r.method)
                & (search.lr == r.lr)
                & (search.eps_F.isna() if pd.isna(r.eps_F) else search.eps_F == r.eps_F)
            ].acc_last.mean()
        )
        # seeds 0 and 1 are the search's seed keys, and the same noise multipliers
        first = mine[mine.seed < 2].sort_values("seed")
        twin = search[
            (search.method == r.method)
            & (search.lr == r.lr)
            & (search.C_F == r.C_F)
            & (search.eps_F.isna() if pd.isna(r.eps_F) else search.eps_F == r.eps_F)
        ].sort_values("seed")
        assert list(first.z.fillna(-1)) == list(twin.z.fillna(-1))
        # the same streams, up to rounding
        assert np.allclose(first.acc_last, twin.acc_last, atol=3.0)
    c16 = [
        c
        for c in t1.comparisons_for(search, selection, grid, "quick", [])
        if c.quantity.startswith("C16 std")
    ]
    assert len(c16) == 3 and all("3 seeds: the selected configuration rerun" in c.note for c in c16)
    units = sorted((tmp_path / ".units").glob("*.json"))
    assert any("spread" in u.name for u in units)
    stamps = {u: u.stat().st_mtime_ns for u in units}
    again = run()
    assert all(u.stat().st_mtime_ns == s for u, s in stamps.items())
    assert [c.measured for c in again] == [c.measured for c in comparisons]
