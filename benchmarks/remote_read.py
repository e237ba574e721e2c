"""W1 and W3 read over s3:// from a local range server with 20 ms per request, vs local disk.

The files are served by tests/sources/remote/range_server.py (an S3-compatible server
that reads only the bytes of each range request from disk), run in its own process
and told to wait ``--latency-ms`` before answering each request, as a far bucket
would. Rows: the same pipeline (benchmarks/work.py decode + augment + Batch) over

- ``local``: the files on local disk, array_record's native reader;
- ``s3``: the same files in a bucket, thresher's byte-range reader with its default
  options (requests of a batch coalesced per chunk and issued concurrently, the next
  batches read ahead, decoded chunks kept in a per-process cache);
- ``s3 cache/4``: the same with a chunk cache of a quarter of the records' bytes, as for
  a dataset four times larger than the cache (so no ``fill_cache`` either), least
  recently used evicted first (the default);
- ``s3 cache/4 window``: the same, evicting by the sampler's look-ahead
  (``RemoteReadOptions(lookahead=8192)``);
- ``s3 fsspec`` and ``s3 fsspec cache/4``: ``s3`` and ``s3 cache/4`` with ranges read
  through s3fs (``RemoteReadOptions(client="fsspec")``) instead of thresher's lean HTTP
  client;
- ``s3 naive``: the same reader with one request per chunk, one at a time and no cache
  (``max_concurrency=1``, no coalescing): what reading record by record through a
  mount costs;

each with ``worker_count`` 0 and ``"auto"``, for files written with each of
``--group-sizes`` (1: thresher's default; 65536: array_record's writer's default).
Reported: records/s and MB/s of records delivered (median of ``--repeats`` windows of
``--seconds``, after the first batch and ``--warmup`` seconds more, so that worker
processes have started and imported s3fs; every run starts with a cold chunk cache),
the ratio to local disk with the same worker count; the server's ceiling (requests/s
that 32 plain ``http.client`` threads get from it: with one request per chunk and no
cache hits, a remote row cannot pass it); then, for random batches read alone without
the cache, requests per batch, body bytes fetched per record against the bytes of the
chunk that holds a record, and the client's CPU per request (of the row's client: lean
or fsspec; ``--client-requests N`` also measures it alone: N single 4 KiB range requests
from 16 threads); the same two figures
while one process reads the batches of a shuffled epoch in order with the cache (up to
10 s of it); and the KiB fetched before the first batch (footers, read once per
process, and that batch).

    python -m benchmarks.remote_read --quick
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

import thresher as th
from benchmarks import work
from benchmarks.datasets import ensure
from thresher.sources.remote import RemoteReadOptions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAIVE = RemoteReadOptions(max_concurrency=1, max_gap_bytes=0, max_request_bytes=1, cache_bytes=0)
NO_CACHE = {"lean": RemoteReadOptions(cache_bytes=0), "fsspec": RemoteReadOptions(cache_bytes=0, client="fsspec")}
FSSPEC = RemoteReadOptions(client="fsspec")


def _ops(workload: str) -> list[Any]:
    if workload == "W1":
        return [work.w1_decode, th.RandomMapTransform(work.w1_augment),
                th.Batch(work.W1_BATCH, drop_remainder=True)]
    return [work.w3_decode, th.RandomMapTransform(work.w3_augment),
            th.Batch(work.W3_BATCH, drop_remainder=True)]


def _count(batch: Any) -> int:
    return int(batch["image"].shape[0]) if isinstance(batch, dict) else int(batch.shape[0])


def _rate(source: Any, workload: str, workers: Any, seconds: float, seed: int,
          server: Any, warmup: float) -> tuple[float, int]:
    """Records/s over ``seconds`` after the first batch, and the body bytes the server
    sent before that window (footers, listings, the first batch)."""
    sampler = th.IndexSampler(len(source), shuffle=True, seed=seed, num_epochs=None)
    server.stats(reset=True)
    it = iter(th.DataLoader(source, sampler, _ops(workload), worker_count=workers))
    next(it)
    startup = server.stats(reset=True)["body_bytes"]
    start = time.perf_counter()
    while time.perf_counter() - start < warmup:
        next(it)
    records = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        records += _count(next(it))
    elapsed = time.perf_counter() - start
    it.close()
    if hasattr(source, "close"):
        source.close()  # the next run starts with a cold chunk cache, as a new job would
    return records / elapsed, startup


def _fetch_costs(source: Any, workload: str, server: Any, batches: int = 10) -> tuple[float, float, float]:
    """Requests per batch, body bytes per record and client CPU seconds per request (this
    process, all threads) for random batches read directly (``source`` without a chunk
    cache: what one batch costs on its own)."""
    size = work.W1_BATCH if workload == "W1" else work.W3_BATCH
    source[0]  # footers read
    rng = np.random.default_rng(7)
    server.stats(reset=True)
    cpu = time.process_time()
    for _ in range(batches):
        source.__getitems__(rng.choice(len(source), size, replace=len(source) < size).tolist())
    cpu = time.process_time() - cpu
    stats = server.stats(reset=True)
    return stats["requests"] / batches, stats["body_bytes"] / (batches * size), cpu / stats["requests"]


def _epoch_costs(source: Any, workload: str, server: Any, seconds: float) -> tuple[float, float]:
    """Requests per batch and body bytes per record while one process reads the batches of
    a shuffled epoch in order, with the chunk cache (from cold; for at most ``seconds``),
    telling the source the keys ahead as the loader does when it asks for them."""
    size = work.W1_BATCH if workload == "W1" else work.W3_BATCH
    source.close()  # a cold cache
    source[0]
    order = np.random.default_rng(11).permutation(len(source))
    server.stats(reset=True)
    batches, stop = 0, time.perf_counter() + seconds
    ahead = getattr(source, "lookahead_records", 0)
    for lo in range(0, len(order) - size + 1, size):
        if ahead:  # as the loader does: the keys after this batch, then the batch
            source.upcoming(order[lo + size:lo + size + ahead])
        source.__getitems__(order[lo:lo + size].tolist())
        batches += 1
        if time.perf_counter() > stop:
            break
    stats = server.stats(reset=True)
    source.close()
    return stats["requests"] / max(batches, 1), stats["body_bytes"] / max(batches * size, 1)


def _client_cpu(url: str, size: int, so: dict[str, Any], requests: int, threads: int = 16) -> dict[str, float]:
    """CPU seconds of this process per 4 KiB range request, for each client, ``threads``
    requests in flight (each client warmed up first: connections open, credentials found)."""
    from concurrent.futures import ThreadPoolExecutor

    from thresher.sources.remote.fs import filesystem
    from thresher.sources.remote.lean import client_for

    lean = client_for(url, so, 60.0, threads)
    assert lean is not None
    fs, _ = filesystem(url, dict(so, config_kwargs={"max_pool_connections": threads}))
    fetch = {"lean": lambda a: lean.cat_file(url, a, a + 4096),
             "fsspec": lambda a: fs.cat_file(url[len("s3://"):], start=a, end=a + 4096)}
    span = max(1, size - 4096)
    out = {}
    with ThreadPoolExecutor(threads) as pool:
        for name, fn in fetch.items():
            list(pool.map(fn, [(i * 4096) % span for i in range(threads * 4)]))
            cpu = time.process_time()
            list(pool.map(fn, [(i * 7919 * 64) % span for i in range(requests)]))
            out[name] = (time.process_time() - cpu) / requests
    lean.close()
    return out


def _server_ceiling(server: Any, path: str, seconds: float = 3.0, threads: int = 32) -> float:
    """Range requests/s that ``threads`` plain HTTP clients get from ``server`` (1 KiB each)."""
    import http.client
    import threading

    url = "/" + os.path.relpath(path, server.root).replace(os.sep, "/")
    size = os.path.getsize(path)
    stop = time.perf_counter() + seconds
    counts = [0] * threads

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        rng = np.random.default_rng(i)
        while time.perf_counter() < stop:
            a = int(rng.integers(0, max(1, size - 1024)))
            conn.request("GET", url, headers={"Range": f"bytes={a}-{a + 1023}"})
            conn.getresponse().read()
            counts[i] += 1
        conn.close()

    pool = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / seconds


def _chunk_bytes_per_record(paths: list[str]) -> float:
    """The bytes of the chunk holding a record (its whole chunk: a random key needs it)."""
    src = th.sources.ArrayRecordSource(paths, reader="ranges")
    assert src._ranges is not None
    total = records = 0
    for f in range(len(paths)):
        index = src._ranges.index(f)
        total += int((index.chunk_ends() - index.chunk_offsets).sum()) * index.group_size
        records += index.num_records
    return total / max(records, 1)


def _shards(path: str, group: int, shard_bytes: int) -> list[str]:
    """The records of ``path`` rewritten into shards of about ``shard_bytes`` with ``group``."""
    src = th.sources.ArrayRecordSource(path)
    count = max(1, round(os.path.getsize(path) / shard_bytes))
    stem = path.replace(".array_record", f"_g{group}_of{count}")
    bounds = [round(len(src) * i / count) for i in range(count + 1)]
    out = []
    for i in range(count):
        shard = f"{stem}-{i:05d}.array_record"
        if not os.path.exists(shard):
            th.sources.write_array_record(
                shard, (src[k] for k in range(bounds[i], bounds[i + 1])), group_size=group)
        out.append(shard)
    return out


def _print(rows: list[dict[str, Any]], args: argparse.Namespace, seconds: float) -> None:
    print(f"\nremote reads, {args.latency_ms:g} ms per request; median of {args.repeats} x "
          f"{seconds:g} s after {args.warmup:g} s of warm-up; machine shared with other work; "
          f"the server's ceiling: {rows[0]['ceiling'] if rows else 0:,.0f} requests/s\n")
    print("req/batch, bytes/chunk: a random batch read alone (no cache); in epoch: the batches of an epoch "
          "read in order by one process with the chunk cache\n")
    print(f"{'workload':<9}{'group':>6}  {'source':<18}{'workers':>8}{'records/s':>11}{'MB/s':>8}"
          f"{'vs local':>10}{'req/batch':>11}{'bytes/chunk':>13}{'in epoch':>10}{'bytes/chunk':>13}"
          f"{'startup KiB':>13}{'client CPU µs/req':>19}{'alone':>7}")
    for r in rows:
        print(f"{r['workload']:<9}{r['group']:>6}  {r['where']:<18}{r['workers']!s:>8}"
              f"{r['rate']:>11,.0f}{r['mb_s']:>8.1f}{r['ratio']:>10.2f}"
              + (f"{r['req_per_batch']:>11.1f}{r['bytes_ratio']:>13.2f}{r['epoch_req_per_batch']:>10.1f}"
                 f"{r['epoch_bytes_ratio']:>13.3f}{r['startup_kib']:>13.0f}{r['cpu_us_per_request']:>19.0f}{r['client_cpu_us']:>7.0f}"
                 if r["where"] != "local" else ""))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Runs the benchmark, prints the table, returns its rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller files, 2 s windows")
    ap.add_argument("--tiny", action="store_true", help="a smoke run of the harness (seconds)")
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--warmup", type=float, default=None, help="seconds read before each window")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--group-sizes", default="1,64,65536",
                    help="group_size of the files (1: thresher's default, 65536: array_record's)")
    ap.add_argument("--shard-mb", type=int, default=16, help="object size (MiB)")
    ap.add_argument("--workloads", default="W1,W3")
    ap.add_argument("--sources", default="local,s3,s3 naive",
                    help="which rows to measure: local, s3, s3 cache/4, s3 cache/4 window, s3 fsspec, "
                         "s3 fsspec cache/4, s3 naive")
    ap.add_argument("--client-requests", type=int, default=0,
                    help="also measure each client's CPU per request alone, over this many requests")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "thresher-bench-remote"))
    args = ap.parse_args(argv)
    seconds = args.seconds or (0.3 if args.tiny else 2.0 if args.quick else 5.0)
    if args.warmup is None:
        args.warmup = 0.0 if args.tiny else 8.0
    sys.path.insert(0, REPO)
    from tests.sources.remote.range_server import RangeServer  # the test suite's range server

    sizes = {"W1": 20_000 if args.quick else 60_000, "W3": 2_000 if args.quick else 8_000}
    if args.tiny:
        sizes, args.repeats, args.group_sizes = {"W1": 600, "W3": 100}, 1, "1"
    kinds = {"W1": "mnist", "W3": "images"}
    groups = [int(g) for g in args.group_sizes.split(",")]
    rows: list[dict[str, Any]] = []
    root = tempfile.mkdtemp(prefix="thresher-buckets-")
    try:
        with RangeServer(root, args.latency_ms / 1000, process=True) as server:
            bucket = server.make_bucket("bench")
            so = server.s3_options()
            for workload in args.workloads.split(","):
                base = ensure(args.cache, kinds[workload], sizes[workload])
                for group in groups:
                    paths = _shards(base["path"], group, args.shard_mb << 20)
                    prefix = os.path.join(root, bucket, f"{workload}-g{group}")
                    os.makedirs(prefix, exist_ok=True)
                    for p in paths:  # the server serves this folder: a copy is an upload
                        shutil.copy(p, prefix)
                    urls = [f"s3://{bucket}/{workload}-g{group}/{os.path.basename(p)}" for p in paths]
                    per_record = _chunk_bytes_per_record(paths)
                    record_bytes = base["payload_bytes"] / base["num_records"]
                    sources = {"local": th.sources.ArrayRecordSource(paths),
                               "s3": th.sources.ArrayRecordSource(urls, storage_options=so),
                               "s3 cache/4": th.sources.ArrayRecordSource(
                                   urls, storage_options=so,
                                   read_options=RemoteReadOptions(cache_bytes=base["payload_bytes"] // 4)),
                               "s3 fsspec": th.sources.ArrayRecordSource(urls, storage_options=so,
                                                                         read_options=FSSPEC),
                               "s3 cache/4 window": th.sources.ArrayRecordSource(
                                   urls, storage_options=so,
                                   read_options=RemoteReadOptions(cache_bytes=base["payload_bytes"] // 4,
                                                                  lookahead=8192)),
                               "s3 fsspec cache/4": th.sources.ArrayRecordSource(
                                   urls, storage_options=so, read_options=dataclasses.replace(
                                       FSSPEC, cache_bytes=base["payload_bytes"] // 4)),
                               "s3 naive": th.sources.ArrayRecordSource(urls, storage_options=so,
                                                                        read_options=NAIVE)}
                    sources = {k: v for k, v in sources.items() if k in args.sources.split(",")}
                    results: dict[tuple[str, Any], list[tuple[float, int]]] = {}
                    for r in range(args.repeats):
                        for where, src in sources.items():
                            for workers in (0,) if args.tiny and where == "s3 naive" else (0, "auto"):
                                results.setdefault((where, workers), []).append(
                                    _rate(src, workload, workers, seconds, r, server, args.warmup))
                    costs = {client: _fetch_costs(th.sources.ArrayRecordSource(
                        urls, storage_options=so, read_options=options), workload, server)
                        for client, options in NO_CACHE.items()}
                    alone = _client_cpu(urls[0], os.path.getsize(paths[0]), so, args.client_requests) if args.client_requests else {}
                    epoch = {where: _epoch_costs(src, workload, server, 1.0 if args.tiny else 10.0)
                             for where, src in sources.items() if where != "local"}
                    ceiling = _server_ceiling(server, os.path.join(prefix, os.path.basename(paths[0])),
                                              0.5 if args.tiny else 3.0)
                    for (where, workers), runs in results.items():
                        rate = statistics.median(x[0] for x in runs)
                        local = statistics.median(x[0] for x in results[("local", workers)])
                        client = "fsspec" if "fsspec" in where else "lean"
                        req_per_batch, bytes_per_record, cpu_per_request = costs[client]
                        rows.append({"workload": workload, "group": group, "where": where,
                                     "workers": workers, "rate": rate, "ratio": rate / local,
                                     "mb_s": rate * record_bytes / 1e6,
                                     "req_per_batch": req_per_batch,
                                     "bytes_ratio": bytes_per_record / per_record,
                                     "epoch_req_per_batch": epoch.get(where, (0.0, 0.0))[0],
                                     "cpu_us_per_request": cpu_per_request * 1e6,
                                     "client_cpu_us": alone.get(client, 0.0) * 1e6,
                                     "epoch_bytes_ratio": epoch.get(where, (0.0, 0.0))[1] / per_record,
                                     "startup_kib": statistics.median(x[1] for x in runs) / 1024,
                                     "ceiling": ceiling})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _print(rows, args, seconds)
    return rows


if __name__ == "__main__":
    main()
