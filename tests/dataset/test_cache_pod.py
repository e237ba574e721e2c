"""One on-disk cache for a pod: 2-3 real jax.distributed processes on 127.0.0.1 build it together.

The map before the cache counts its calls in files: across the whole pod each element is
computed exactly once, each process computes only its part, and every process reads the
same elements as a one-process run.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.dataset.spec import REPO
from tests.test_jax_multiprocess import _free_port

import jax  # noqa: E402,F401  (the pod runs real jax.distributed processes)


def _run_pod(tmp: str, n: int, cfg: dict) -> list[list[list[int]]]:
    cfg = dict(cfg, port=_free_port(), num_processes=n, out=tmp, path=os.path.join(tmp, "c.array_record"))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-m", "tests.dataset.cache_pod_main", str(i), json.dumps(cfg)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True) for i in range(n)]
    try:
        logs = [p.communicate(timeout=150)[0].decode(errors="replace") for p in procs]
        for i, p in enumerate(procs):
            assert p.returncode == 0, f"process {i} exited with {p.returncode}:\n{logs[i][-3000:]}"
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    outs = []
    for i in range(n):
        with open(os.path.join(tmp, f"out-{i}.json")) as f:
            outs.append(json.load(f))
    return outs


def _calls(tmp: str, process: int) -> list[int]:
    out: list[int] = []
    for name in glob.glob(os.path.join(tmp, f"calls-{process}-*.txt")):
        with open(name) as f:
            out += [int(line) for line in f]
    return out


def _expected(n: int, filt: bool, batch: int) -> list[list[int]]:
    xs = [i for i in range(n) if not filt or i % 3 != 0]
    rows = [[i, i] for i in xs]
    if not batch:
        return rows
    return [sum(rows[j:j + batch], []) for j in range(0, len(rows), batch)]


@pytest.mark.parametrize("n,filt,batch,workers", [(3, True, 0, 0), (2, False, 4, 2), (2, True, 4, 0)],
                         ids=["3procs-filter", "2procs-batch-workers", "2procs-filter-batch"])
def test_a_pod_builds_one_cache_computing_each_element_once(tmp_path, n: int, filt: bool, batch: int,
                                                           workers: int) -> None:
    tmp = str(tmp_path)
    size = 61
    outs = _run_pod(tmp, n, {"n": size, "filter": filt, "batch": batch, "workers": workers})
    expected = _expected(size, filt, batch)
    for i, got in enumerate(outs):
        assert got == expected, f"process {i} read other elements"
    per_process = [_calls(tmp, i) for i in range(n)]
    everything = sorted(sum(per_process, []))
    assert everything == list(range(size)), "an element was computed twice, or never, across the pod"
    parts = sorted(glob.glob(os.path.join(tmp, "c.array_record-*")))
    assert [os.path.basename(p) for p in parts] == [f"c.array_record-{i:05d}-of-{n:05d}" for i in range(n)]
    if filt and batch:  # batches after a filter depend on all before them: process 0 builds alone
        assert [len(c) for c in per_process] == [size] + [0] * (n - 1)
    else:
        assert max(len(c) for c in per_process) <= -(-size // n) + batch, "a process computed more than its part"
    # the pod's cache is an ordinary cache: one process opens it and computes nothing
    assert not os.path.exists(os.path.join(tmp, "c.array_record.json.tmp"))
    with open(os.path.join(tmp, "c.array_record.json")) as f:
        meta = json.load(f)
    assert [p["file"] for p in meta["parts"]] == [os.path.basename(p) for p in parts]
    assert sum(p["num_records"] for p in meta["parts"]) == len(expected)
    assert not glob.glob(os.path.join(tmp, "*.done.json"))
