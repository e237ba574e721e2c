from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes and listings go to a cache directory of the test's own (children inherit it)."""
    monkeypatch.setenv("THRESHER_CACHE_DIR", str(tmp_path_factory.mktemp("thresher-cache")))
