"""Nothing left behind after 100 iterators with workers, however each one ends.

Each cycle opens an iterator with 2 worker processes, takes a few batches and ends it in
one of the ways a training loop does (close(), a with block, exhaustion, ``del it`` without
close, a break mid-epoch, an exception in the loop, set_state into a fresh iterator). Afterwards the process has the
same children, descriptors and shared-memory mappings as before, and no /dev/shm entry.
"""

from __future__ import annotations

import gc
from typing import Any, Callable

import pytest

import thresher as th
from tests.loader import leaks
from tests.loader import worker_helpers as wh

CYCLES = 100


def _loader(records_path: str) -> th.DataLoader:
    return wh.build(records_path, batch=8, shuffle=True, seed=3, random_map=True, workers=2, chunk_size=16)


def _close(it: Any) -> None:
    next(it)
    it.close()


def _with_block(it: Any) -> None:
    with it:
        next(it)
        next(it)


def _exhaust(it: Any) -> None:
    for _ in it:
        pass


def _drop(it: Any) -> None:
    next(it)  # the caller's reference is the last one: the iterator is dropped on return


def _break(it: Any) -> None:
    for i, _ in enumerate(it):
        if i == 2:
            break  # mid-epoch; the caller then drops the iterator without closing it


def _exception(it: Any) -> None:
    with pytest.raises(KeyError):
        with it:
            next(it)
            raise KeyError("the training step failed")


ENDINGS: list[Callable[[Any], None]] = [_close, _with_block, _exhaust, _drop, _break, _exception]


@pytest.mark.usefixtures("_helpers_started")
def test_a_hundred_iterators_with_workers_leave_nothing_behind(records_path: str) -> None:
    loader = _loader(records_path)
    gc.collect()
    fds_before = leaks._fds()
    children_before = leaks._children()
    with leaks.leak_check(timeout=5.0):
        state = None
        for cycle in range(CYCLES):
            it = iter(loader)
            if state is not None and cycle % 10 == 0:
                it.set_state(state)  # a restore starts its own workers: they must go too
            ENDINGS[cycle % len(ENDINGS)](it)
            del it
            if cycle == 1:
                probe = iter(loader)
                next(probe)
                state = probe.get_state()
                probe.close()
                del probe
    # leak_check compared children, fds, /dev/shm and mappings; say it in numbers too.
    gc.collect()
    assert leaks._children() == children_before
    assert leaks._fds() == fds_before
    assert leaks._mappings() == 0
    assert leaks._shm() == set()
