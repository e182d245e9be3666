"""End to end: ``scripts/run_all.py --profile smoke`` into a temporary directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

import experiments

REPO = Path(__file__).resolve().parents[1]


def _run_all(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "run_all.py"), *args],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )


def test_list_names_every_experiment():
    result = _run_all("--list")
    assert result.returncode == 0, result.stderr
    for experiment_id in experiments.REGISTRY:
        assert experiment_id in result.stdout


def test_unknown_experiment_is_rejected():
    result = _run_all("--only", "no_such_table")
    assert result.returncode != 0 and "unknown experiment" in result.stderr


def test_smoke_profile_end_to_end_and_resume(tmp_path, data_dir):
    out = tmp_path / "results"
    first = _run_all("--profile", "smoke", "--out", str(out), "--data-dir", str(data_dir))
    assert first.returncode == 0, first.stderr[-4000:]
    report = (out / "REPORT.md").read_text()
    for experiment_id in experiments.REGISTRY:
        frame = pd.read_csv(out / experiment_id / "comparisons.csv", keep_default_na=False)
        assert len(frame) > 0 and set(frame["profile"]) == {"smoke"}
        assert set(frame["status"]) <= {"pass", "miss", "info"}
        assert f"`{experiment_id}`" in report
    assert "Not run yet" not in report

    # Resume: a second run computes no finished unit again (no unit file is rewritten) and
    # reproduces the outputs.
    units = sorted(out.glob("*/.units/smoke/*.json"))
    assert units, "the smoke run cached no unit of work"
    stamps = {p: p.stat().st_mtime_ns for p in units}
    before = {p: p.read_bytes() for p in out.rglob("comparisons.csv")}
    second = _run_all("--profile", "smoke", "--out", str(out), "--data-dir", str(data_dir))
    assert second.returncode == 0, second.stderr[-4000:]
    assert {p: p.stat().st_mtime_ns for p in units} == stamps, "finished units were recomputed"
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} changed on resume"

    # An interrupted run (here: half of the units lost) recomputes exactly the missing units.
    lost = units[::2]
    for path in lost:
        path.unlink()
    third = _run_all("--profile", "smoke", "--out", str(out), "--data-dir", str(data_dir))
    assert third.returncode == 0, third.stderr[-4000:]
    assert all(p.exists() for p in lost), "lost units were not recomputed"
    kept = [p for p in units if p not in lost]
    assert {p: p.stat().st_mtime_ns for p in kept} == {p: stamps[p] for p in kept}
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} changed after recomputing lost units"
