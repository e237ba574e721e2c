"""Parquet read in place: shuffled random access with ParquetSource against its peers.

A corpus of ``--records`` short texts (``--text-bytes`` each, ASCII) and an int64 label,
in ``--files`` Parquet files with row groups of ``--row-group`` rows (snappy, pyarrow's
defaults), written once under ``--dir``. Rows, one process, records/s (median of
``--repeats`` runs, each from a cold start: a new source, an empty cache):

- ``thresher shuffled``: ``ParquetSource.__getitems__`` over batches of ``--batch`` keys
  of a full random permutation (a global shuffle), the decoded data fitting the cache,
  from a new source (every row group decoded once during the run); ``, warm``: the same
  keys again once the cache holds every row group (a second epoch);
- ``thresher BlockShuffle``: the same, keys in the order of ``thresher.BlockShuffle.of_source``
  (row groups shuffled, then records shuffled within windows of ``--window`` row groups);
- ``thresher key order``: the same, keys in order (no shuffle): what a record costs when
  the values it reads lie next to the previous record's in memory;
- ``datasets __getitem__``: ``datasets.Dataset.__getitem__`` on the same keys (its Arrow
  random access), the Dataset made by ``Dataset.from_parquet`` (memory-mapped cache);
  timed on the first ``--hf-records`` keys of the permutation (it is slow);
- ``pyarrow iter_batches``: ``ParquetFile.iter_batches`` + ``RecordBatch.to_pylist`` over
  every file in order (the bare sequential loop; it cannot shuffle);
- ``grain ParquetIterDataset``: Grain's sequential Parquet reader, no global shuffle;
- ``thresher cache/4 shuffled`` and ``thresher cache/4 blocks``: the cache holding a
  quarter of the decoded data; keys of a full shuffle, and keys of the BlockShuffle above,
  with the row-group decodes per record; timed on the first ``--cache4-records`` keys of
  the shuffle (10x as many of the block order).

Ratios are each thresher row's rate over each peer's rate in the same run. One-process rows
are timed in the process's CPU time by default (``--clock cpu``): on a machine shared with
other work, wall time mostly measures the other work. The loader rows (threads, workers,
waits on the server) are timed in wall time.

    python -m benchmarks.parquet_read --records 200000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _jpegs(rng: np.random.Generator, n: int, side: int) -> list[bytes]:
    """``n`` JPEG images of ``side`` x ``side`` pixels: smooth colour gradients with noise
    (quality 90), so that they compress about as photos do."""
    import io

    from PIL import Image

    ramp = np.linspace(0, 0.5, side, dtype=np.float32)
    noise = rng.normal(0, 12, (16, side, side, 3)).astype(np.float32)  # reused: drawing it is the slow part
    bases = rng.integers(0, 256, (n, 2, 3)).astype(np.float32)
    out = []
    for i in range(n):
        pixels = bases[i, 0] * ramp[:, None, None] + bases[i, 1] * ramp[None, :, None] + noise[i % 16]
        buf = io.BytesIO()
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def write_corpus(d: str, records: int, files: int, row_group: int, text_bytes: int,
                 image_side: int = 0) -> list[str]:
    """The corpus files (reused when they exist with these parameters): short texts, or
    with ``image_side`` JPEG images of that many pixels a side (a binary column ``image``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tag = f"r{records}-f{files}-g{row_group}-" + (f"jpeg{image_side}" if image_side else f"t{text_bytes}")
    folder = os.path.join(d, tag)
    paths = [os.path.join(folder, f"train-{i:05d}-of-{files:05d}.parquet") for i in range(files)]
    if all(os.path.exists(p) for p in paths):
        return paths
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    per = records // files
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ", dtype=np.uint8)
    for i, p in enumerate(paths):
        n = per if i < files - 1 else records - per * (files - 1)
        if image_side:
            t = pa.table({"image": pa.array(_jpegs(rng, n, image_side), pa.binary()),
                          "label": rng.integers(0, 10, n)})
            pq.write_table(t, p + ".tmp", row_group_size=row_group)
            os.replace(p + ".tmp", p)
            continue
        lengths = rng.integers(text_bytes // 2, text_bytes * 3 // 2, n)
        chars = alphabet[rng.integers(0, len(alphabet), int(lengths.sum()))].tobytes()
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        texts = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int64).tobytes()),
                                                 pa.py_buffer(chars)).cast(pa.string())
        t = pa.table({"text": texts, "label": rng.integers(0, 10, n)})
        pq.write_table(t, p + ".tmp", row_group_size=row_group)
        os.replace(p + ".tmp", p)
    return paths


def timed(fn: Callable[[], int], repeats: int, clock: Callable[[], float]) -> tuple[float, list[float]]:
    """Median records/s of ``repeats`` runs of ``fn`` (which returns records read)."""
    rates = []
    for _ in range(repeats):
        t0 = clock()
        n = fn()
        rates.append(n / (clock() - t0))
    return statistics.median(rates), rates


def thresher_run(paths: list[str], keys: np.ndarray, batch: int, cache_bytes: int,
                 stats: dict[str, Any] | None = None) -> Callable[[], int]:
    import thresher as th

    def run() -> int:
        src = th.sources.ParquetSource(paths, cache_bytes=cache_bytes)
        n = 0
        for i in range(0, len(keys), batch):
            n += len(src.__getitems__(keys[i:i + batch]))
        if stats is not None:
            stats.update(src.cache_info())
        return n

    return run


def block_order(paths: list[str], row_group: int, window: int, seed: int) -> np.ndarray:
    """The keys of one epoch as ``BlockShuffle.of_source`` orders them: row groups
    shuffled, then records within windows of ``window`` row groups."""
    import thresher as th
    from thresher.samplers.block_shuffle import EpochOrder

    src = th.sources.ParquetSource(paths)
    shuffle = th.BlockShuffle.of_source(src, block_size=row_group, window_blocks=window)
    return EpochOrder(len(src), shuffle, key=seed).keys(np.arange(len(src), dtype=np.int64))


def hf_run(paths: list[str], keys: np.ndarray, cache_dir: str) -> Callable[[], int]:
    import datasets

    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_parquet(paths, cache_dir=cache_dir)
    ks = keys.tolist()

    def run() -> int:
        for k in ks:
            ds[k]
        return len(ks)

    return run


def arrow_run(paths: list[str], batch: int) -> Callable[[], int]:
    import pyarrow.parquet as pq

    def run() -> int:
        n = 0
        for p in paths:
            for b in pq.ParquetFile(p).iter_batches(batch_size=batch):
                n += len(b.to_pylist())
        return n

    return run


def grain_run(paths: list[str]) -> Callable[[], int]:
    from grain import experimental as ge

    def run() -> int:
        n = 0
        for p in paths:  # one file at a time: Grain interleaves many on threads
            for _ in ge.ParquetIterDataset(p):
                n += 1
        return n

    return run


def _length(r: dict[str, Any]) -> dict[str, Any]:
    return {"n": np.int32(len(r["text"] if "text" in r else r["image"])), "label": r["label"]}


def loader_run(paths: list[str], records: int, workers: Any, seen: dict[str, Any]) -> Callable[[], int]:
    """A shuffled epoch (the first ``records`` positions) through the DataLoader."""
    import thresher as th

    def run() -> int:
        src = th.sources.ParquetSource(paths, cache_bytes=4 << 30)  # the data fits the cache
        loader = th.DataLoader(src, th.IndexSampler(len(src), shuffle=True, seed=0, num_epochs=1),
                               [th.MapTransform(_length), th.Batch(256)], worker_count=workers)
        n = 0
        it = iter(loader)
        for b in it:
            n += len(b["n"])
            if n >= records:
                break
        it.close()
        seen.update(bytes=src.bytes_fetched, requests=src.requests)
        return n

    return run


def remote_rows(a: argparse.Namespace, paths: list[str],
                row: Callable[..., float]) -> None:
    """Local files against the same files from the object server at ``--latency-ms``."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.sources.remote.range_server import RangeServer

    root = os.path.dirname(os.path.dirname(paths[0]))
    bucket = os.path.basename(os.path.dirname(paths[0]))
    n = min(a.records, a.remote_records)
    with RangeServer(root, latency_s=a.latency_ms / 1000, process=True) as srv:
        urls = [f"{srv.endpoint}/{bucket}/{os.path.basename(p)}" for p in paths]
        for workers in (0, "auto"):
            seen: dict[str, Any] = {}
            local = row(f"loader local W={workers}", loader_run(paths, n, workers, seen), wall=True)
            def fetched(seen: dict[str, Any] = seen, workers: Any = workers) -> str:
                if workers != 0:
                    return ""
                return f"bytes/record {seen['bytes'] / n:,.0f}, requests {seen['requests']}"

            remote = row(f"loader http {a.latency_ms:g}ms W={workers}", loader_run(urls, n, workers, seen),
                         fetched, wall=True)
            print(f"  remote / local (W={workers}): {remote / local:.2f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--row-group", type=int, default=10_000)
    ap.add_argument("--text-bytes", type=int, default=200)
    ap.add_argument("--image-side", type=int, default=0,
                    help="a corpus of JPEG images this many pixels a side (binary column 'image') instead of "
                         "texts; e.g. --records 100000 --row-group 1000 --image-side 64")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hf-records", type=int, default=20_000)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--cache4-records", type=int, default=30_000,
                    help="keys timed for the cache/4 full shuffle (10x as many for the block order)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "thresher-parquet-bench"))
    ap.add_argument("--skip", default="", help="comma-separated rows to skip: main (thresher shuffled and pyarrow; "
                    "then hf and grain too), hf, grain, cache4, remote")
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="one-process rows timed in this process's CPU time (default: the machine is shared) "
                         "or wall time; the loader rows always in wall time")
    ap.add_argument("--remote-records", type=int, default=200_000,
                    help="positions of the shuffled epoch timed through the loader, local and remote")
    a = ap.parse_args(argv)
    skip = set(filter(None, a.skip.split(",")))
    paths = write_corpus(a.dir, a.records, a.files, a.row_group, a.text_bytes, a.image_side)
    import pyarrow as pa

    pa.array(["warm"]).to_pylist()  # pyarrow imports pandas on first use: not timed, for no row
    keys = np.random.default_rng(1).permutation(a.records)
    rows: list[tuple[str, float, list[float], str]] = []
    warm_src: dict[str, Any] = {}

    def prime() -> None:  # before the rounds: not timed
        import thresher as th

        warm_src["src"] = th.sources.ParquetSource(paths, cache_bytes=4 << 30)
        warm_src["src"].__getitems__(list(range(0, a.records, max(1, a.row_group // 2))))

    def warm() -> int:  # a second epoch: the cache already holds every row group
        src = warm_src["src"]
        for i in range(0, len(keys), a.batch):
            src.__getitems__(keys[i:i + a.batch])
        return len(keys)


    def row(name: str, fn: Callable[[], int], note: Callable[[], str] = lambda: "", wall: bool = False) -> float:
        med, rates = timed(fn, a.repeats, time.perf_counter if wall or a.clock == "wall" else time.process_time)
        note = note()
        rows.append((name, med, rates, note))
        print(f"{name:28s} {med:12,.0f} rec/s  runs {[round(r) for r in rates]} {note}", flush=True)
        return med

    def interleaved(named: list[tuple[str, Callable[[], int]]]) -> dict[str, float]:
        """Rows timed in rounds, one run of each row per round (the machine's load drifts)."""
        clock = time.perf_counter if a.clock == "wall" else time.process_time
        rates: dict[str, list[float]] = {name: [] for name, _ in named}
        for _ in range(a.repeats):
            for name, fn in named:
                t0 = clock()
                n = fn()
                rates[name].append(n / (clock() - t0))
        out = {}
        for name, runs in rates.items():
            out[name] = statistics.median(runs)
            rows.append((name, out[name], runs, ""))
            print(f"{name:28s} {out[name]:12,.0f} rec/s  runs {[round(r) for r in runs]}", flush=True)
        return out

    blocks = block_order(paths, a.row_group, a.window, 2)
    named: list[tuple[str, Callable[[], int]]] = []
    ours_names = {"thresher shuffled": "shuffled", "thresher shuffled, warm": "shuffled, warm",
                  "thresher BlockShuffle": "BlockShuffle", "thresher key order": "key order"}
    with tempfile.TemporaryDirectory() as hf_cache:
        if "main" not in skip:
            prime()
            named += [("thresher shuffled", thresher_run(paths, keys, a.batch, 4 << 30)),
                      ("thresher shuffled, warm", warm),
                      ("thresher BlockShuffle", thresher_run(paths, blocks, a.batch, 4 << 30)),
                      ("thresher key order", thresher_run(paths, np.arange(a.records), a.batch, 4 << 30)),
                      ("pyarrow iter_batches", arrow_run(paths, a.batch))]
            if "grain" not in skip:
                named.append(("grain ParquetIterDataset", grain_run(paths)))
            if "hf" not in skip:
                named.append(("datasets __getitem__", hf_run(paths, keys[:a.hf_records], hf_cache)))
        measured = interleaved(named)
    warm_src.clear()
    ours_rows = {short: measured[name] for name, short in ours_names.items() if name in measured}
    peers = {name: rate for name, rate in measured.items() if name not in ours_names}
    if "cache4" not in skip:
        stats: dict[str, Any] = {}
        import thresher as th

        src = th.sources.ParquetSource(paths, cache_bytes=1 << 40)  # holds every row group: their cost
        src.__getitems__(list(range(0, a.records, a.row_group // 4)))
        decoded = src.cache_info()["bytes"]
        quarter = max(1, decoded // 4)
        few = keys[:a.cache4_records]
        row("thresher cache/4 shuffled", thresher_run(paths, few, a.batch, quarter, stats),
            lambda: f"row-group decodes per record {stats['misses'] / len(few):.4f} ({len(few):,} keys)")
        order = blocks[:10 * a.cache4_records]
        row("thresher cache/4 blocks", thresher_run(paths, order, a.batch, quarter, stats),
            lambda: f"row-group decodes per record {stats['misses'] / len(order):.4f} ({len(order):,} keys, "
                    f"window {a.window} row groups)")
    if "remote" not in skip:
        remote_rows(a, paths, row)
    kind = (f"JPEGs {a.image_side}x{a.image_side} ~{sum(os.path.getsize(p) for p in paths) // a.records:,} B"
            if a.image_side else f"texts ~{a.text_bytes} B")
    print(f"\nrecords {a.records:,}, files {a.files}, row groups of {a.row_group:,}, {kind}, "
          f"batches of {a.batch}; python {sys.version.split()[0]}")
    for name, rate in peers.items():
        print(f"over {name:26s}" + "".join(f"  {k} {v / rate:5.2f}x" for k, v in ours_rows.items()))


if __name__ == "__main__":
    main()
