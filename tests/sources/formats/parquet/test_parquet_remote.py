"""Parquet over HTTP from the project's local object server: footer, then only the column
chunks needed; the records equal the local ones and bytes fetched are counted."""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import thresher as th
from tests.sources.formats.parquet.expected import plain, pyarrow_rows
from tests.sources.remote.range_server import RangeServer


def _bucket(tmp_path: Any, table: Any, row_group: int) -> tuple[list[str], int]:
    """``table`` written twice, uncompressed, as bucket/part-0.parquet and part-1.parquet under
    ``tmp_path`` (the object server's root): their paths and total size."""
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    paths = []
    for i in range(2):
        p = str(bucket / f"part-{i}.parquet")
        pq.write_table(table, p, row_group_size=row_group, compression="none")
        paths.append(p)
    return paths, sum(os.path.getsize(p) for p in paths)


def test_remote_reads_only_the_needed_column_chunks(tmp_path: Any) -> None:
    n = 4000
    rng = np.random.default_rng(0)
    t = pa.table({"id": np.arange(n), "blob": [rng.bytes(200) for _ in range(n)], "x": rng.random(n)})
    paths, size = _bucket(tmp_path, t, 500)
    with RangeServer(str(tmp_path)) as srv:
        urls = [f"{srv.endpoint}/bucket/part-{i}.parquet" for i in range(2)]
        src = th.sources.ParquetSource(urls, columns=["id", "x"])
        assert len(src) == 2 * n and src.suggested_reads_in_flight > 0
        footers = src.bytes_fetched
        keys = [5, 4500, 7999, 6]
        got = [plain(r) for r in src.__getitems__(keys)]
        expected = pyarrow_rows(paths, ["id", "x"])
        assert got == [expected[k] for k in keys]
        fetched = src.bytes_fetched - footers
        # three row groups of two narrow columns: no blob bytes were read
        assert 0 < fetched < 3 * 500 * 16 + 4096 < size // 10
        again = pickle.loads(pickle.dumps(src))  # a worker: reopens by URL, reads its own bytes
        assert plain(again[4500]) == expected[4500] and again.bytes_fetched > 0


def test_threads_reading_a_bucket_fetch_each_row_group_once(tmp_path: Any) -> None:
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    n = 3200
    rng = np.random.default_rng(1)
    t = pa.table({"text": [rng.bytes(30).hex() for _ in range(n)], "label": np.arange(n)})
    paths, size = _bucket(tmp_path, t, 400)
    expected = pyarrow_rows(paths)
    with RangeServer(str(tmp_path), latency_s=0.005) as srv:
        urls = [f"{srv.endpoint}/bucket/part-{i}.parquet" for i in range(2)]
        src = th.sources.ParquetSource(urls)
        footers = src.bytes_fetched
        batches = [rng.integers(0, 2 * n, 48).tolist() for _ in range(48)]  # each over most row groups
        with ThreadPoolExecutor(6) as pool:  # six loader threads, each batch's fetches on the source's own
            got = list(pool.map(src.__getitems__, batches))
        assert [[plain(r) for r in b] for b in got] == [[expected[k] for k in keys] for keys in batches]
        assert src.cache_info()["entries"] == 16
        # every row group fetched once: a second fetch of any of them (about 40 KB) would pass the
        # files' whole size, footers included
        assert src.bytes_fetched - footers <= size
        decoders = [th_ for th_ in threading.enumerate() if th_.name.startswith("thresher-parquet-decode")]
        assert decoders
        src.close()
        deadline = time.monotonic() + 10
        while any(d.is_alive() for d in decoders) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(d.is_alive() for d in decoders)  # close() ends the source's fetch threads
