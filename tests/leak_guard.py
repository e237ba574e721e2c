"""A pytest plugin: every test (doctests included) must leave no process and no shared memory behind.

After each test the guard compares, with what was there before it:

- the live processes below the test process (tests/processes.py: children, and the
  workers under the fork server): none may be new;
- /dev/shm entries named for thresher: none may be new (there should never be any);
- this process's mappings of worker results (thresher's memfd): no more than before.

Exempt, and why:

- processes that were there before the test (what earlier tests and fixtures started);
- this interpreter's multiprocessing fork server and resource tracker: per-process
  singletons, started on first use (possibly by this very test) and meant to live as
  long as the interpreter; their *children*, the workers, are not exempt;
- processes started while a module- or session-scoped fixture was being set up (a
  server on 127.0.0.1, a JAX cluster): they belong to the fixture, which may well be
  set up in the middle of a test (``request.getfixturevalue``) and is torn down later.

The check is cheap when nothing is left: one walk of /proc/<pid>/task/*/children, one
listing of /dev/shm, one read of /proc/self/maps, no sleep. Only when something is
there does it collect garbage (an iterator dropped in a reference cycle closes its
workers when collected) and poll for up to ``GRACE_S`` seconds (processes exit
asynchronously; ``THRESHER_TEST_LEAK_GRACE_S`` overrides it). What is still there
fails the test with the pids, command lines and names; leftover processes are then
killed so that later tests start clean.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from tests import processes

GRACE_S = 5.0
_POLL_S = 0.02

_fixture_owned: set[int] = set()  # processes started by module/session fixtures (process-wide on purpose)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Generator[None, None, None]:
    """Notes the processes a module- or session-scoped fixture starts: they are the fixture's."""
    if fixturedef.scope == "function":
        yield
        return
    before = processes.live_descendants()
    yield
    _fixture_owned.update(processes.live_descendants() - before - processes.singletons())


def _left(before: set[int]) -> set[int]:
    return processes.live_descendants() - before - processes.singletons() - _fixture_owned


def _report(pids: set[int], shm: set[str], mappings: int, grace: float) -> str:
    lines = []
    if pids:
        lines.append(f"{len(pids)} process(es) left running after the test (still alive {grace:g} s later):")
        servers = processes.singletons()
        for pid in sorted(pids):
            what = ("a worker process (a child of the fork server)" if processes.parent(pid) in servers
                    else processes.cmdline(pid)[:200])
            lines.append(f"  pid {pid}: {what}")
    if shm:
        lines.append(f"/dev/shm entries left by thresher: {sorted(shm)}")
    if mappings:
        lines.append(f"{mappings} more mapping(s) of worker results (thresher-result memfd) than before the test")
    return "\n".join(lines)


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    before, shm_before = processes.live_descendants(), processes.thresher_shm()
    maps_before = processes.result_mappings()
    yield
    grace = float(os.environ.get("THRESHER_TEST_LEAK_GRACE_S", GRACE_S))
    deadline: float | None = None
    while True:
        pids = _left(before)
        shm = processes.thresher_shm() - shm_before
        mappings = processes.result_mappings() - maps_before
        if not pids and not shm and mappings <= 0:
            return
        if deadline is None:
            deadline = time.monotonic() + grace
            gc.collect()
        elif time.monotonic() > deadline:
            break
        else:
            time.sleep(_POLL_S)
    report = _report(pids, shm, max(0, mappings), grace)
    for pid in pids:  # so that the next tests do not inherit them
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    pytest.fail(report, pytrace=False)
