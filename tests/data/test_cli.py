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
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
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
    assert (
        "CORRUPT  insurance/insurance.csv" in out
        and FILES_BY_PATH["insurance/insurance.csv"].sha256 in out
    )
    assert "OK       adult/adult.names" in out and "MISSING  adult/adult.data" in out


def test_verify_fails_when_files_are_missing(tmp_path, capsys):
    assert main(["verify", "--data-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().out.count("MISSING") == len(FILES) + 1


def test_verify_fails_when_the_data_dir_does_not_exist(tmp_path, capsys):
    assert main(["verify", "--data-dir", str(tmp_path / "typo")]) == 1
    out = capsys.readouterr().out
    assert (
        f"--data-dir {tmp_path / 'typo'}: not a directory" in out
        and out.count("MISSING") == len(FILES) + 2
    )


def test_verify_named_datasets_only_and_optional_features(data_dir, capsys):
    assert main(["verify", "insurance", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert (
        "OK       insurance/insurance.csv" in out and "adult" not in out and "cifar100" not in out
    )
    # The user-provided features count as missing only when asked for by name.
    assert main(["verify", "insurance", "cifar100_features", "--data-dir", str(data_dir)]) == 1
    assert "MISSING  cifar100_features/features.npz\n" in capsys.readouterr().out


def test_verify_lists_every_file_past_an_unreadable_one(data_dir, monkeypatch, capsys):
    verify_file = dl.verify_file

    def unreadable_adult(path, spec):
        if spec.dataset == "adult":
            raise PermissionError(13, "Permission denied", str(path))
        return verify_file(path, spec)

    monkeypatch.setattr(dl, "verify_file", unreadable_adult)
    assert main(["verify", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert "UNREADABLE adult/adult.data: PermissionError" in out
    assert "OK       insurance/insurance.csv" in out and "Traceback" not in out


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
    assert (
        "FAILED   insurance/insurance.csv" in out
        and "SKIP     cifar100_features/features.npz" in out
    )


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
        x_train=rng.normal(size=(30, 4)),
        y_train=rng.integers(0, 100, 30),
        x_test=rng.normal(size=(10, 4)),
        y_test=rng.integers(0, 100, 10),
    )
    comparisons = run_experiment("datasets", "smoke", tmp_path / "out", data_dir=root, quiet=True)
    (cifar,) = [c for c in comparisons if c.quantity.startswith("cifar100_features")]
    assert cifar.measured == "30/10 x 4"
    row = (
        pd.read_csv(tmp_path / "out" / "datasets" / "datasets.csv")
        .set_index("dataset")
        .loc["cifar100_features"]
    )
    assert row["status"] == "loaded" and row["n_train"] == 30 and row["num_classes"] == 100
