"""Shared fixtures. Tests that need the real data skip without it, unless DPPREP_REQUIRE_DATA=1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

# CI runs the property tests on a fixed example sequence, so a landing never depends on which
# examples a random draw found; locally they explore afresh (and remember failures).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def _candidate_data_dirs() -> list[Path]:
    candidates = []
    if os.environ.get("DPPREP_DATA_DIR"):
        candidates.append(Path(os.environ["DPPREP_DATA_DIR"]))
    candidates.append(REPO.parent / "shared" / "data")
    return candidates


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory with the real dataset copies (e.g. ../shared/data)."""
    for candidate in _candidate_data_dirs():
        if (candidate / "SHA256SUMS").exists() or (candidate / "mnist").is_dir():
            return candidate
    message = f"real data not found (looked in {[str(c) for c in _candidate_data_dirs()]}); set DPPREP_DATA_DIR"
    if os.environ.get("DPPREP_REQUIRE_DATA") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _no_calibration_disk_cache(monkeypatch):
    """Hermetic tests: no calibration (nor CorrDP's rebalanced Sepsis set) is read from or written
    to the user's cache (tests of the on-disk caches turn them back on in a tmp dir)."""
    monkeypatch.setenv("DPPREP_CALIBRATION_CACHE", "0")
    monkeypatch.setenv("DPPREP_CORRDP_CACHE", "0")
