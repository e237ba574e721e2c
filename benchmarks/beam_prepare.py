"""Preparing MNIST-like examples: one-process ``prepare`` against Beam's DirectRunner.

Each run is a fresh subprocess (``--child``) whose process tree is sampled for RSS every
0.1 s: for ``prepare`` the one process; for Beam the launching process (the DirectRunner
keeps its shuffle data there) and each SDK worker process separately. Examples are made
from their keys where they are needed (by the generator in one process, by the workers
on Beam), so no input list is held anywhere. Shards are a fixed 25,000 records
(``--records-per-shard``), so a shard, the unit a Beam worker holds, is the same at every
dataset size.

    python -m benchmarks.beam_prepare --sizes 100000,200000 --repeats 3

Modes: ``prepare`` (one process, ``keyed=True``), ``beam`` (``thresher.beam.WriteDataset``
on the DirectRunner, 2 worker processes) and ``gbk`` (the same runner grouping the same
pixels into the same number of shards with no thresher code: what the runner itself costs).
Output: records/s and peak RSS per process (MiB), medians over the repeats, and the
ratio to ``prepare`` for the same size.
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
from typing import Any, Iterator

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


def child(mode: str, n: int, out: str, per_shard: int) -> None:
    import thresher as th

    shards = max(1, n // per_shard)
    if mode == "prepare":
        th.prepare(out, {"train": (_example(i) for i in range(n))}, features=_features(),
                   num_shards=shards, keyed=True, progress=False, name="mnistlike")
        return
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    import thresher.beam  # noqa: F401

    opts = PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")
    with beam.Pipeline("DirectRunner", options=opts) as p:
        examples = p | beam.Create(range(-(-n // CHUNK))) | beam.FlatMap(_chunk, n)
        if mode == "beam":
            _ = examples | th.beam.WriteDataset(out, features=_features(), num_shards=shards,
                                               name="mnistlike")
        else:  # "gbk": the runner alone: the same pixels grouped into the same shards, no thresher
            _ = (examples | beam.Map(lambda kv: (kv[0] % shards, kv[1]["image"].tobytes()))
                 | beam.GroupByKey() | beam.MapTuple(lambda k, v: sum(len(x) for x in v)))


def _sample(pid: int, peaks: dict[int, tuple[str, int]], stop: threading.Event) -> None:
    import psutil

    root = psutil.Process(pid)
    while not stop.is_set():
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                rss = p.memory_info().rss
                role = "main" if p.pid == pid else ("worker" if "sdk_worker" in " ".join(p.cmdline())
                                                    else "other")
            except psutil.Error:
                continue
            if rss > peaks.get(p.pid, ("", 0))[1]:
                peaks[p.pid] = (role, rss)
        stop.wait(0.1)


def measure(mode: str, n: int, per_shard: int = RECORDS_PER_SHARD) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="beam-bench-")
    try:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.beam_prepare", "--child", mode, str(n),
                                 os.path.join(tmp, "ds"), str(per_shard)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        peaks: dict[int, tuple[str, int]] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, peaks, stop))
        sampler.start()
        _, err = proc.communicate()
        seconds = time.perf_counter() - t0
        stop.set()
        sampler.join()
        if proc.returncode:
            raise RuntimeError(f"{mode} {n} failed:\n{err.decode(errors='replace')[-3000:]}")
        mib = 1 << 20
        workers = [r / mib for role, r in peaks.values() if role == "worker"]
        return {"mode": mode, "n": n, "seconds": seconds, "records_per_s": n / seconds,
                "main_mib": max((r for role, r in peaks.values() if role == "main"), default=0) / mib,
                "worker_mib": max(workers, default=0.0), "workers": len(workers)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,200000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--records-per-shard", type=int, default=RECORDS_PER_SHARD)
    ap.add_argument("--modes", default="prepare,beam,gbk")
    ap.add_argument("--child", nargs=4, metavar=("MODE", "N", "OUT", "PER_SHARD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2], int(args.child[3]))
        return
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.modes.split(",")}
        for _ in range(args.repeats):
            for mode in runs:  # interleaved, so both modes see the same machine load
                runs[mode].append(measure(mode, n, args.records_per_shard))
        for mode, rs in runs.items():
            row = {k: statistics.median(r[k] for r in rs) for k in
                   ("records_per_s", "main_mib", "worker_mib", "seconds")}
            row.update(mode=mode, n=n, workers=rs[0]["workers"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'size':>8} {'mode':>8} {'records/s':>10} {'main MiB':>9} {'worker MiB':>11} {'ratio':>6}")
    for r in rows:
        base = next((x for x in rows if x["n"] == r["n"] and x["mode"] == "prepare"), r)
        print(f"{r['n']:>8} {r['mode']:>8} {r['records_per_s']:>10.0f} {r['main_mib']:>9.0f} "
              f"{r['worker_mib']:>11.0f} {r['records_per_s'] / base['records_per_s']:>6.2f}")


if __name__ == "__main__":
    main()
