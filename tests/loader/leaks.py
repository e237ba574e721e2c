"""Leak checks for the worker tests: child processes, /dev/shm, descriptors, mappings."""

from __future__ import annotations

import contextlib
import gc
import os
import time
from typing import Iterator

import psutil


def _shm() -> set[str]:
    """The /dev/shm entries thresher could be blamed for.

    thresher's results travel in anonymous memory (memfd) and never get a name. On a
    shared machine other people's processes keep creating and removing their own
    entries here (``psm_*``, ``sem.mp-*``), which cannot be told apart from ours; so
    this per-test check looks at names with "thresher" in them, and the strict check
    (no entry at all, SIGKILL included) runs in a private /dev/shm: see
    test_workers_shm_namespace.py.
    """
    if not os.path.isdir("/dev/shm"):
        return set()
    return {n for n in os.listdir("/dev/shm") if "thresher" in n}


def _children() -> set[int]:
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum("thresher-result" in line for line in f)


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
