"""``python -m dpprep.data verify|fetch`` and the ``datasets`` experiment."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pandas as pd

from dpprep.data import download as dl
from dpprep.data.__main__ import main
from dpprep.data.registry import FILES, FILES_BY_PATH


def test_verify_real_data_dir_subprocess(data_dir, tmp_path):
    env = {"PATH": "", "DPPREP_CACHE_DIR": str(tmp_path / "cache"), "DPPREP_NO_DOWNLOAD": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "dpprep.data", "verify", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    ok = [line for line in result.stdout.splitlines() if line.startswith("OK ")]
    assert len(ok) == len(FILES)
    assert "MISSING  cifar100_features/features.npz" in result.stdout


def test_verify_reports_missing_and_corrupt(tmp_path, data_dir, capsys):
    (tmp_path / "insurance").mkdir()
    (tmp_path / "insurance" / "insurance.csv").write_bytes(b"age,sex\n")
    (tmp_path / "adult").mkdir()
    shutil.copy(data_dir / "adult" / "adult.names", tmp_path / "adult" / "adult.names")
    assert main(["verify", "--data-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "CORRUPT  insurance/insurance.csv" in out and FILES_BY_PATH["insurance/insurance.csv"].sha256 in out
    assert "OK       adult/adult.names" in out and "MISSING  adult/adult.data" in out


def test_verify_without_corrupt_files_succeeds_even_if_files_are_missing(tmp_path, capsys):
    assert main(["verify", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("MISSING") == len(FILES) + 1


def test_fetch_downloads_missing_into_cache(tmp_path, data_dir, monkeypatch, capsys):
    spec = FILES_BY_PATH["insurance/insurance.csv"]
    served = []

    def fake_urlopen(url, timeout=None):
        served.append(url)
        import io

        return io.BytesIO((data_dir / spec.relpath).read_bytes())

    monkeypatch.setattr(dl, "urlopen", fake_urlopen)
    assert main(["fetch", "insurance"]) == 0
    assert "FETCHED  insurance/insurance.csv" in capsys.readouterr().out
    assert (tmp_path / "cache" / spec.relpath).is_file() and served == [spec.urls[0]]
    assert main(["fetch", "insurance"]) == 0  # already present: no second download
    assert "PRESENT  insurance/insurance.csv" in capsys.readouterr().out and len(served) == 1


def test_fetch_reports_failures_and_user_provided_features(capsys):
    # the autouse fixture makes every URL unreachable
    assert main(["fetch", "insurance", "cifar100_features"]) == 1
    out = capsys.readouterr().out
    assert "FAILED   insurance/insurance.csv" in out and "SKIP     cifar100_features/features.npz" in out


def test_datasets_experiment_smoke(tmp_path, data_dir):
    from experiments import run_experiment

    comparisons = run_experiment("datasets", "smoke", tmp_path, data_dir=data_dir, quiet=True)
    assert comparisons and all(c.status in ("pass", "info") for c in comparisons), [
        c for c in comparisons if c.status == "miss"
    ]
    table = pd.read_csv(tmp_path / "datasets" / "datasets.csv")
    assert {"adult", "mnist", "corrdp_synthetic", "cifar100_features"} <= set(table["dataset"])
    assert table.set_index("dataset").loc["cifar100_features", "status"] in ("absent", "loaded")
    assert table["versions"].notna().all()
    assert (tmp_path / "datasets" / "datasets.md").read_text().startswith("# Datasets")


def test_datasets_experiment_includes_user_features_when_present(tmp_path, data_dir):
    import numpy as np

    from experiments import run_experiment

    root = tmp_path / "data"
    root.mkdir()
    for folder in data_dir.iterdir():
        if folder.is_dir():
            (root / folder.name).symlink_to(folder)
    (root / "cifar100_features").mkdir()
    rng = np.random.default_rng(0)
    np.savez(
        root / "cifar100_features" / "features.npz",
        x_train=rng.normal(size=(30, 4)), y_train=rng.integers(0, 100, 30),
        x_test=rng.normal(size=(10, 4)), y_test=rng.integers(0, 100, 10),
    )  # fmt: skip
    comparisons = run_experiment("datasets", "smoke", tmp_path / "out", data_dir=root, quiet=True)
    (cifar,) = [c for c in comparisons if c.quantity.startswith("cifar100_features")]
    assert cifar.measured == "30/10 x 4"
    row = pd.read_csv(tmp_path / "out" / "datasets" / "datasets.csv").set_index("dataset").loc["cifar100_features"]
    assert row["status"] == "loaded" and row["n_train"] == 30 and row["num_classes"] == 100
