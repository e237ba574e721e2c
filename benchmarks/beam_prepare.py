"""Preparing MNIST-like examples: one-process ``prepare`` against Beam with worker processes.

Each run is a fresh subprocess (``--child``). The parent reads the peak resident memory
(``VmHWM`` in ``/proc/<pid>/status``, the kernel's own high-water mark, so no peak is
missed between samples) of the launching process and of every SDK worker process. Examples
are made from their keys where they are needed (by the generator in one process, by the
workers on Beam), so no input list is held anywhere. Shards are a fixed 25,000 records
(``--records-per-shard``), so a shard, the unit a Beam worker holds, is the same at every
dataset size: per-worker memory should then not depend on the dataset's size.

    python -m benchmarks.beam_prepare --sizes 50000,100000,200000 --repeats 3

Modes:
- ``prepare``: one process, ``keyed=True``;
- ``files``: ``thresher.beam.WriteDataset`` (``exchange="files"``, the default: records go
  through spill files, the runner's shuffle carries byte ranges) on the DirectRunner, 2
  worker processes (``direct_running_mode="multi_processing"``);
- ``runner``: the same with ``exchange="runner"`` (records go through the runner's GroupByKey);
- ``runner-si``: ``exchange="runner"`` on Beam's FnApiRunner (what the DirectRunner runs) with
  ``use_state_iterables=True``: grouped values reach workers in pages over the state API,
  as on Dataflow, Flink and Spark, instead of each worker's whole share of a GroupByKey as
  one message;
- ``gbk``: the DirectRunner grouping the same pixels into the same number of shards with no
  thresher code (what the runner itself costs).

Output: records/s, the launcher's (the DirectRunner's controller: it runs in the launching
process and holds every shuffle) and the largest SDK worker's peak RSS (MiB), thresher's own
``held_records`` metric (the most records one WriteShard call held), medians over the
repeats, and records/s as a ratio to ``prepare`` for the same size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

RECORDS_PER_SHARD = 25_000
CHUNK = 5_000


def _example(i: int) -> tuple[int, dict[str, Any]]:
    rng = np.random.default_rng(i)
    return i, {"image": rng.integers(0, 255, (28, 28, 1), dtype=np.uint8), "label": i % 10}


def _chunk(c: int, n: int) -> Iterator[tuple[int, dict[str, Any]]]:
    for i in range(c * CHUNK, min((c + 1) * CHUNK, n)):
        yield _example(i)


def _features() -> Any:
    import thresher as th

    return {"image": th.features.Image((28, 28, 1), encoding="none"),
            "label": th.features.ClassLabel(num_classes=10)}


def child(mode: str, n: int, out: str, per_shard: int) -> dict[str, Any]:
    import thresher as th

    shards = max(1, n // per_shard)
    if mode == "prepare":
        th.prepare(out, {"train": (_example(i) for i in range(n))}, features=_features(),
                   num_shards=shards, keyed=True, progress=False, name="mnistlike")
        return {}
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    import thresher.beam

    opts = PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")
    p = beam.Pipeline(FnApiRunner(use_state_iterables=True) if mode == "runner-si" else "DirectRunner",
                      options=opts)
    examples = p | beam.Create(range(-(-n // CHUNK))) | beam.FlatMap(_chunk, n)
    if mode in ("files", "runner", "runner-si"):
        _ = examples | th.beam.WriteDataset(out, features=_features(), num_shards=shards, name="mnistlike",
                                           exchange="files" if mode == "files" else "runner")
    else:  # "gbk": the runner alone: the same pixels grouped into the same shards, no thresher
        _ = (examples | beam.Map(lambda kv: (kv[0] % shards, kv[1]["image"].tobytes()))
             | beam.GroupByKey() | beam.MapTuple(lambda k, v: sum(len(x) for x in v)))
    result = p.run()
    result.wait_until_finish()
    held = result.metrics().query(MetricsFilter().with_namespace(th.beam.METRICS).with_name("held_records"))
    return {"held_records": max((d.committed.max for d in held["distributions"]), default=0)}


def _hwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return None


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        return out
    return out + [d for c in out for d in _descendants(c)]


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"sdk_worker" in f.read()
    except OSError:
        return False


def _sample(pid: int, peaks: dict[int, tuple[str, int]], stop: threading.Event) -> None:
    """Keeps the latest VmHWM of the child and of each of its worker processes."""
    while not stop.is_set():
        for p in [pid, *_descendants(pid)]:
            kib = _hwm_kib(p)
            if kib is None:
                continue
            role = peaks[p][0] if p in peaks else ("main" if p == pid else
                                                   "worker" if _is_worker(p) else "other")
            peaks[p] = (role, max(kib, peaks.get(p, ("", 0))[1]))
        stop.wait(0.02)


def measure(mode: str, n: int, per_shard: int = RECORDS_PER_SHARD) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="beam-bench-")
    try:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.beam_prepare", "--child", mode, str(n),
                                 os.path.join(tmp, "ds"), str(per_shard)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        peaks: dict[int, tuple[str, int]] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, peaks, stop))
        sampler.start()
        out, err = proc.communicate()
        seconds = time.perf_counter() - t0
        stop.set()
        sampler.join()
        if proc.returncode:
            raise RuntimeError(f"{mode} {n} failed:\n{err.decode(errors='replace')[-3000:]}")
        workers = sorted((kib / 1024 for role, kib in peaks.values() if role == "worker" and kib > 8 * 1024),
                         reverse=True)  # (the boot wrappers, a few MiB each, are not workers)
        extra = json.loads(out.decode().strip().splitlines()[-1])
        return {"mode": mode, "n": n, "seconds": seconds, "records_per_s": n / seconds,
                "main_mib": max((k for role, k in peaks.values() if role == "main"), default=0) / 1024,
                "worker_mib": workers[0] if workers else 0.0, "all_workers_mib": [round(w) for w in workers],
                "held_records": extra.get("held_records", 0)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50000,100000,200000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--records-per-shard", type=int, default=RECORDS_PER_SHARD)
    ap.add_argument("--modes", default="prepare,files,runner")
    ap.add_argument("--child", nargs=4, metavar=("MODE", "N", "OUT", "PER_SHARD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.child[2], int(args.child[3]))))
        return
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.modes.split(",")}
        for _ in range(args.repeats):
            for mode in runs:  # interleaved, so both modes see the same machine load
                runs[mode].append(measure(mode, n, args.records_per_shard))
        for mode, rs in runs.items():
            row = {k: statistics.median(r[k] for r in rs) for k in
                   ("records_per_s", "main_mib", "worker_mib", "seconds", "held_records")}
            row.update(mode=mode, n=n, runs=[r["all_workers_mib"] for r in rs])
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'size':>8} {'mode':>9} {'records/s':>10} {'main MiB':>9} {'worker MiB':>11} {'held':>6} {'ratio':>6}")
    for r in rows:
        base = next((x for x in rows if x["n"] == r["n"] and x["mode"] == "prepare"), r)
        print(f"{r['n']:>8} {r['mode']:>9} {r['records_per_s']:>10.0f} {r['main_mib']:>9.0f} "
              f"{r['worker_mib']:>11.0f} {r['held_records']:>6.0f} {r['records_per_s'] / base['records_per_s']:>6.2f}")


if __name__ == "__main__":
    main()
