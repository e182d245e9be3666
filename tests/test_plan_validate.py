"""``run_all --plan`` computes no unit, has a row per experiment and labels its projections, with
the FLOP count of a GLM grid pinned by hand; ``--validate`` runs every sweep shape cut short (an
explicit ``max_steps``/``first_chunk_only`` passed by its store, no global state), saves nothing,
and fails naming the experiment on a broken compile."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
import time
import types
from pathlib import Path

import jax
import numpy as np
import pytest

import experiments
from dpprep import models, sweeps
from dpprep.algorithms import Hyper, TrainConfig
from dpprep.plan import DPPlan
from experiments import planning, results

pytestmark = (
    pytest.mark.slow
)  # paper-profile planning: every experiment's sweep shapes compiled and run

REPO = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 4)).astype(np.float32)
Y = RNG.integers(0, 3, size=64)
MODEL = models.softmax_regression(4, 3)


def _run_all():
    spec = importlib.util.spec_from_file_location(
        "run_all_plan_tests", REPO / "scripts" / "run_all.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------------
# plan


def test_sun2024_table1_paper_flops_pinned_by_hand():
    # 240 private models/unit (4 C_F × 10 η × (5 ε_F + DPSGD)) at 2 ε, 40 non-private (4 × 10); 10
    # seeds; in each of the 35 (B, E) groups a private model (Poisson) takes ⌈E·n/B⌉ steps of B
    # expected examples, a non-private one (shuffled epochs) E·⌈n/B⌉ steps of B; per example
    # 4dk + 5k FLOPs (logits, residual, gradient sum), + 2d + 3k for clipping when private.
    groups = [
        (b, e) for b in (256, 512, 1024, 2048, 4096, 8192, 16384) for e in (20, 40, 80, 160, 320)
    ]
    by_hand = 0.0
    for n, d, k in ((60_000, 784, 10), (60_000, 784, 10), (50_000, 640, 100)):
        private_rows = sum(math.ceil(e * n / b) * b for b, e in groups)
        nonprivate_rows = sum(e * math.ceil(n / b) * b for b, e in groups)
        by_hand += 10 * (
            2 * 240 * private_rows * (4 * d * k + 5 * k + 2 * d + 3 * k)
            + 40 * nonprivate_rows * (4 * d * k + 5 * k)
        )
    c = planning.cost("sun2024_table1", "paper")
    assert c.flops == pytest.approx(by_hand, rel=1e-12)
    assert c.flops == pytest.approx(3.82e17, rel=1e-3)
    assert c.units == 3 * (2 * 35 + 35)
    assert c.peak_bytes > 16 * 2**30  # the grid's 16 GiB memory budget plus the data
    assert "staged search" in c.basis
    # the quick profile follows the module's GRIDS, not a copy of them
    quick = planning.cost("sun2024_table1", "quick")
    assert quick.units < c.units and quick.flops < c.flops


def test_glm_flops():
    assert (
        planning.glm_flops(784, 10, 1000) == (4 * 784 * 10 + 2 * 784 + 8 * 10) * 1000 == 33_008_000
    )


def test_plan_has_a_row_per_experiment_with_labelled_projections(monkeypatch):
    monkeypatch.setitem(
        experiments.REGISTRY,
        "brand_new",
        ("experiments.brand_new", "an experiment without a cost model"),
    )
    selected = list(experiments.REGISTRY)
    text = planning.plan_report(
        selected, "paper", gpu_flops=1e13, cpu_rate=(1e11, "stated for the test")
    )
    assert (
        "PROJECTIONS" in text and "1e+13 FLOP/s, a STATED assumption" in text and "MEASURED" in text
    )
    rows = [
        line
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| experiment")
    ]
    assert [r.split("|")[1].strip() for r in rows] == selected
    by_id = {r.split("|")[1].strip(): [cell.strip() for cell in r.split("|")[1:-1]] for r in rows}
    assert "no cost model" in by_id["brand_new"][-2] and by_id["brand_new"][-1] == "—"
    sun = by_id["sun2024_table1"]
    assert sun[2] == f"{planning.cost('sun2024_table1', 'paper').flops:.3g}"
    assert (
        sun[4].endswith("(projection)") and sun[5].endswith("(projection)") and "(est.)" in sun[3]
    )
    assert "accounting only" in by_id["hu2024_table1"][-2]
    # a time is either a labelled projection, accounting seconds or absent
    for cells in by_id.values():
        assert all(
            t == "—"
            or t.endswith(("(projection)", "(projection, floor)"))
            or t.startswith("seconds")
            for t in cells[4:6]
        )
    assert by_id["audit"][4].startswith("≥ ") and by_id["audit"][4].endswith("(projection, floor)")


def test_plan_cli_computes_and_saves_no_unit(tmp_path, monkeypatch, capsys):
    run_all = _run_all()

    def no_unit(*args, **kwargs):
        raise AssertionError("--plan ran an experiment")

    monkeypatch.setattr(experiments, "run_experiment", no_unit)
    monkeypatch.setattr(experiments, "load", no_unit)
    for where in (planning, planning.plan):  # run_all's and plan_report's name for it
        monkeypatch.setattr(where, "measured_sweep_rate", lambda: (1e11, "stated for the test"))
    out = tmp_path / "out"
    assert (
        run_all.main(["--profile", "paper", "--plan", "--out", str(out), "--gpu-flops", "2e13"])
        == 0
    )
    text = capsys.readouterr().out
    assert "2e+13 FLOP/s" in text and "| sun2024_table1 | 315 |" in text
    assert not out.exists() or not any(out.rglob("*"))  # the store directory stays empty
    with pytest.raises(SystemExit):
        run_all.main(["--profile", "paper", "--plan", "--shard", "1/2"])


def test_measured_sweep_rate_is_a_plausible_rate():
    rate, how = planning.measured_sweep_rate(steps=4, points=4)
    # an XLA that dropped the training would read ~1e15
    assert 1e8 < rate < 1e13 and "FLOP in" in how


# --------------------------------------------------------------------------------------------------
# sweeps: the explicit validation parameters


def _plan(sampling: str = "full", **layout) -> DPPlan:
    """A private plan (C = 1, z = 1) on the 64 rows of X, laid out by ``layout`` (steps or
    epochs)."""
    if sampling != "full":
        layout.setdefault("batch_size", 16)
    return DPPlan.create(
        sampling, X.shape[0], l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-5, **layout
    )


def _config(steps: int, sampling: str = "full", **kw) -> TrainConfig:
    return TrainConfig(MODEL, Hyper(0.5), _plan(sampling, steps=steps), **kw)


def test_sweep_points_max_steps_and_first_chunk_only():
    keys = jax.random.split(jax.random.key(0), 2)
    lrs = {"learning_rate": np.linspace(0.1, 1.0, 7)}
    chunks: list[tuple[int, int]] = []
    cut = sweeps.sweep_points(
        _config(50),
        MODEL.init(None),
        (X, Y),
        keys,
        lrs,
        chunk_size=3,
        max_steps=2,
        first_chunk_only=True,
        on_chunk=lambda done, total: chunks.append((done, total)),
    )
    short = sweeps.sweep_points(_config(2), MODEL.init(None), (X, Y), keys, lrs, chunk_size=3)
    assert chunks[-1] == (3, 3)  # the progress still sees every chunk
    for a, b in zip(jax.tree_util.tree_leaves(cut.params), jax.tree_util.tree_leaves(short.params)):
        assert a.shape == b.shape == (2, 7, *a.shape[2:])
        np.testing.assert_allclose(a[:, :3], b[:, :3], rtol=1e-6)  # the first chunk: 2 real steps
        np.testing.assert_array_equal(a[:, 3:6], a[:, :3])  # later chunks repeat it
    full = sweeps.sweep_points(_config(50), MODEL.init(None), (X, Y), keys, lrs, chunk_size=3)
    assert not np.allclose(
        jax.tree_util.tree_leaves(full.params)[0], jax.tree_util.tree_leaves(cut.params)[0]
    )
    with pytest.raises(ValueError, match="max_steps"):
        sweeps.sweep_points(_config(5), MODEL.init(None), (X, Y), keys, lrs, max_steps=0)


def test_sweep_datasets_max_steps_and_first_chunk_only():
    xs = np.stack([X, 2 * X, 3 * X])
    keys = jax.random.split(jax.random.key(1), 3)
    args = (
        MODEL.init(None),
        xs,
        Y,
        keys,
        {"noise_multiplier": np.ones(3)},
        {"learning_rate": np.array([0.1, 1.0])},
    )
    cut = sweeps.sweep_datasets(
        _config(40), *args, chunk_size=2, max_steps=2, first_chunk_only=True
    )
    short = sweeps.sweep_datasets(_config(2), *args, chunk_size=2)
    np.testing.assert_allclose(cut["loss"][:2], short["loss"][:2], rtol=1e-6)
    np.testing.assert_array_equal(cut["loss"][2], cut["loss"][0])


# --------------------------------------------------------------------------------------------------
# validate


def _fake_module(calls: list[str]) -> types.ModuleType:
    """An experiment whose one grid is 3 run_groups units: two of one compiled shape (they differ in
    epochs only), one of another (batch size)."""

    def run(ctx):
        base = dataclasses.replace(
            _config(1, sampling="poisson"), plan=_plan("poisson", epochs=4.0)
        )
        lrs = {"learning_rate": np.linspace(0.1, 1.0, 5)}
        groups = [
            sweeps.Group("e4", base, lrs),
            sweeps.Group("e8", dataclasses.replace(base, plan=_plan("poisson", epochs=8.0)), lrs),
            sweeps.Group(
                "b32",
                dataclasses.replace(base, plan=_plan("poisson", batch_size=32, epochs=4.0)),
                lrs,
            ),
        ]
        calls.append(ctx.profile)
        keys = jax.random.split(jax.random.key(3), 2)
        out = results.run_groups(
            groups, MODEL.init(None), (X, Y), keys, ctx.store, eval_data=(X, Y), chunk_size=2
        )
        return [results.Comparison.info("fake", str(len(out)))]

    module = types.ModuleType("fake_validate_experiment")
    module.run = run  # type: ignore[attr-defined]
    return module


@pytest.fixture
def fake(monkeypatch):
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "fake_validate_experiment", _fake_module(calls))
    monkeypatch.setitem(
        experiments.REGISTRY, "fake", ("fake_validate_experiment", "a fake sweep experiment")
    )
    return calls


def test_validate_store_runs_each_shape_once_cut_short(fake, tmp_path, monkeypatch):
    seen: list[dict] = []
    real = sweeps.sweep_points

    def spy(*args, **kwargs):
        seen.append({k: kwargs.get(k) for k in ("max_steps", "first_chunk_only")})
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeps, "sweep_points", spy)
    monkeypatch.chdir(tmp_path)
    report = planning.validate_experiment("fake", "paper", max_steps=2)
    assert report["validated"] and report["units"] == 3 and report["shapes"] == 2
    assert seen == [{"max_steps": 2, "first_chunk_only": True}] * 2
    assert not any(tmp_path.rglob("*")), "validate wrote into the working directory"


def test_run_groups_units_are_sweep_units_and_still_plain_callables():
    groups = [
        sweeps.Group("a", _config(3, sampling="poisson"), {"learning_rate": np.array([0.1, 1.0])})
    ]
    captured = {}

    class Store:
        def run_many(self, items, costs=None):
            captured["items"] = items
            return [compute() for _, compute in items]

    out = results.run_groups(
        groups,
        MODEL.init(None),
        (X, Y),
        jax.random.split(jax.random.key(0), 2),
        Store(),
        eval_data=(X, Y),
    )
    ((key, unit),) = captured["items"]
    assert (
        isinstance(unit, results.SweepUnit)
        and unit.shape is not None
        and hash(unit.shape) is not None
    )
    assert np.shape(out[0]["evaluation"]["accuracy"]) == (2, 2)


def test_validate_cli_exits_1_naming_the_experiment_on_a_broken_compile(fake, monkeypatch, capsys):
    run_all = _run_all()
    assert run_all.main(["--profile", "paper", "--validate", "--only", "fake"]) == 0
    assert (
        "validated fake: 3 grid units, 2 distinct compiled shapes run at 2 steps"
        in capsys.readouterr().out
    )

    def broken(*args, **kwargs):
        raise RuntimeError("injected compile failure")

    monkeypatch.setattr(sweeps, "_compiled", broken)
    assert run_all.main(["--profile", "paper", "--validate", "--only", "fake"]) == 1
    captured = capsys.readouterr()
    assert "VALIDATE FAILED: fake" in captured.out and "injected compile failure" in captured.err


def test_validate_smoke_sun2024_table1_and_hu2024_fig3(data_dir):
    """The real sweep experiments end to end at the smoke profile (the paper one:
    docs/reproducing.md)."""
    for experiment_id in ("sun2024_table1", "hu2024_fig3"):
        report = planning.validate_experiment(experiment_id, "smoke", data_dir)
        assert report["validated"] and report["units"] >= 1 and report["shapes"] >= 1, report


def test_validate_says_why_not(monkeypatch):
    assert planning.should_validate("hu2024_table1", "paper") == (True, "")  # cheap: run whole
    go, why = planning.should_validate("sun2024_counterexample", "paper")
    # a serial experiment whose count is a lower bound
    assert not go and "projection is a floor" in why
    from experiments.sun2024_counterexample import cost as counterexample_cost

    monkeypatch.setattr(counterexample_cost, "cost", lambda p: planning.Cost(None, None, None, "x"))
    go, why = planning.should_validate("sun2024_counterexample", "paper")
    assert not go and "running it would run it whole" in why  # no FLOP count at all


def test_measured_units_sum_the_recorded_computing_times(tmp_path):
    from experiments.results import UnitStore

    store = UnitStore(tmp_path / "exp" / ".units" / "paper")
    store.run("slow", lambda: (time.sleep(0.05), {"v": 1})[1])
    store.save("old", {"v": 2})  # a unit from before times were recorded
    (tmp_path / "exp" / ".units" / "paper" / "broken.json").write_text("{not json")
    units, timed, seconds = planning.measured_units(tmp_path, "exp", "paper")
    assert (units, timed) == (2, 1) and 0.05 <= seconds < 5
    assert planning.measured_units(tmp_path, "exp", "quick") == (0, 0, 0.0)
    note = planning.measured_note("exp", [("paper", tmp_path), ("quick", tmp_path)])
    assert note.startswith("paper: 1 units timed (+1 untimed), ") and "quick" not in note
    text = planning.plan_report(
        ["datasets", "exp"],
        "paper",
        gpu_flops=1e13,
        cpu_rate=(1e11, "stated"),
        measured_in=[("paper", tmp_path)],
    )
    assert "| measured here |" in text and f"paper in {tmp_path}" in text
    rows = {
        line.split("|")[1].strip(): line.split("|")[-2].strip()
        for line in text.splitlines()
        if line.startswith("| ")
    }
    assert rows["exp"] == note and rows["datasets"] == "—"
