"""HuggingFaceSource: record batches as blocks (BlockShuffle.of_source), reads over many
record batches equal ``datasets``' rows, and a fingerprint of what the keys mean."""

from __future__ import annotations

import itertools
import os
import pickle
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.helpers import without_descriptors
from tests.sources.formats.parquet.expected import plain

datasets.disable_progress_bars()

N = 50


def _batched(tmp_path: Any) -> datasets.Dataset:
    """A dataset memory-mapped from one Arrow file of 7-row record batches."""
    ds = datasets.Dataset.from_dict({"id": list(range(N)), "text": [f"r{i}" * (i % 4) for i in range(N)]})
    return ds.map(lambda r: r, writer_batch_size=7, cache_file_name=str(tmp_path / "batched.arrow"))


def test_record_batches_are_the_blocks(tmp_path: Any) -> None:
    ds = _batched(tmp_path)
    src = th.sources.HuggingFaceSource(ds)
    assert src.files is not None
    starts = list(range(0, N, 7))
    assert src.block_boundaries().tolist() == starts
    assert src.block_boundaries(10).tolist() == list(range(0, N - 7, 14))  # pairs; the short tail joined
    ascending = th.sources.HuggingFaceSource(ds.select(range(10, 40)))  # keys 0.. are rows 10..
    assert ascending.block_boundaries().tolist() == [0, 4, 11, 18, 25]
    shuffled = th.sources.HuggingFaceSource(ds.shuffle(seed=0))  # no storage order: plain runs
    assert shuffled.block_boundaries(8).tolist() == list(range(0, N, 8))


@pytest.mark.parametrize("view", ["all", "select"])
def test_a_block_shuffle_of_the_source_reads_each_batch_together(tmp_path: Any, view: str) -> None:
    ds = _batched(tmp_path)
    if view == "select":
        ds = ds.select(range(3, N))
    src = th.sources.HuggingFaceSource(ds)
    shuffle = th.BlockShuffle.of_source(src, block_size=1, window_blocks=1)  # a window: one record batch
    starts = src.block_boundaries(1).tolist()
    assert shuffle.boundaries is not None and shuffle.boundaries.tolist() == starts
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=3)
    keys = [sampler[p].record_key for p in range(len(src))]
    assert sorted(keys) == list(range(len(src)))
    block = np.searchsorted(starts, keys, side="right") - 1
    runs = [int(b) for i, b in enumerate(block) if i == 0 or b != block[i - 1]]
    assert sorted(runs) == list(range(len(starts)))  # each batch's records read together, once
    got = [plain(r) for b in th.DataLoader(src, sampler, [th.Batch(5, drop_remainder=False)])
           for r in _rows(b)]
    assert got == [plain(ds[k]) for k in keys]


def _rows(batch: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v[i] for k, v in batch.items()} for i in range(len(batch["id"]))]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=8), st.data())
def test_reads_across_record_batches_equal_the_rows(sizes: list[int], data: Any) -> None:
    rows = np.cumsum([0, *sizes]).tolist()
    schema = pa.schema({"x": pa.int64(), "s": pa.string(), "v": pa.list_(pa.float64())})
    batches = [pa.record_batch({"x": list(range(a, b)), "s": [f"s{i}" if i % 3 else None for i in range(a, b)],
                                "v": [[float(i)] * (i % 3) for i in range(a, b)]}, schema=schema)
               for a, b in itertools.pairwise(rows)]
    table = pa.Table.from_batches(batches)
    src = th.sources.HuggingFaceSource(table)
    keys = data.draw(st.lists(st.integers(0, rows[-1] - 1), max_size=30))
    assert [plain(r) for r in src.__getitems__(keys)] == [table.slice(k, 1).to_pylist()[0] for k in keys]
    assert src.block_boundaries().tolist() == rows[:-1]


def test_the_fingerprint_names_files_columns_views_and_contents(tmp_path: Any) -> None:
    path = str(tmp_path / "saved")
    ds = datasets.Dataset.from_dict({"id": list(range(N)), "y": [i % 2 for i in range(N)]})
    ds.save_to_disk(path, num_shards=2)
    mapped = datasets.load_from_disk(path)
    a = th.sources.HuggingFaceSource(path)
    assert a.fingerprint == th.sources.HuggingFaceSource(mapped).fingerprint  # the same files
    assert pickle.loads(pickle.dumps(a)).fingerprint == a.fingerprint
    others = {th.sources.HuggingFaceSource(path, columns=["id"]).fingerprint,
              th.sources.HuggingFaceSource(mapped.select([1, 0])).fingerprint,
              th.sources.HuggingFaceSource(mapped, decode=True).fingerprint,
              th.sources.HuggingFaceSource(ds).fingerprint}  # in memory: its contents
    assert a.fingerprint not in others and len(others) == 4
    mem = th.sources.HuggingFaceSource(pa.table({"x": [1, 2, 3]}))
    assert mem.fingerprint == th.sources.HuggingFaceSource(pa.table({"x": [1, 2, 3]})).fingerprint
    assert mem.fingerprint != th.sources.HuggingFaceSource(pa.table({"x": [1, 2, 4]})).fingerprint
    before = a.fingerprint
    shard = os.path.join(path, "data-00000-of-00002.arrow")
    st_ = os.stat(shard)
    os.utime(shard, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))  # the file rewritten, as far as stat says
    assert a.fingerprint == before  # a source names the files it opened
    assert th.sources.HuggingFaceSource(path).fingerprint != before


def test_running_out_of_descriptors_is_said_not_called_corruption(tmp_path: Any) -> None:
    # a save_to_disk directory opened with no descriptor left is a SourceError that says so
    # (its state.json was a raw OSError, and an Arrow file "not a readable Arrow file ... corrupt")
    import glob
    datasets.Dataset.from_dict({"x": list(range(400))}).save_to_disk(str(tmp_path / "d"), num_shards=4)
    arrow = sorted(glob.glob(str(tmp_path / "d" / "*.arrow")))[0]
    setup = ("from thresher.sources.formats.huggingface.source import _open_arrow\n"
             f"th.sources.HuggingFaceSource({str(tmp_path / 'd')!r})[0]  # every module imported first")
    steps = [f"th.sources.HuggingFaceSource({str(tmp_path / 'd')!r})", f"_open_arrow({arrow!r})"]
    assert without_descriptors(setup, steps) == ["SourceError", "True", "True"] * 2
