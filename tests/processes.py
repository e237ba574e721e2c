"""What a test can leave behind, read from /proc: live descendant processes and thresher's shared memory.

No psutil: the checks run after every test, so they read only what they need.

- ``descendants()``: the processes below this one (children, their children, ...), with
  their state letter. thresher's workers are children of multiprocessing's fork server,
  not of the test process, so direct children alone would miss them. A process whose
  parent died is re-parented to init and is out of sight here; the tests that kill a
  training process check its workers by pid.
- ``singletons()``: this interpreter's multiprocessing fork server and resource tracker.
  They are started once, on first use, and live as long as the interpreter by design
  (DESIGN invariant 7 names them): never counted, but their children (the workers) are.
- ``thresher_shm()``: /dev/shm entries with "thresher" in their name. thresher's results
  travel in anonymous memory (memfd), so none should ever exist; other users' entries on
  a shared machine cannot be told apart, so only thresher's names are looked at.
- ``result_mappings()``: this process's mappings of worker results (the memfd's name).
"""

from __future__ import annotations

import glob
import os

__all__ = ["cmdline", "descendants", "live_descendants", "parent", "result_mappings", "singletons", "thresher_shm"]

_SINGLETONS = ("from multiprocessing.forkserver import main", "from multiprocessing.resource_tracker import main")


def _stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state letter) of ``pid``, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0]


def _children(pid: int) -> set[int]:
    """The children of ``pid`` (every thread's, /proc/PID/task/TID/children; a full scan elsewhere)."""
    files = glob.glob(f"/proc/{pid}/task/*/children")
    if files:
        out: set[int] = set()
        for name in files:
            try:
                with open(name) as f:
                    out.update(int(c) for c in f.read().split())
            except OSError:
                pass
        return out
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[0] == pid:
                out.add(int(entry))
    return out


def descendants(pid: int | None = None) -> dict[int, str]:
    """Every process below ``pid`` (default: this one) -> its state letter (R, S, D, T, Z, ...)."""
    root = os.getpid() if pid is None else pid
    out: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in _children(todo.pop()):
            st = _stat(child)
            if st is not None and child not in out:
                out[child] = st[1]
                todo.append(child)
    return out


def live_descendants() -> set[int]:
    """The descendants that are not zombies (a zombie has exited; only its exit code is left)."""
    return {pid for pid, state in descendants().items() if state != "Z"}


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def parent(pid: int) -> int | None:
    st = _stat(pid)
    return None if st is None else st[0]


def singletons() -> set[int]:
    """This interpreter's fork server and resource tracker (direct children, recognised by command line)."""
    return {pid for pid in _children(os.getpid()) if any(s in cmdline(pid) for s in _SINGLETONS)}


def thresher_shm() -> set[str]:
    if not os.path.isdir("/dev/shm"):
        return set()
    return {n for n in os.listdir("/dev/shm") if "thresher" in n}


def result_mappings() -> int:
    try:
        with open("/proc/self/maps") as f:
            return sum("thresher-result" in line for line in f)
    except OSError:
        return 0
