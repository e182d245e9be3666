"""Sun et al. (2024) Table 1: staged search (seed 0 over the grid, then the top k at all seeds),
the unchanged full search, and the grid's FLOP count."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from experiments import sun2024_table1 as t1

SHAPES = {"mnist": 60_000, "fashion_mnist": 60_000, "cifar100_features": 50_000}
# sha256 of every full-search unit (key, B, E, seeds, variant, models) as built before staged search
# existed (commit 96376d9): the full search's units, and so its cached results, must stay valid.
FULL_KEYS_BEFORE = {
    "smoke": (2, "b592a35d8f1f8286cab0f2e651badc799612d64078cc9db1244780e0be27531a"),
    "quick": (15, "61bcee0eb0b3d276283eccd288cd0a5995172ec511a599e0c6c27467eacc4df8"),
    "paper": (315, "fae9d76da7375ca15fc5dd97ee84b4e812b17e3302cfd4655af2f8bfd4c2bc8f"),
}


def _units(grid: t1.Grid) -> list[t1.Unit]:
    out = []
    for name in grid.datasets:
        n = min(SHAPES[name], grid.subset) if grid.subset else SHAPES[name]
        out += t1.build_units({"name": name, "unit": np.zeros((n, 1), np.float32)}, grid)
    return out


@pytest.mark.parametrize("profile", sorted(FULL_KEYS_BEFORE))
def test_full_search_units_and_keys_unchanged(profile, monkeypatch):
    monkeypatch.delenv(t1.SEARCH_ENV, raising=False)
    grid = t1.grid_for(profile)
    assert grid.search == "full" and t1.grid_for(profile, "full") == grid
    keys = [
        (u.key, u.batch_size, u.epochs, u.seeds, u.variant, len(u.models)) for u in _units(grid)
    ]
    digest = hashlib.sha256(json.dumps(keys).encode()).hexdigest()
    assert (len(keys), digest) == FULL_KEYS_BEFORE[profile]
    assert all(u.stage == "full" and u.calibration is None for u in _units(grid))


def test_search_is_chosen_by_argument_or_environment(monkeypatch):
    monkeypatch.setenv(t1.SEARCH_ENV, "staged")
    assert t1.grid_for("paper").search == "staged" and t1.grid_for("paper", "full").search == "full"
    assert t1.GRIDS["paper"].search == "full"  # the paper profile's full grid stays the default
    with pytest.raises(ValueError, match="search"):
        dataclasses.replace(t1.GRIDS["smoke"], search="greedy")
    with pytest.raises(ValueError, match="top_k"):
        dataclasses.replace(t1.GRIDS["smoke"], top_k=0)


def test_stage1_keys_are_distinct_and_seed_zero_only():
    full = _units(t1.GRIDS["paper"])
    staged = _units(t1.grid_for("paper", "staged"))
    assert len(staged) == len(full)
    assert not {u.key for u in staged} & {u.key for u in full}
    assert all(u.seeds == 1 and u.stage == "stage1" and "/stage1/" in u.key for u in staged)


def _stage1_frame(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for method, eps in (("dpsgd", 1.0), ("dpsgdf", 1.0), ("nonprivate", None)):
        for b in (256, 512):
            for lr in (0.5, 1.0, 2.0):
                for eps_f in (0.02, 0.05) if method == "dpsgdf" else (None,):
                    rows.append(
                        {
                            "dataset": "mnist",
                            "variant": "main",
                            "method": method,
                            "epsilon": eps,
                            "B": b,
                            "E": 20,
                            "C_F": 10.0,
                            "lr": lr,
                            "eps_F": eps_f,
                            "seed": 0,
                            "acc_last": float(rng.choice([80.0, 85.0, 90.0])),
                        }
                    )  # ties on purpose
    return pd.DataFrame(rows)


@pytest.mark.parametrize("k", [1, 2, 3, 50])
def test_top_k_is_exactly_the_k_best_of_stage1(k):
    frame = _stage1_frame(np.random.default_rng(k))
    chosen = t1.top_k(frame, k)
    for method, part in frame.groupby("method"):
        # best first, then grid order
        order = sorted(range(len(part)), key=lambda i: (-part.acc_last.iloc[i], i))
        want = part.iloc[order[:k]]
        got = chosen[chosen.method == method]
        assert len(got) == min(k, len(part))
        assert sorted(got.acc_stage1) == sorted(want.acc_last)
        assert list(got["rank"].sort_values()) == list(range(1, len(got) + 1))
        keys = lambda f: sorted(  # noqa: E731
            (r.B, r.lr, -1 if pd.isna(r.eps_F) else r.eps_F) for r in f.itertuples()
        )
        assert keys(got) == keys(want)


def test_staged_selection_of_a_full_run_is_best_mean_within_top_k():
    rng = np.random.default_rng(0)
    base = _stage1_frame(rng)
    frame = pd.concat(
        [
            base.assign(
                seed=s, acc_last=base.acc_last + rng.normal(0, 2, len(base)), acc_average=0.0
            )
            for s in range(3)
        ],
        ignore_index=True,
    )
    staged, full = t1.staged_selection(frame, 2), t1.select(frame)
    chosen = t1.top_k(frame, 2)
    for r in staged.itertuples():
        assert ((chosen.method == r.method) & (chosen.B == r.B) & (chosen.lr == r.lr)).any()
        f = full[full.method == r.method].iloc[0]
        assert r.mean <= f["mean"] + 1e-9  # the full search's choice is the best mean of all
    big = t1.staged_selection(frame, 1000)  # k covering the grid: the full search's choice
    assert list(big["mean"]) == pytest.approx(list(full["mean"]))


def test_grid_flops_by_hand():
    """Tiny grid: MNIST (d = 784, K = 10) subset n = 1000, ε = 1, 2 seeds; private (B, E) = (100,
    1): Poisson, T = E·n/B = 10 steps of expected batch 100, models DPSGD-F(ε_F = 0.5) and DPSGD;
    non-private (250, 2): shuffled, T = 2 · ⌈1000/250⌉ = 8 steps of 250, one model."""
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
    clipped = 4 * 784 * 10 + 2 * 784 + 8 * 10  # 33,008
    plain = 4 * 784 * 10 + 5 * 10  # 31,410
    assert (t1.example_step_flops(784, 10), t1.example_step_flops(784, 10, clipped=False)) == (
        clipped,
        plain,
    )
    private = 2 * 2 * 10 * 100 * clipped  # seeds × models × steps × batch × per example-step
    nonprivate = 2 * 1 * 8 * 250 * plain
    assert private + nonprivate == 257_672_000
    full = t1.grid_flops(grid)
    assert full == {"total": 257_672_000, "mnist": 257_672_000}
    staged = t1.grid_flops(grid, "staged")
    stage1 = (private + nonprivate) // 2  # seed 0 only
    # top 1 of each of dpsgdf, dpsgd, non-private
    stage2 = 2 * 10 * 100 * clipped * 2 + 2 * 8 * 250 * plain
    assert staged == {
        "total": stage1 + stage2,
        "mnist": stage1 + stage2,
        "stage1": stage1,
        "stage2": stage2,
        "stage2_mean": stage2,
    }
    assert t1.grid_flops(grid, rows="padded")["total"] > full["total"]  # Poisson batches are padded
    assert t1.projected_gpu_hours(3600 * t1.GPU_FLOP_RATE) == pytest.approx(1.0)


def test_paper_grid_flops_and_staged_saving():
    full, staged = t1.grid_flops("paper"), t1.grid_flops("paper", "staged")
    # the 3.7e17 (benchmarks/grid_throughput.py: 4dK per example, E·n examples per run)
    # plus the plan's whole steps (+0.6 %) and the softmax/clipping O(d + K) terms (+1.7 %)
    assert full["total"] == pytest.approx(3.823e17, rel=1e-3)
    assert staged["stage1"] == pytest.approx(full["total"] / 10)  # one seed of ten
    assert staged["stage2_mean"] < staged["stage2"] < 0.01 * full["total"]


@pytest.mark.slow  # an experiment end to end
@pytest.mark.data
def test_staged_search_smoke_end_to_end(tmp_path, data_dir):
    """Stage 1 over a 2-learning-rate smoke grid at seed 0, stage 2 the top 1 per method at both
    seeds, selection from stage 2; a rerun resumes from the unit store and recomputes nothing."""
    from experiments import RunContext
    from experiments.results import Progress, UnitStore

    grid = dataclasses.replace(
        t1.GRIDS["smoke"],
        learning_rates=(0.5, 4.0),
        np_learning_rates=(0.5, 4.0),
        search="staged",
        top_k=1,
    )

    def run():
        store = UnitStore(tmp_path / ".units")
        ctx = RunContext("smoke", tmp_path, store, Progress("t", quiet=True), data_dir)
        return t1.run_grid(ctx, grid)

    comparisons = run()
    runs = pd.read_csv(tmp_path / "runs.csv")
    stage1, stage2 = runs[runs.stage == "stage1"], runs[runs.stage == "stage2"]
    # (1 + 1 eps_F) x 2 lr private, 2 non-private
    assert set(stage1.seed) == {0} and len(stage1) == 2 * 3
    assert set(stage2.seed) == {0, 1} and (runs.search == "staged").all()
    chosen = t1.top_k(stage1, 1)
    assert len(chosen) == 3  # one per method
    cfg = lambda f: sorted((r.method, r.lr) for r in f.itertuples())  # noqa: E731
    assert cfg(stage2[stage2.seed == 0]) == cfg(chosen)  # stage 2 runs exactly stage 1's top k
    assert all("/stage2/" in g for g in stage2.group) and all("/stage1/" in g for g in stage1.group)
    selection = pd.read_csv(tmp_path / "selection.csv")
    assert (selection.search == "staged").all() and (selection.seeds == 2).all()
    assert cfg(selection) == cfg(chosen)
    assert pd.read_csv(tmp_path / "stage1_top_k.csv").shape[0] == 3
    assert comparisons[0].note == "search=staged"
    units = sorted((tmp_path / ".units").glob("*.json"))
    stamps = {u: u.stat().st_mtime_ns for u in units}
    again = run()
    assert all(u.stat().st_mtime_ns == s for u, s in stamps.items())
    assert [c.measured for c in again] == [c.measured for c in comparisons]
