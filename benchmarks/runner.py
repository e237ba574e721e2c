"""Runs one benchmark case in a fresh subprocess, with a timeout and peak-RSS polling.

The parent polls the child's process tree (the child and any worker processes)
every 50 ms with psutil and keeps the peak of the summed RSS; the child also
reports its own peak (VmHWM). Processes of the run still alive 3 s after the
child exits (its fork server needs a moment to notice) are counted
(``leftover_processes``) and terminated by pid; so are the /dev/shm entries the
run left (``leftover_shm``, see ``shm_left``). ``benchmarks.run`` prints both for
every run and exits non-zero when any run left something.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

import psutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SETTLE_S = 3.0


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc] + proc.children(recursive=True)
    except psutil.Error:
        return []


def _rss_sum(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _terminate(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=2)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def left_behind(procs: list[psutil.Process], settle_s: float = _SETTLE_S) -> list[psutil.Process]:
    """The processes of ``procs`` still running ``settle_s`` seconds from now (zombies aside)."""
    _, alive = psutil.wait_procs(procs, timeout=settle_s)
    out = []
    for p in alive:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def shm_names() -> set[str]:
    """The entries of /dev/shm now (empty where there is none)."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def shm_left(before: set[str], pids: set[int]) -> list[str]:
    """The /dev/shm entries that appeared since ``before`` and belong to the run's processes ``pids``.

    Other users of a shared machine create and remove entries too, and most names say
    nothing of their owner, so an entry is blamed on the run only when its name says
    so: it names thresher, or one of its numbers is a pid of the run (PyTorch's
    ``torch_<pid>_...``, ``...<pid>...`` in general).
    """
    out = []
    for name in sorted(shm_names() - before):
        numbers = {int(n) for n in re.findall(r"\d+", name)}
        if "thresher" in name or numbers & pids:
            out.append(name)
    return out


def run_case(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Runs ``spec`` (see benchmarks.child) in a subprocess; returns its result dict."""
    with tempfile.TemporaryDirectory(prefix="thresher-bench-") as tmp:
        spec = dict(spec, result_path=os.path.join(tmp, "result.json"))
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        log_path = os.path.join(tmp, "log.txt")
        shm_before = shm_names()
        t0 = time.perf_counter()
        with open(log_path, "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "benchmarks.child", spec_path], cwd=REPO_ROOT,
                                    env=env, stdout=log, stderr=subprocess.STDOUT)
        ps = psutil.Process(proc.pid)
        known: dict[int, psutil.Process] = {}
        peak, timed_out = 0, False
        while proc.poll() is None:
            procs = _tree(ps)
            for p in procs[1:]:
                known.setdefault(p.pid, p)
            peak = max(peak, _rss_sum(procs))
            if time.perf_counter() - t0 > timeout_s:
                timed_out = True
                _terminate(_tree(ps))
                break
            time.sleep(0.05)
        proc.wait()
        wall = time.perf_counter() - t0
        # Per-interpreter helpers of the child (multiprocessing's fork server, its resource
        # tracker) exit by themselves once they see the child gone, a few tens of ms later:
        # counted at once they looked "left behind" after every run with workers. Only what
        # is still alive after _SETTLE_S is.
        leftover = left_behind(list(known.values()))
        if leftover:
            _terminate(leftover)
        leftover_shm = shm_left(shm_before, {proc.pid, *known})
        with open(log_path, errors="replace") as f:
            log_text = f.read()
        if timed_out:
            result: dict[str, Any] = {"status": "error", "reason": f"timed out after {timeout_s:.0f} s"}
        elif os.path.exists(spec["result_path"]):
            with open(spec["result_path"]) as f:
                result = json.load(f)
        else:
            result = {"status": "error", "reason": f"the run exited with code {proc.returncode} and no result"}
        if result["status"] == "error":
            result["log_tail"] = log_text[-2000:]
        result["peak_rss_total_mib"] = peak / 2**20
        result["wall_s"] = wall
        result["leftover_processes"] = len(leftover)
        result["leftover_shm"] = leftover_shm
        return result
