"""Fixtures of the loader tests: real ArrayRecord files, and leak checks for worker tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.loader import worker_helpers as wh
from tests.loader.leaks import leak_check

N_RECORDS = wh.N_RECORDS


@pytest.fixture(scope="session")
def records_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One ArrayRecord file of N_RECORDS records (keys 0..199)."""
    path = str(tmp_path_factory.mktemp("data") / "images.array_record")
    return wh.write_records(path, range(N_RECORDS))


@pytest.fixture(scope="session")
def _helpers_started() -> None:
    """Starts multiprocessing's long-lived helpers (fork server, resource tracker) once, so
    that they are part of every leak check's baseline rather than counted as leaks."""
    from thresher.loader import warm_start
    from thresher.loader.pool.worker_start import prestart

    prestart()
    assert warm_start.wait(120.0)  # the fork server answers: iterators start their workers directly
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


@pytest.fixture
def no_leaks(_helpers_started: None) -> Iterator[None]:
    with leak_check():
        yield
