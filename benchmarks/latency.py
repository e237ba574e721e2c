"""W7, latency-bound storage: every read waits L ms, as on a network filesystem or a bucket.

``python -m benchmarks.latency [--latencies 2,20] [--repeats 3] [--records 4000] [--cap-s 15]``

4,000 records of 64 bytes behind a source whose every ``__getitem__`` sleeps L
(``time.sleep``: the waits of concurrent reads overlap, as they do on such storage;
the idea of the tf.data guide's ``ArtificialDataset``), global shuffle, a decode
map, Batch(64). Rows: thresher with ``worker_count="auto"`` and explicit settings,
Grain's DataLoader (``ReadOptions(num_threads=16)``; 0 and 2 workers), the PyTorch
DataLoader (0 and 2 workers). Each run is a fresh subprocess, rows interleaved;
records/s are medians over the repeats. A run stops after ``--cap-s`` seconds (its
rate so far is the steady rate: one-at-a-time readers would take minutes at 20 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Iterator

import numpy as np

RECORD_BYTES, BATCH, SEED = 64, 64, 7

ROWS: dict[str, dict[str, Any]] = {
    "thresher auto": {"lib": "thresher", "workers": "auto"},
    "thresher w=0 threads=64": {"lib": "thresher", "workers": 0, "threads": 64},
    "thresher w=0 threads=128": {"lib": "thresher", "workers": 0, "threads": 128},
    "thresher w=0 threads=256": {"lib": "thresher", "workers": 0, "threads": 256},
    "thresher w=2 threads=64": {"lib": "thresher", "workers": 2, "threads": 64},
    "grain w=0 threads=16": {"lib": "grain", "workers": 0, "threads": 16},
    "grain w=2 threads=16": {"lib": "grain", "workers": 2, "threads": 16},
    "torch w=0": {"lib": "torch", "workers": 0},
    "torch w=2": {"lib": "torch", "workers": 2},
}


class WaitingSource:
    """``n`` records of 64 bytes; every read sleeps ``latency_s`` (no ``__getitems__``)."""

    def __init__(self, n: int, latency_s: float) -> None:
        self.n, self.latency_s = n, latency_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: int) -> bytes:
        time.sleep(self.latency_s)
        return int(key).to_bytes(8, "little") * (RECORD_BYTES // 8)

    def __repr__(self) -> str:
        return f"WaitingSource({self.n}, {self.latency_s})"


def decode(record: bytes) -> np.ndarray:
    return np.frombuffer(record, np.uint8).astype(np.float32) / 255.0


def _thresher(cfg: dict[str, Any], source: WaitingSource) -> tuple[Iterator[Any], Callable[[], dict[str, Any]]]:
    import thresher as th

    opts = th.ReadOptions(num_threads=cfg.get("threads"))
    loader = th.DataLoader(source, th.IndexSampler(len(source), shuffle=True, seed=SEED),
                           [decode, th.Batch(BATCH, drop_remainder=True)], worker_count=cfg["workers"],
                           read_options=opts)

    def info() -> dict[str, Any]:
        r = loader.autotune_report
        if r is None:
            return {"reads_in_flight": (cfg.get("threads") or 1) * max(1, int(cfg["workers"]))}
        return {"reads_in_flight": max(1, r.read_threads) * max(1, r.worker_count), "autotune": str(r)}

    return iter(loader), info


def _grain(cfg: dict[str, Any], source: WaitingSource) -> tuple[Iterator[Any], Callable[[], dict[str, Any]]]:
    import grain.python as pg

    if cfg["workers"]:
        from absl import flags

        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()

    class Decode(pg.MapTransform):
        def map(self, element: Any) -> Any:
            return decode(element)

    sampler = pg.IndexSampler(len(source), shard_options=pg.NoSharding(), shuffle=True, num_epochs=1, seed=SEED)
    loader = pg.DataLoader(data_source=source, sampler=sampler, operations=[Decode(), pg.Batch(BATCH, True)],
                           worker_count=cfg["workers"], read_options=pg.ReadOptions(num_threads=cfg["threads"]))
    return iter(loader), lambda: {"reads_in_flight": cfg["threads"] * max(1, cfg["workers"])}


class _TorchSet:
    def __init__(self, source: WaitingSource) -> None:
        self.source = source

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i: int) -> np.ndarray:
        return decode(self.source[i])


def _torch(cfg: dict[str, Any], source: WaitingSource) -> tuple[Iterator[Any], Callable[[], dict[str, Any]]]:
    import torch
    from torch.utils.data import DataLoader

    g = torch.Generator()
    g.manual_seed(SEED)
    loader = DataLoader(_TorchSet(source), batch_size=BATCH, shuffle=True, generator=g, drop_last=True,
                        num_workers=cfg["workers"])
    return iter(loader), lambda: {"reads_in_flight": max(1, cfg["workers"])}


def run_one(row: str, records: int, latency_s: float, cap_s: float) -> dict[str, Any]:
    """One run of ``row``: records/s over the whole stream, or over ``cap_s`` seconds."""
    from benchmarks import latency as mod  # pickled by reference in worker processes

    cfg = ROWS[row]
    source = mod.WaitingSource(records, latency_s)
    make = {"thresher": mod._thresher, "grain": mod._grain, "torch": mod._torch}[cfg["lib"]]
    __import__({"thresher": "thresher", "grain": "grain.python", "torch": "torch"}[cfg["lib"]])  # not timed
    started = time.perf_counter()
    it, info = make(cfg, source)
    n = 0
    for batch in it:
        n += int(batch.shape[0])
        if time.perf_counter() - started > cap_s:
            break
    elapsed = time.perf_counter() - started
    close = getattr(it, "close", None)
    if close is not None:
        close()
    return {"records": n, "seconds": elapsed, "records_per_s": n / elapsed, **info()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.latency", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latencies", default="2,20", help="ms per read, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--cap-s", type=float, default=15.0)
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child run: row|latency_ms
    args = ap.parse_args(argv)
    if args.one is not None:
        row, ms = args.one.split("|")
        print(json.dumps(run_one(row, args.records, float(ms) / 1e3, args.cap_s)))
        return 0
    rows = [r.strip() for r in args.rows.split(",") if r.strip()] or list(ROWS)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for ms in [float(x) for x in args.latencies.split(",")]:
        runs: dict[str, list[dict[str, Any]]] = {r: [] for r in rows}
        for _ in range(args.repeats):
            for row in rows:  # interleaved: A B C A B C ...
                proc = subprocess.run([sys.executable, "-m", "benchmarks.latency", "--one", f"{row}|{ms}",
                                       "--records", str(args.records), "--cap-s", str(args.cap_s)],
                                      env=env, capture_output=True, text=True, timeout=args.cap_s * 4 + 60)
                if proc.returncode != 0:
                    print(f"{row} failed: {proc.stderr[-2000:]}", file=sys.stderr)
                    continue
                runs[row].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"\nW7: {args.records} records, L = {ms:g} ms per read, medians of {args.repeats}")
        med = {r: statistics.median(x["records_per_s"] for x in v) for r, v in runs.items() if v}
        grain_best = max((v for r, v in med.items() if r.startswith("grain")), default=float("nan"))
        for row, rate in med.items():
            flight = runs[row][-1]["reads_in_flight"]
            ideal = flight / (ms / 1e3)
            print(f"  {row:28s} {rate:10,.0f} rec/s  x{rate / grain_best:5.2f} Grain's best  "
                  f"{100 * rate / ideal:5.1f}% of ideal ({flight} in flight / L)")
        auto = runs.get("thresher auto")
        if auto:
            print(f"  auto chose: {auto[-1].get('autotune', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
