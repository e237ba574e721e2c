"""Parquet through the DataLoader: the same batches for every worker count and mode, exact
resume in a fresh process."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import digest
from tests.sources.formats.parquet.pipeline import build, digests, run_fresh, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: Any) -> list[str]:
    return write_corpus(str(tmp_path_factory.mktemp("corpus")))


@pytest.mark.parametrize("workers,mode", [(2, "thread"), (2, "process")])
def test_batches_equal_for_every_worker_count_and_mode(corpus: list[str], workers: int, mode: str) -> None:
    base = {"paths": corpus, "seed": 3, "batch": 8, "workers": 0}
    want = digests(build(base))
    assert len(want) == 38  # 150 records, 2 epochs, batches of 8 (the last one partial)
    assert digests(build({**base, "workers": workers, "mode": mode})) == want


def test_a_tiny_cache_gives_the_same_batches(corpus: list[str]) -> None:
    base = {"paths": corpus, "seed": 5, "batch": 4, "workers": 0}
    assert digests(build({**base, "cache_bytes": 0})) == digests(build(base))


def test_resume_in_a_fresh_process_is_exact(corpus: list[str]) -> None:
    spec = {"paths": corpus, "seed": 11, "batch": 8, "workers": 0}
    it = iter(build(spec))
    head = [digest(b) for b, _ in zip(it, range(5))]
    state = it.get_state()
    tail = [digest(b) for b, _ in zip(it, range(6))]
    it.close()
    assert head and run_fresh({**spec, "workers": 2}, state, 6) == tail
