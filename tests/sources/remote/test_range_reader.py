"""The byte-range reader against array_record's own writer and reader, on local files."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from array_record.python import array_record_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import ConfigError, CorruptSourceError, SourceNotFoundError
from thresher.sources.remote import RemoteReadOptions

COMPRESSIONS = ["uncompressed", "zstd", "zstd:1", "brotli", "brotli:1", "snappy"]
# Sizes that matter: empty, tiny, just under/over a block's usable size, several blocks.
SIZES = st.one_of(st.integers(0, 40), st.sampled_from([65_488, 65_512, 65_536, 65_560]),
                  st.integers(0, 3 * 65_536))


def write_native(path: str, records: list[bytes], options: str) -> None:
    w = array_record_module.ArrayRecordWriter(path, options)
    for r in records:
        w.write(r)
    w.close()


def read_native(path: str) -> list[bytes]:
    r = array_record_module.ArrayRecordReader(path, "readahead_buffer_size:0")
    out = list(r.read(0, r.num_records())) if r.num_records() else []
    r.close()
    return out


@st.composite
def files(draw: st.DrawFn) -> tuple[list[bytes], str]:
    n = draw(st.integers(0, 24))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(n):
        size = draw(SIZES)
        # Half the records compress well, half not at all (chunks then span blocks).
        records.append(rng.bytes(size) if rng.random() < 0.5 else bytes(size % 7) * (size // 7))
    group = draw(st.integers(1, 64))
    options = f"group_size:{group},{draw(st.sampled_from(COMPRESSIONS))}"
    if draw(st.booleans()):
        options += ",pad_to_block_boundary:true"
    return records, options


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(spec=files(), data=st.data())
def test_same_records_as_array_record(tmp_path_factory: pytest.TempPathFactory,
                                      spec: tuple[list[bytes], str], data: st.DataObject) -> None:
    records, options = spec
    path = str(tmp_path_factory.mktemp("ar") / "x.array_record")
    write_native(path, records, options)
    expected = read_native(path)
    assert expected == records
    src = th.sources.ArrayRecordSource(path, reader="ranges")
    assert len(src) == len(records)
    assert [src[k] for k in range(len(src))] == expected
    if records:
        keys = data.draw(st.lists(st.integers(0, len(records) - 1), max_size=40))
        assert src.__getitems__(keys) == [expected[k] for k in keys]


def test_many_files_random_batches(tmp_path: "os.PathLike[str]") -> None:
    rng = np.random.default_rng(0)
    expected: list[bytes] = []
    for i, options in enumerate(["group_size:1", "group_size:3,brotli", "group_size:64,snappy",
                                 "group_size:5,uncompressed"]):
        records = [rng.bytes(int(rng.integers(0, 3000))) for _ in range(int(rng.integers(1, 90)))]
        write_native(os.path.join(tmp_path, f"part-{i}.array_record"), records, options)
        expected += records
    src = th.sources.ArrayRecordSource(os.path.join(tmp_path, "part-*.array_record"),
                                       reader="ranges")
    native = th.sources.ArrayRecordSource(os.path.join(tmp_path, "part-*.array_record"))
    assert len(src) == len(native) == len(expected)
    for _ in range(30):
        keys = rng.integers(0, len(expected), size=int(rng.integers(1, 50))).tolist()
        assert src.__getitems__(keys) == native.__getitems__(keys) == [expected[k] for k in keys]
    again = pickle.loads(pickle.dumps(src))
    assert again.__getitems__([5, 0, len(expected) - 1]) == [expected[5], expected[0],
                                                            expected[-1]]


def test_one_request_per_chunk_and_coalescing(tmp_path: "os.PathLike[str]") -> None:
    path = os.path.join(tmp_path, "g.array_record")
    records = [bytes([i]) * 1000 for i in range(64)]
    write_native(path, records, "group_size:8,uncompressed")
    no_cache = RemoteReadOptions(cache_bytes=0)  # each read fetches what it needs
    src = th.sources.ArrayRecordSource(path, reader="ranges", read_options=no_cache)
    reader = src._ranges
    assert reader is not None
    before = reader.requests
    assert src.__getitems__([9, 8, 15, 10]) == [records[k] for k in (9, 8, 15, 10)]
    assert reader.requests - before == 1  # one chunk: one request
    before = reader.requests
    assert src.__getitems__(list(range(0, 64, 8))) == records[0:64:8]
    assert reader.requests - before == 1  # eight neighbouring chunks: coalesced
    small = th.sources.ArrayRecordSource(
        path, reader="ranges", read_options=RemoteReadOptions(max_request_bytes=9000, cache_bytes=0))
    assert small._ranges is not None
    before = small._ranges.requests
    assert small.__getitems__(list(range(0, 64, 8))) == records[0:64:8]
    assert small._ranges.requests - before == 8  # each chunk ~8 KB: no room to coalesce


def test_footer_cache_on_disk(tmp_path: "os.PathLike[str]") -> None:
    path = os.path.join(tmp_path, "c.array_record")
    write_native(path, [b"a", b"b"], "group_size:1")
    cache = os.path.join(tmp_path, "footers")
    opts = RemoteReadOptions(footer_cache_dir=cache)
    assert th.sources.ArrayRecordSource(path, reader="ranges", read_options=opts)[1] == b"b"
    assert len(os.listdir(cache)) == 1
    from thresher.sources.remote import reader as reader_module

    reader_module._INDEXES.clear()
    src = th.sources.ArrayRecordSource(path, reader="ranges", read_options=opts)
    assert src._ranges is not None and src._ranges.requests == 0  # footer came from disk
    assert src[0] == b"a"


def test_transposed_chunks_are_refused_clearly(tmp_path: "os.PathLike[str]") -> None:
    path = os.path.join(tmp_path, "t.array_record")
    write_native(path, [b"x" * 10] * 5, "group_size:2,transpose:true")
    src = th.sources.ArrayRecordSource(path, reader="ranges")
    assert len(src) == 5
    with pytest.raises(CorruptSourceError, match=r"records 2\.\.3 .*transpose"):
        src[3]


def test_bad_files(tmp_path: "os.PathLike[str]") -> None:
    other = os.path.join(tmp_path, "other.array_record")
    with open(other, "wb") as f:
        f.write(os.urandom(200_000))
    with pytest.raises(CorruptSourceError, match="other.array_record.*not a readable"):
        th.sources.ArrayRecordSource(other, reader="ranges")
    tiny = os.path.join(tmp_path, "tiny.array_record")
    with open(tiny, "wb") as f:
        f.write(b"hello")
    with pytest.raises(CorruptSourceError, match="at least 64 KiB"):
        th.sources.ArrayRecordSource(tiny, reader="ranges")
    good = os.path.join(tmp_path, "good.array_record")
    write_native(good, [os.urandom(50_000) for _ in range(6)], "group_size:1,uncompressed")
    data = open(good, "rb").read()
    cut = os.path.join(tmp_path, "cut.array_record")
    with open(cut, "wb") as f:  # the tail is intact but a data chunk lost bytes
        f.write(data[:100_000] + data[150_000:])
    with pytest.raises(CorruptSourceError):
        src = th.sources.ArrayRecordSource(cut, reader="ranges")
        src.__getitems__(list(range(len(src))))
    with pytest.raises(SourceNotFoundError, match="nothing-here"):
        th.sources.ArrayRecordSource(os.path.join(tmp_path, "nothing-here"), reader="ranges")
    with pytest.raises(ConfigError, match="reader"):
        th.sources.ArrayRecordSource(good, reader="fast")
    with pytest.raises(ConfigError, match="max_concurrency"):
        RemoteReadOptions(max_concurrency=0)


@settings(max_examples=30, deadline=None)
@given(keys=st.lists(st.integers(0, 299), min_size=1, max_size=120),
       gap=st.sampled_from([0, 2000, 1 << 20]))
def test_bytes_read_stay_under_1_5x_the_chunks_wanted(
        tmp_path_factory: pytest.TempPathFactory, keys: list[int], gap: int) -> None:
    path = str(tmp_path_factory.getbasetemp() / "coalesce.array_record")
    if not os.path.exists(path):
        rng = np.random.default_rng(5)
        write_native(path, [rng.bytes(int(rng.integers(0, 900))) for _ in range(300)],
                     "group_size:1,uncompressed")
    src = th.sources.ArrayRecordSource(
        path, reader="ranges", read_options=RemoteReadOptions(max_gap_bytes=gap, cache_bytes=0))
    reader = src._ranges
    assert reader is not None
    index = reader.index(0)
    expected = [src[k] for k in keys]
    before = reader.bytes_read
    assert src.__getitems__(keys) == expected
    wanted = sum(int(index.chunk_ends()[c] - index.chunk_offsets[c]) for c in set(keys))
    assert wanted <= reader.bytes_read - before <= 1.5 * wanted


def test_reader_threads_end_with_the_source(tmp_path: "os.PathLike[str]") -> None:
    import gc
    import threading
    import time

    path = os.path.join(tmp_path, "t.array_record")
    write_native(path, [b"r%d" % i for i in range(50)], "group_size:1")

    def threads() -> int:
        return sum(t.name.startswith("thresher-range") for t in threading.enumerate())

    src = th.sources.ArrayRecordSource(path, reader="ranges",
                                       read_options=RemoteReadOptions(max_gap_bytes=0))
    assert src.__getitems__([0, 10, 20, 30, 40]) == [b"r0", b"r10", b"r20", b"r30", b"r40"]
    assert threads() >= 1
    del src
    gc.collect()
    deadline = time.monotonic() + 10
    while threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threads() == 0
