"""Forensics figures (issue 18): ``explain`` at position 10**12, and what skips cost when unused.

- ``explain``: one step of W1's pipeline (Batch 128) on an endless shuffled sampler at
  global position 10**12, for 1 and 4 processes; the reference in the same run is the
  sampler's own per-position API (``sampler[p]`` for the step's positions) and a fresh
  iterator restored at that position up to its first batch (which reads the records).
- W1 (60,000 records, decode, random flip, Batch(128)): records/s with no skips set,
  with skips set past the end of the epoch (the machinery armed but idle), and with
  ``errors="skip"`` (no record fails), for worker_count 0 and 2. Ratios to the
  no-skips run; medians of ``--repeats`` runs, in one process.
- The delivery ledger on W1: records/s without and with ``ledger=DIR`` (one line a
  step, synced by a ``get_state`` every 100 steps in both), worker_count 0 and 2;
  runs interleaved, medians, ratio to the run without.
- The ledger on a packed pipeline (``--packed-records`` token records of 20 to 1,500
  tokens, shuffle, ``pack(2048, window=256)``, ``batch(8)``): rows/s without and with
  ``it.ledger(DIR)`` (a window line a window, a step line a step), same protocol, and
  the ledger's bytes a step.

Usage:
    python benchmarks/forensics.py [--records 60000] [--repeats 3] [--packed-records 20000] [--data DIR]
                                   [--only explain,skips,ledger]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import thresher as th  # noqa: E402
from benchmarks import datasets, work  # noqa: E402

_FAR = 10**12


def _median_s(fn: Callable[[], Any], repeats: int, inner: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times)


def _w1_loader(path: str, n: int, workers: int, *, shards: int = 1, epochs: int | None = 1,
               errors: str = "raise", ledger: str | None = None) -> th.DataLoader:
    sampler = th.IndexSampler(n, shuffle=True, seed=0, num_epochs=epochs, shard_options=th.ShardOptions(0, shards))
    ops = [work.w1_decode, th.RandomMapTransform(work.w1_augment), th.Batch(work.W1_BATCH, drop_remainder=True)]
    return th.DataLoader(th.sources.ArrayRecordSource(path), sampler, ops, worker_count=workers, errors=errors,
                         ledger=ledger)


def explain_figures(path: str, n: int, repeats: int) -> None:
    step = _FAR // work.W1_BATCH
    for shards in (1, 4):
        loader = _w1_loader(path, n, 0, shards=shards, epochs=None)
        explain_s = _median_s(lambda: th.explain(loader, step), repeats, 20)
        sampler = loader.sampler
        first = step * work.W1_BATCH
        per_position_s = _median_s(lambda: [sampler[p] for p in range(first, first + work.W1_BATCH)], repeats, 5)
        state = loader.state_at(first).to_json()

        def restore_and_read() -> None:
            it = iter(_w1_loader(path, n, 0, shards=shards, epochs=None))
            it.set_state(state)
            next(it)
            it.close()

        read_s = _median_s(restore_and_read, repeats, 3)
        print(f"explain step {step:,} (position 10**12), {shards} process(es), {shards * work.W1_BATCH} elements: "
              f"{explain_s * 1e3:.2f} ms | sampler[p] for one process's batch {per_position_s * 1e3:.2f} ms | "
              f"restore + first batch (reads records) {read_s * 1e3:.2f} ms | "
              f"explain/restore+read = {explain_s / read_s:.2f}")


def _epoch_rps(make: Callable[[], th.DataLoaderIterator], n: int) -> float:
    it = make()
    t = time.perf_counter()
    count = sum(len(b["label"]) for b in it)
    elapsed = time.perf_counter() - t
    assert count == (n // work.W1_BATCH) * work.W1_BATCH, count
    return count / elapsed


def skip_figures(path: str, n: int, repeats: int) -> None:
    for workers in (0, 2):
        loader = _w1_loader(path, n, workers)
        skip_loader = _w1_loader(path, n, workers, errors="skip")

        def plain() -> th.DataLoaderIterator:
            return iter(loader)

        def armed() -> th.DataLoaderIterator:
            it = iter(loader)
            it.set_state(it.get_state(), skip_steps=range(10**6, 10**6 + 1))  # past the end: never reached
            return it

        def bad_policy() -> th.DataLoaderIterator:
            return iter(skip_loader)

        runs = {"no skips": plain, "skips armed, idle": armed, "errors='skip', none fail": bad_policy}
        rows: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        for r in range(repeats):  # interleaved and rotated, so load on the machine hits all three alike
            for name in names[r % 3:] + names[:r % 3]:
                rows[name].append(_epoch_rps(runs[name], n))
        base = statistics.median(rows["no skips"])
        for name, values in rows.items():
            m = statistics.median(values)
            print(f"W1 worker_count={workers}  {name:<26} {m:>10,.0f} records/s  ratio {m / base:.3f}")


def _checkpointed_rps(loader: th.DataLoader, n: int) -> float:
    it = iter(loader)
    t = time.perf_counter()
    count = 0
    for step, b in enumerate(it):
        count += len(b["label"])
        if step % 100 == 99:
            it.get_state()  # a checkpoint: with a ledger, its lines are synced to disk
    elapsed = time.perf_counter() - t
    assert count == (n // work.W1_BATCH) * work.W1_BATCH, count
    return count / elapsed


def _interleaved(runs: dict[str, Callable[[], float]], repeats: int, label: str, unit: str) -> float:
    """Runs each of ``runs`` ``repeats`` times, interleaved and alternated; prints medians and ratios to the
    first; returns the first's median."""
    rows: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(repeats):
        for name in names[r % 2:] + names[:r % 2]:
            rows[name].append(runs[name]())
    base = statistics.median(rows[names[0]])
    for name, values in rows.items():
        m = statistics.median(values)
        print(f"{label}  {name:<10} {m:>10,.0f} {unit}  ratio {m / base:.3f}  "
              f"(runs: {', '.join(f'{v:,.0f}' for v in values)})")
    return base


def ledger_figures(path: str, n: int, repeats: int) -> None:
    for workers in (0, 2):
        with tempfile.TemporaryDirectory() as d:
            plain, ledgered = _w1_loader(path, n, workers), _w1_loader(path, n, workers, ledger=d)
            _checkpointed_rps(plain, n)  # warm-up: page cache, fork server
            base = _interleaved({"no ledger": lambda: _checkpointed_rps(plain, n),
                                 "ledger": lambda: _checkpointed_rps(ledgered, n)},
                                repeats, f"W1 worker_count={workers}", "records/s")
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"W1 worker_count={workers}  ledger size after {repeats} epochs: {size:,} bytes")
    # The same cost measured directly (the load on a shared machine swamps a 1% difference): one
    # ledger line, against one W1 step at the median rate of the run without a ledger.
    from thresher.loader.ledger import LedgerWriter

    with tempfile.TemporaryDirectory() as d:
        writer = LedgerWriter(d, 0)
        line_s = _median_s(lambda: writer.step(0, work.W1_BATCH, work.W1_BATCH), repeats, 2000)
        writer.close()
    step_s = work.W1_BATCH / base
    print(f"one ledger line: {line_s * 1e6:.1f} us; one W1 step (worker_count=2 run above): {step_s * 1e3:.2f} ms; "
          f"line/step = {line_s / step_s:.4%}")


def _packed_dataset(n: int) -> th.Dataset:
    import numpy as np

    rng = np.random.default_rng(0)
    docs = [rng.integers(1, 32000, size=int(k), dtype=np.int32) for k in rng.integers(20, 1500, size=n)]
    return th.Dataset.source(docs).shuffle(1).pack(2048, window=256).batch(8)


def _packed_rps(ds: th.Dataset, ledger: str | None) -> tuple[float, int]:
    it = iter(ds)
    if ledger is not None:
        it.ledger(ledger)
    t = time.perf_counter()
    steps = rows = 0
    for b in it:
        rows += len(b["tokens"])
        steps += 1
        if steps % 100 == 0:
            it.get_state()
    return rows / (time.perf_counter() - t), steps


def packed_ledger_figures(n: int, repeats: int) -> None:
    ds = _packed_dataset(n)
    with tempfile.TemporaryDirectory() as d:
        _, steps = _packed_rps(ds, None)  # warm-up
        base = _interleaved({"no ledger": lambda: _packed_rps(ds, None)[0], "ledger": lambda: _packed_rps(ds, d)[0]},
                            repeats, f"packed (pack(2048), batch(8), {n:,} records)", "rows/s")
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"packed: ledger {size / (repeats * steps):,.0f} bytes a step ({steps} steps an epoch)")
    # Measured directly: the lines of one step (a step line, and its share of a window line), and the
    # fsync of a checkpoint, against one packed step at the median rate without a ledger.
    from thresher.loader.ledger import LedgerWriter

    block = ds.compile().loader.engine.processor.source[0]
    with tempfile.TemporaryDirectory() as d:
        writer = LedgerWriter(d, 0)
        window_s = _median_s(lambda: writer.window(0, 0, block.layout), repeats, 200)
        step_line_s = _median_s(lambda: writer.packed([0, 8, 16]), repeats, 2000)
        sync_s = _median_s(writer.sync, repeats, 20)
        writer.close()
    step_s = 8 / base
    per_step = step_line_s + window_s * 8 / block.num_rows
    print(f"packed: a window line {window_s * 1e6:.0f} us ({block.num_rows} rows), a step line "
          f"{step_line_s * 1e6:.1f} us: {per_step * 1e6:.1f} us a step = {per_step / step_s:.2%} of a packed step "
          f"({step_s * 1e3:.2f} ms); the fsync of a checkpoint {sync_s * 1e3:.2f} ms = "
          f"{sync_s / (100 * step_s):.1%} of 100 steps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--packed-records", type=int, default=20000)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "thresher_bench_data"))
    ap.add_argument("--only", default="explain,skips,ledger", help="which figures (comma-separated)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    data = datasets.ensure(args.data, "mnist", args.records)
    if "explain" in only:
        explain_figures(data["path"], args.records, args.repeats)
    if "skips" in only:
        skip_figures(data["path"], args.records, args.repeats)
    if "ledger" in only:
        ledger_figures(data["path"], args.records, args.repeats)
        packed_ledger_figures(args.packed_records, args.repeats)


if __name__ == "__main__":
    main()
