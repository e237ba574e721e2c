"""Row groups held as Arrow tables, gathered per batch, merged for wide shuffles: the records
stay pyarrow's rows whatever the budget, the order of keys, merges and evictions."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.formats.parquet.expected import gather_path, plain, pyarrow_rows
from tests.sources.formats.parquet.test_parquet_values import tables
from thresher.sources.formats.parquet import store as store_module
from thresher.sources.formats.parquet.store import RowGroupStore


@contextmanager
def merging(max_pieces: int = 0, call_bytes: int = 1 << 40, segment_bytes: int = 1 << 30) -> Iterator[None]:
    """Stores merge at once (any batch over two tables pays for a merge), in segments of
    ``segment_bytes``; sources made inside read with Arrow's take."""
    saved = store_module.MAX_PIECES, store_module.TAKE_CALL_BYTES, store_module.SEGMENT_BYTES
    store_module.MAX_PIECES, store_module.TAKE_CALL_BYTES, store_module.SEGMENT_BYTES = \
        max_pieces, call_bytes, segment_bytes
    try:
        with gather_path(native=False):  # the C gatherer never merges
            yield
    finally:
        store_module.MAX_PIECES, store_module.TAKE_CALL_BYTES, store_module.SEGMENT_BYTES = saved


def _wide(n: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    return pa.array([None if i % 7 == 3 else rng.bytes(1100 + int(rng.integers(0, 300))) for i in range(n)],
                    pa.binary())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables(), wide=st.booleans(), batches=st.lists(st.lists(st.integers(0, 10**6), max_size=24),
                                                            min_size=1, max_size=6),
       budget=st.sampled_from([0.0, 0.3, 0.6, 2.0]), segment=st.sampled_from([256, 1 << 30]),
       native=st.booleans())
def test_merges_and_evictions_keep_pyarrows_rows(tmp_path_factory: Any, case: Any, wide: bool,
                                                 batches: list[list[int]], budget: float, segment: int,
                                                 native: bool) -> None:
    table, group, page_index, dictionary = case
    if wide:
        table = table.append_column("blob", _wide(table.num_rows, group))
    path = str(tmp_path_factory.mktemp("pq") / "t.parquet")
    pq.write_table(table, path, row_group_size=group, write_page_index=page_index, use_dictionary=dictionary)
    expected = pyarrow_rows([path])
    probe = th.sources.ParquetSource(path)
    probe.__getitems__(list(range(len(probe))))
    cache = int(budget * probe.cache_info()["bytes"])
    with merging(segment_bytes=segment), gather_path(native):  # native: no merges, evictions alone
        src = th.sources.ParquetSource(path, cache_bytes=cache)
        for batch in batches:
            keys = [k % len(src) for k in batch]
            assert [plain(r) for r in src.__getitems__(keys)] == [expected[k] for k in keys]
            assert src.cache_info()["bytes"] <= cache
        everything = list(range(len(src)))[::-1]
        assert [plain(r) for r in src.__getitems__(everything)] == expected[::-1]


def _corpus(path: str, groups: int, rows: int) -> None:
    n = groups * rows
    pq.write_table(pa.table({"text": [f"text {i} " * (i % 5) for i in range(n)], "label": list(range(n))}),
                   path, row_group_size=rows)


def test_a_wide_shuffle_is_merged_once_and_read_in_one_take_after(tmp_path: Any) -> None:
    path = str(tmp_path / "s.parquet")
    _corpus(path, 40, 50)
    expected = pyarrow_rows([path])
    src = th.sources.ParquetSource(path)
    keys = np.random.default_rng(0).permutation(len(src))
    with merging(max_pieces=4, call_bytes=1 << 20):  # a batch over 40 row groups pays 36 MiB of calls
        for i in range(0, len(keys), 64):
            got = src.__getitems__(keys[i:i + 64])
            assert [plain(r) for r in got] == [expected[k] for k in keys[i:i + 64]]
    info = src.cache_info()
    assert info["misses"] == 40 and info["merged"] == 40  # each row group decoded once, all merged
    assert type(got[0]["label"]) is np.int64 and isinstance(got[0]["text"], str)


def test_batches_over_a_few_row_groups_never_merge(tmp_path: Any) -> None:
    path = str(tmp_path / "k.parquet")
    _corpus(path, 30, 40)
    src = th.sources.ParquetSource(path)
    blocks = np.random.default_rng(1).permutation(30)
    for b in blocks.tolist():  # a block shuffle: each batch within one or two row groups
        keys = b * 40 + np.random.default_rng(b).permutation(40)
        src.__getitems__(keys)
    assert src.cache_info()["merged"] == 0 and src.cache_info()["misses"] == 30


def _rows(gathered: tuple[list[pa.RecordBatch], np.ndarray | None]) -> list[Any]:
    """Column ``x`` of a gather's rows, in key order."""
    pieces, order = gathered
    values = [v for p in pieces for v in p.column("x").to_pylist()]
    if order is None:
        return values
    out: list[Any] = [None] * len(values)
    for j, v in zip(order.tolist(), values, strict=True):
        out[j] = v
    return out


def test_evicted_merged_row_groups_are_dead_bytes_then_merged_away() -> None:
    tables = {g: pa.record_batch({"x": np.arange(100, dtype=np.int64) + 100 * g}) for g in range(8)}
    cost = tables[0].nbytes
    store = RowGroupStore(4 * cost, groups=8)
    with merging():
        for g in range(4):
            store.put(g, tables[g])
        plan = store.plan(np.array([0, 1, 2, 3]))
        assert _rows(plan.gather(np.array([5, 5, 5, 5]))) == [5, 105, 205, 305]
        store.maybe_merge()
        assert store.info()["merged"] == 4
        store.put(4, tables[4])  # evicts merged 0 (least recently read): dead bytes, no merge yet
        store.maybe_merge()
        assert store.info()["merged"] == 3 and store.info()["bytes"] <= 4 * cost
        store.put(5, tables[5])
        store.put(6, tables[6])  # 3 of 4 merged row groups dead: merged again, of what is held
        store.maybe_merge()
        assert store.info() == {"hits": 4, "misses": 0, "entries": 4, "bytes": 4 * cost, "merged": 4,
                                "merged_tables": 1}
        plan = store.plan(np.array([6, 3, 5, 4]))
        assert plan.missing.tolist() == []
        assert _rows(plan.gather(np.array([1, 2, 3, 4]))) == [601, 302, 503, 404]
        assert store.plan(np.array([0])).missing.tolist() == [0]


def test_a_block_windows_merged_table_is_freed_once_its_row_groups_are_evicted() -> None:
    tables = {g: pa.record_batch({"x": np.arange(50, dtype=np.int64) + 50 * g}) for g in range(8)}
    cost = tables[0].nbytes
    store = RowGroupStore(4 * cost, groups=8)
    rng = np.random.default_rng(0)
    with merging(max_pieces=8, call_bytes=cost):  # three extra pieces a batch: a merge after two batches
        for window in ([0, 1, 2, 3], [4, 5, 6, 7]):
            for g in window:
                store.put(g, tables[g])
            for _ in range(4):
                groups = rng.choice(window, 16)
                rows = rng.integers(0, 50, 16)
                assert _rows(store.plan(groups).gather(rows)) == (groups * 50 + rows).tolist()
                store.maybe_merge()
            info = store.info()
            assert info["merged"] == 4 and info["merged_tables"] == 1 and info["bytes"] == 4 * cost


def test_tables_that_do_not_concatenate_are_read_one_by_one() -> None:
    store = RowGroupStore(1 << 20, groups=3)
    store.put(0, pa.record_batch({"x": [1, 2]}))
    store.put(1, pa.record_batch({"x": ["a", "b"]}))  # another type: the merge fails, nothing is lost
    with merging():
        store.spent(10)
        store.maybe_merge()
    assert store.info()["merged"] == 0 and store.info()["entries"] == 2
    assert _rows(store.plan(np.array([0, 0])).gather(np.array([1, 0]))) == [2, 1]
    assert _rows(store.plan(np.array([1])).gather(np.array([1]))) == ["b"]


def test_threads_reading_while_the_store_merges_and_evicts(tmp_path: Any) -> None:
    path = str(tmp_path / "t.parquet")
    _corpus(path, 40, 50)
    table = pq.read_table(path).append_column("blob", _wide(2000, 0))
    pq.write_table(table, path, row_group_size=50)
    expected = pyarrow_rows([path])
    probe = th.sources.ParquetSource(path)
    probe.__getitems__(list(range(0, 2000, 50)))
    src = th.sources.ParquetSource(path, cache_bytes=probe.cache_info()["bytes"] // 3)
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, 2000, 48).tolist() for _ in range(120)]
    with merging(max_pieces=2, call_bytes=1 << 16), ThreadPoolExecutor(6) as pool:
        got = list(pool.map(src.__getitems__, batches))
    assert [[plain(r) for r in b] for b in got] == [[expected[k] for k in keys] for keys in batches]
    assert src.cache_info()["bytes"] <= probe.cache_info()["bytes"] // 3


def test_wide_binary_columns_are_held_as_bytes_and_counted(tmp_path: Any) -> None:
    path = str(tmp_path / "w.parquet")
    pq.write_table(pa.table({"image": _wide(100, 3), "label": list(range(100))}), path, row_group_size=25)
    src = th.sources.ParquetSource(path)
    rows = src.__getitems__([99, 0, 50])
    expected = pyarrow_rows([path])
    assert [plain(r) for r in rows] == [expected[k] for k in (99, 0, 50)]
    assert list(rows[0]) == ["image", "label"] and isinstance(rows[1]["image"], bytes)
    arrow_bytes = pq.read_table(path).slice(0, 25).nbytes
    assert src.cache_info()["bytes"] >= 3 * (arrow_bytes + 64 * 25) * 0.9


@pytest.mark.parametrize("order", ["shuffle", "keys"])
def test_source_values_do_not_depend_on_merging(tmp_path: Any, order: str) -> None:
    path = str(tmp_path / "m.parquet")
    _corpus(path, 20, 30)
    keys = np.arange(600) if order == "keys" else np.random.default_rng(3).permutation(600)
    plainly = [plain(r) for r in th.sources.ParquetSource(path).__getitems__(keys)]
    with merging():
        merged = th.sources.ParquetSource(path)
        got = [plain(r) for i in range(0, 600, 32) for r in merged.__getitems__(keys[i:i + 32])]
    assert got == plainly == [pyarrow_rows([path])[k] for k in keys]
