"""Sun et al. (2024) experiments: Table 2's blocked diameter, smoke runs."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.sun2024_table2 import diameter


def test_blocked_diameter_is_exact_over_all_pairs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(301, 5)).astype(np.float32)
    x[7] = 0.0  # a zero row
    brute = max(
        np.linalg.norm(x[i].astype(np.float64) - x[j]) for i in range(len(x)) for j in range(len(x))
    )
    got, (i, j) = diameter(x, block=64)
    assert got == pytest.approx(brute, rel=1e-6)
    assert np.linalg.norm(x[i].astype(np.float64) - x[j]) == pytest.approx(brute, rel=1e-9)


def test_bad_cifar_features_file_is_refused(tmp_path):
    """A user-supplied features file with wrong shapes or non-finite values: ValueError naming
    it."""
    from experiments.sun2024_table1 import GRIDS, load_dataset

    folder = tmp_path / "cifar100_features"
    folder.mkdir()
    rng = np.random.default_rng(0)
    good = dict(
        x_train=rng.normal(size=(20, 8)).astype(np.float32),
        y_train=rng.integers(0, 100, 20),
        x_test=rng.normal(size=(5, 8)).astype(np.float32),
        y_test=rng.integers(0, 100, 5),
    )
    for bad, match in (
        (dict(good, x_test=good["x_test"][:, :7]), "features"),
        (dict(good, y_train=good["y_train"][:19]), "y_train"),
        (dict(good, x_train=np.where(np.eye(20, 8) > 0, np.nan, good["x_train"])), "non-finite"),
    ):
        np.savez(folder / "features.npz", **bad)
        with pytest.raises(ValueError, match=match):
            load_dataset("cifar100_features", GRIDS["smoke"], tmp_path)
    np.savez(folder / "features.npz", **good)
    ds = load_dataset("cifar100_features", GRIDS["smoke"], tmp_path)
    assert ds["num_classes"] == 100 and ds["unit"].shape == (20, 8)


@pytest.mark.data
def test_table1_smoke_resumes_without_redoing_units(smoke_out, data_dir):
    """Kill-and-resume: a unit lost is recomputed, finished units are not touched."""
    from experiments import run_experiment

    first = run_experiment("sun2024_table1", "smoke", smoke_out, data_dir=data_dir, quiet=True)
    assert any(c.quantity.startswith("Table 1 MNIST dpsgdf") for c in first)
    units = sorted((smoke_out / "sun2024_table1" / ".units" / "smoke").glob("*.json"))
    assert len(units) >= 3  # groups and their calibrations
    stamps = {u: u.stat().st_mtime_ns for u in units}
    lost = next(u for u in units if "main" in u.name and "calibration" not in u.name)
    lost.unlink()
    second = run_experiment("sun2024_table1", "smoke", smoke_out, data_dir=data_dir, quiet=True)
    assert lost.exists()
    assert all(u.stat().st_mtime_ns == t for u, t in stamps.items() if u != lost)
    assert [c.measured for c in first] == [c.measured for c in second]


@pytest.mark.data
def test_selection_smoke_pays_the_tuning_and_resumes(smoke_run, smoke_out, data_dir):
    """sun2024_selection (issue 22 item 3) from the session's smoke run: each private method's
    search is accounted end to end at its target (DPSGD-F's mean charged once, as a statistic),
    the same run reported training-only claims less, and a rerun recomputes nothing."""
    import pandas as pd

    from experiments import run_experiment
    from experiments.sun2024_selection import DELTA, GRIDS

    out = smoke_out / "sun2024_selection"
    runs = pd.read_csv(out / "runs.csv")
    grid = GRIDS["smoke"]
    private = runs[runs.method != "nonprivate"]
    assert sorted(private.method) == sorted(["dpsgdf", "dpsgd"] * len(grid.epsilons))
    for r in private.itertuples():
        assert (
            r.epsilon_end_to_end <= r.epsilon_target * (1 + 1e-6)
            and r.epsilon_end_to_end > 0.95 * r.epsilon_target
        )
        assert r.delta == DELTA and r.accountant == "rdp"
        assert r.epsilon_training_only_same_run < r.epsilon_end_to_end
        assert r.epsilon_selection > r.epsilon_training
        assert 10.0 < r.test_accuracy <= 100.0  # better than chance on 10 classes
        assert r.C_F in grid.feature_norms and r.lr in grid.learning_rates
        if r.method == "dpsgdf":
            assert r.charged == "private statistics+selection+training" and r.eps_F in grid.eps_fs
            assert r.epsilon_private_statistics > 0
        else:
            assert r.charged == "selection+training" and pd.isna(r.eps_F)
    nonprivate = runs[runs.method == "nonprivate"].iloc[0]
    assert nonprivate.charged == "nothing" and nonprivate.lr in grid.np_learning_rates
    assert (out / "accuracy_vs_epsilon.png").stat().st_size > 10_000
    comparisons = pd.read_csv(out / "comparisons.csv")
    rows = comparisons[comparisons.quantity.str.contains("tuning paid")]
    assert len(rows) == len(private) and rows.note.str.contains("end-to-end eps=").all()
    units = sorted((out / ".units" / "smoke").glob("*.json"))
    stamps = {u: u.stat().st_mtime_ns for u in units}
    again = run_experiment("sun2024_selection", "smoke", smoke_out, data_dir=data_dir, quiet=True)
    assert all(u.stat().st_mtime_ns == t for u, t in stamps.items())  # nothing recomputed
    assert [c.measured for c in again] == list(
        pd.read_csv(out / "comparisons.csv").measured.astype(str)
    )


@pytest.mark.data
def test_selection_draws_repeat_the_procedure_and_draw_zero_is_the_single_draw(
    smoke_out, data_dir, tmp_path, monkeypatch
):
    """With ``draws`` > 1 every cell repeats the whole selection with fresh randomness (the rows
    give mean ± s.d.); draw 0 is bitwise the single-draw protocol's run."""
    import dataclasses

    import pandas as pd

    from experiments import run_experiment, sun2024_selection

    single = pd.read_csv(smoke_out / "sun2024_selection" / "runs.csv")
    monkeypatch.setitem(
        sun2024_selection.GRIDS,
        "smoke",
        dataclasses.replace(sun2024_selection.GRIDS["smoke"], draws=2),
    )
    comparisons = run_experiment(
        "sun2024_selection", "smoke", tmp_path, data_dir=data_dir, quiet=True
    )
    runs = pd.read_csv(tmp_path / "sun2024_selection" / "runs.csv")
    private = runs[runs.method != "nonprivate"]
    for method, cell in private.groupby("method"):
        assert sorted(cell["draw"]) == [0, 1]
        assert cell.z.nunique() == 1  # one calibration per cell
        first = single[(single.method == method)].iloc[0]
        zero = cell[cell["draw"] == 0].iloc[0]
        assert (
            zero.test_accuracy == first.test_accuracy
            and zero.noisy_validation_score == first.noisy_validation_score
        )
        assert cell.noisy_validation_score.nunique() == 2  # the second draw is another run
    paid = [c for c in comparisons if "tuning paid" in c.quantity]
    assert len(paid) == 2 and all(" ± " in c.measured and "(2 draws)" in c.measured for c in paid)


def test_table2_recomputes_the_row_of_a_replaced_features_file(tmp_path, monkeypatch):
    """A unit is keyed on the content of a user-supplied file it reads (a replaced .npz used to
    keep its old row); a registered dataset's units keep their keys (its sha256 is in the code)."""
    import types

    import pandas as pd

    from experiments import run_experiment, sun2024_table2
    from experiments.results import data_identity

    monkeypatch.setattr(sun2024_table2, "DATASETS", ("cifar100_features",))  # no MNIST to load
    monkeypatch.delenv("DPPREP_DATA_DIR", raising=False)
    monkeypatch.setenv("DPPREP_NO_DOWNLOAD", "1")
    folder = tmp_path / "data" / "cifar100_features"
    folder.mkdir(parents=True)

    def table_after_writing(seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        np.savez(
            folder / "features.npz",
            x_train=rng.normal(size=(30, 6)).astype(np.float32),
            y_train=rng.integers(0, 100, 30),
            x_test=rng.normal(size=(5, 6)).astype(np.float32),
            y_test=rng.integers(0, 100, 5),
        )
        run_experiment("sun2024_table2", "smoke", tmp_path / "out", data_dir=tmp_path / "data")
        return pd.read_csv(tmp_path / "out" / "sun2024_table2" / "table2.csv")

    first, second = table_after_writing(0), table_after_writing(1)
    assert list(first["dataset"]) == ["cifar100_features"]
    assert first.drop(columns="dataset").to_numpy().tolist() != (
        second.drop(columns="dataset").to_numpy().tolist()
    )
    assert len(list((tmp_path / "out" / "sun2024_table2" / ".units" / "smoke").iterdir())) == 2
    assert data_identity(types.SimpleNamespace(name="mnist", files=("unread",))) == ""
