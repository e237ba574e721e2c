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


def test_a_list_of_urls_is_looked_up_at_once_in_the_order_given(tmp_path: Any) -> None:
    """A list of object URLs: over HTTP one request each, sent together (no listing: HTTP servers
    list nothing); in a bucket one listing of their common parent. A missing one is named."""
    import pytest

    from thresher.errors import SourceNotFoundError
    from thresher.sources.formats.parquet.files import find_files

    bucket = tmp_path / "many"
    bucket.mkdir()
    sizes = {}
    for i in range(6):
        p = bucket / f"part-{i}.parquet"
        pq.write_table(pa.table({"x": np.arange(10 + i)}), str(p))
        sizes[p.name] = os.path.getsize(p)
    names = [f"part-{i}.parquet" for i in (3, 0, 5, 1, 4, 2)]  # not sorted: the order given is kept
    with RangeServer(str(tmp_path), latency_s=0.02) as srv:
        urls = [f"{srv.endpoint}/many/{n}" for n in names]
        srv.stats(reset=True)
        found = find_files(urls, None)
        assert [o.url for o in found] == urls and [o.size for o in found] == [sizes[n] for n in names]
        assert srv.stats()["requests"] == len(urls)
        with pytest.raises(SourceNotFoundError, match="part-9.parquet"):
            find_files(urls[:2] + [f"{srv.endpoint}/many/part-9.parquet"] + urls[2:], None)
        s3 = [f"s3://many/{n}" for n in names]
        srv.stats(reset=True)
        found = find_files(s3, srv.s3_options())
        assert [o.url for o in found] == s3 and [o.size for o in found] == [sizes[n] for n in names]
        assert srv.stats()["requests"] == 1  # one listing of s3://many
        # the first item that fails is the one named, though exact URLs are looked up before globs
        s3_missing = ["s3://many/part-0.parquet", "s3://many/none-*.parquet", "s3://many/part-9.parquet",
                      "s3://many/part-8.parquet"]
        with pytest.raises(SourceNotFoundError, match="none-"):
            find_files(s3_missing, srv.s3_options())
        src = th.sources.ParquetSource(s3[:2] + [str(bucket / "part-0.parquet")] + s3[2:],
                                       storage_options=srv.s3_options())
        assert src.file_lengths == [13, 10, 10, 15, 11, 14, 12]  # URLs and a local file, in the order given
