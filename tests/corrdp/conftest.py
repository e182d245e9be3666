"""Hermetic CorrDP tests: the Sepsis rebalancing is not read from or written to the user's cache
(the on-disk cache test turns it back on in a tmp dir)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_corrdp_disk_cache(monkeypatch):
    monkeypatch.setenv("DPPREP_CORRDP_CACHE", "0")
