"""Leak checks for the worker tests: child processes, /dev/shm, descriptors, mappings (tests/processes.py),
as a block: stricter than the guard every test runs under (tests/leak_guard.py), it also counts descriptors."""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Iterator

from tests import processes


def _shm() -> set[str]:
    """The /dev/shm entries thresher could be blamed for (named "thresher"; the strict check, no
    entry at all, runs in a private /dev/shm: see test_workers_shm_namespace.py)."""
    return processes.thresher_shm()


def _children() -> set[int]:
    return processes.live_descendants()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mappings() -> int:
    return processes.result_mappings()


@contextlib.contextmanager
def leak_check(timeout: float = 2.0) -> Iterator[None]:
    """Child processes, /dev/shm entries, open descriptors and shared-memory mappings are
    the same after the block as before it (workers get ``timeout`` seconds to go)."""
    gc.collect()
    children, shm, fds = _children(), _shm(), _fds()
    yield
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        now = (_children(), _shm() - shm, _fds(), _mappings())
        if now == (children, set(), fds, 0) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert now[0] == children, f"child processes left: {now[0] - children}"
    assert not now[1], f"/dev/shm entries left: {now[1]}"
    assert now[3] == 0, f"{now[3]} shared-memory mappings left"
    assert now[2] == fds, f"open descriptors: {fds} before, {now[2]} after"
