"""Isolation for the data tests: no network, no writes to ~/.cache, no leaking in-process cache."""

from __future__ import annotations

import pytest

from dpprep.data import download as dl
from dpprep.data import loaders


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """Cache in tmp_path, downloads off by default, and any real network access fails the test.

    $DPPREP_DATA_DIR is cleared (CI sets it) so a test sees only the directories it names itself.
    """
    monkeypatch.delenv(dl.ENV_DATA_DIR, raising=False)
    monkeypatch.setenv(dl.ENV_CACHE_DIR, str(tmp_path / "cache"))
    monkeypatch.setenv(dl.ENV_NO_DOWNLOAD, "1")

    def no_network(url, *args, **kwargs):
        raise AssertionError(f"test tried to reach the network: {url}")

    monkeypatch.setattr(dl, "urlopen", no_network)
    yield
    # Datasets built from tmp_path files must not outlive the test in the lru_cache.
    loaders._load_cached.cache_clear()
