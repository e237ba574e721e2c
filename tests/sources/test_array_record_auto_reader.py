"""``reader="auto"`` on local ArrayRecord files: files of large chunks are read through byte
ranges and the chunk cache (array_record's native reader decodes a whole chunk for every record it
reads out of order), others with the native reader; the records are the same either way, and the
choice falls back to the native reader wherever the chunk cache could not read the file here."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.helpers import REPO
from thresher.sources.formats.array_record.source import (
    AUTO_RANGES_GROUP_SIZE,
    group_size_of,
    writer_options,
)

RECORDS = [b"r%05d" % i + bytes(i % 7) for i in range(3 * AUTO_RANGES_GROUP_SIZE + 17)]


def _native_write(path: str, records: list[bytes], options: str) -> str:
    from array_record.python import array_record_module

    w = array_record_module.ArrayRecordWriter(path, options)
    for r in records:
        w.write(r)
    w.close()
    return path


def key_of(record: bytes) -> int:
    return int(record[1:6])


@pytest.fixture(scope="module")
def files(tmp_path_factory: Any) -> dict[str, str]:
    d = tmp_path_factory.mktemp("auto")
    return {
        "big": _native_write(str(d / "big.array_record"), RECORDS, f"group_size:{AUTO_RANGES_GROUP_SIZE},zstd:1"),
        "huge": _native_write(str(d / "huge.array_record"), RECORDS, "group_size:65536"),
        "small": _native_write(str(d / "small.array_record"), RECORDS, "group_size:64"),
        "one": _native_write(str(d / "one.array_record"), RECORDS, "group_size:1"),
        "transposed": _native_write(str(d / "t.array_record"), RECORDS, "group_size:4096,transpose:true"),
        "plain": _native_write(str(d / "plain.array_record"), RECORDS, "group_size:2048,uncompressed"),
    }


@pytest.mark.parametrize(("name", "expected"), [("big", "ranges"), ("huge", "ranges"), ("plain", "ranges"),
                                                ("small", "native"), ("one", "native"),
                                                ("transposed", "native")])
def test_the_reader_follows_the_group_size(files: dict[str, str], name: str, expected: str) -> None:
    src = th.sources.ArrayRecordSource(files[name])
    assert src.reader == expected
    assert th.sources.ArrayRecordSource(files[name], reader="native").reader == "native"
    assert th.sources.ArrayRecordSource(files[name], reader="ranges").reader == "ranges"
    assert len(src) == len(RECORDS)


def test_writer_options_name_the_group_size(files: dict[str, str]) -> None:
    assert group_size_of(writer_options(files["big"])) == AUTO_RANGES_GROUP_SIZE
    assert group_size_of(writer_options(files["huge"])) == 65536
    assert group_size_of({}) == 65536  # array_record's default where the options do not say
    assert writer_options(files["transposed"])["transpose"] == "true"


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.integers(0, len(RECORDS) - 1), max_size=300))
def test_the_same_records_with_every_reader(files: dict[str, str], keys: list[int]) -> None:
    for name in ("big", "huge", "plain"):
        auto = th.sources.ArrayRecordSource(files[name])
        assert auto.__getitems__(keys) == [RECORDS[k] for k in keys]
        if keys:
            assert auto[keys[0]] == RECORDS[keys[0]]


def test_a_block_shuffle_decodes_each_chunk_once_and_matches_the_native_reader(files: dict[str, str]) -> None:
    native = th.sources.ArrayRecordSource(files["big"], reader="native")
    auto = th.sources.ArrayRecordSource(files["big"])
    shuffle = th.BlockShuffle.of_source(auto, block_size=AUTO_RANGES_GROUP_SIZE, window_blocks=2)
    sampler = th.IndexSampler(len(auto), shuffle=shuffle, seed=3, num_epochs=1)
    out = {}
    for name, src in (("native", native), ("auto", auto)):
        loader = th.DataLoader(src, sampler, [key_of, th.Batch(100)], worker_count=0)
        out[name] = [int(k) for batch in loader for k in batch]
    assert out["auto"] == out["native"]
    assert sorted(out["auto"]) == list(range(len(RECORDS)))
    reader = auto._ranges
    assert reader is not None
    chunks = -(-len(RECORDS) // AUTO_RANGES_GROUP_SIZE)
    assert reader.chunks_fetched == chunks  # each chunk once in the epoch (all fit the cache)


def test_process_workers_read_the_same_batches(files: dict[str, str]) -> None:
    auto = th.sources.ArrayRecordSource(files["huge"])
    sampler = th.IndexSampler(len(auto), shuffle=True, seed=1, num_epochs=1)
    batches = {}
    for workers in (0, 2):
        loader = th.DataLoader(auto, sampler, [key_of, th.Batch(256)], worker_count=workers)
        batches[workers] = [np.asarray(b).tolist() for b in loader]
    assert batches[0] == batches[2]


CHILD = """
import sys
sys.path.insert(0, {repo!r})
sys.modules["zstandard"] = None  # as on a machine without the `remote` extra
import thresher as th
src = th.sources.ArrayRecordSource({path!r})
print(src.reader, src[5] == {record!r})
"""


def test_without_the_decompressor_the_native_reader_reads(files: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD.format(repo=REPO, path=files["big"], record=RECORDS[5])],
                          capture_output=True, text=True, timeout=120, check=True,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert done.stdout.split() == ["native", "True"]


def test_one_record_chunks_through_byte_ranges_are_read_by_the_block(files: dict[str, str]) -> None:
    # reader="ranges" on a local group_size-1 file: the read-ahead thread the source asks for tells
    # the reader a block shuffle's blocks, each fetched whole (before: one request per record)
    src = th.sources.ArrayRecordSource(files["one"], reader="ranges")
    assert src.suggested_reads_in_flight == 1
    assert th.sources.ArrayRecordSource(files["big"]).suggested_reads_in_flight == 0
    shuffle = th.BlockShuffle(block_size=512, window_blocks=2)
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=0, num_epochs=1)
    loader = th.DataLoader(src, sampler, [key_of, th.Batch(100)], worker_count=0)
    keys = [int(k) for batch in loader for k in batch]
    assert sorted(keys) == list(range(len(RECORDS)))
    reader = src._ranges
    assert reader is not None
    assert reader.requests <= 4 * -(-len(RECORDS) // 512), reader.requests  # a few per block, not per record


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_resumes_at_the_next_batch_through_the_chunk_cache(files: dict[str, str], workers: int) -> None:
    # a block shuffle over a file of large chunks (read through byte ranges by default): a fresh
    # iterator given a saved state continues with the very next batch, with another worker count too
    src = th.sources.ArrayRecordSource(files["big"])
    assert src.reader == "ranges"
    shuffle = th.BlockShuffle.of_source(src, block_size=AUTO_RANGES_GROUP_SIZE, window_blocks=2)
    sampler = th.IndexSampler(len(src), shuffle=shuffle, seed=5, num_epochs=2)

    def loader(w: int) -> Any:
        return th.DataLoader(src, sampler, [key_of, th.Batch(128)], worker_count=w)

    full = [np.asarray(b).tolist() for b in loader(0)]
    it = iter(loader(workers))
    for _ in range(17):  # into the second window
        next(it)
    state = it.get_state()
    it.close()
    fresh = iter(loader(2 - workers))
    fresh.set_state(state)
    assert [np.asarray(b).tolist() for b in fresh] == full[17:]
    fresh.close()
