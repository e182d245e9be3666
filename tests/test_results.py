"""The results helpers: atomic writes, resumable units, comparisons, provenance."""

from __future__ import annotations

import json
import os

import pytest

from dpprep.results import Comparison, UnitStore, atomic_write_text, comparisons_frame, package_versions


def test_unit_store_computes_once_and_resumes(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"accuracy": 0.9, "seed": 3}

    store = UnitStore(tmp_path / "units")
    assert store.run("method=a/eps=1/seed=3", compute) == {"accuracy": 0.9, "seed": 3}
    # A new store on the same directory (a restarted run) finds the finished unit.
    again = UnitStore(tmp_path / "units").run("method=a/eps=1/seed=3", compute)
    assert again == {"accuracy": 0.9, "seed": 3} and len(calls) == 1
    # fresh=True recomputes.
    UnitStore(tmp_path / "units", fresh=True).run("method=a/eps=1/seed=3", compute)
    assert len(calls) == 2


def test_unit_store_keys_do_not_collide_after_slugging(tmp_path):
    store = UnitStore(tmp_path)
    store.save("a/b", {"v": 1})
    store.save("a_b", {"v": 2})
    assert store.load("a/b") == {"v": 1} and store.load("a_b") == {"v": 2}


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "table.csv"
    atomic_write_text(target, "old")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_numeric_comparison_pass_and_miss():
    assert Comparison.numeric("x", 12.2, 12.2004, rel_tol=1e-4).status == "pass"
    assert Comparison.numeric("x", 12.2, 12.3, rel_tol=1e-4).status == "miss"
    assert Comparison.numeric("x", 1.0, float("nan"), abs_tol=1.0).status == "miss"
    with pytest.raises(ValueError):
        Comparison.numeric("x", 1.0, 1.0)
    frame = comparisons_frame([Comparison.info("y", "3 rows")])
    assert list(frame.columns) == ["quantity", "paper", "measured", "tolerance", "status", "note"]


def test_package_versions_records_the_stack():
    versions = package_versions()
    for name in ("python", "jax", "numpy", "dp-accounting", "dpprep"):
        assert name in versions
    json.dumps(versions)
