"""ArrayRecordSource and the atomic writer, on real files."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from thresher.errors import CorruptSourceError, RecordKeyError, SourceNotFoundError


def _write(path: str, n: int, tag: bytes = b"r") -> list[bytes]:
    records = [tag + b"%d" % i for i in range(n)]
    assert th.sources.write_array_record(path, records) == n
    return records


def test_round_trip_single_file(tmp_path) -> None:
    p = str(tmp_path / "a.array_record")
    records = _write(p, 100)
    src = th.sources.ArrayRecordSource(p)
    assert len(src) == 100
    assert [src[i] for i in range(100)] == records
    assert src.__getitems__([5, 0, 99, 5]) == [records[5], records[0], records[99], records[5]]
    assert src.__getitems__([]) == []


@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=5), data=st.data())
@settings(max_examples=25, deadline=None)
def test_several_files_form_one_index_space(tmp_path_factory, lengths: list[int], data: st.DataObject) -> None:
    d = tmp_path_factory.mktemp("multi")
    expected: list[bytes] = []
    for i, n in enumerate(lengths):
        expected += _write(str(d / f"part-{i:03d}.array_record"), n, tag=b"f%d-" % i)
    if not expected:
        return
    src = th.sources.ArrayRecordSource(str(d / "part-*.array_record"))
    assert len(src) == len(expected) and src.file_lengths == lengths
    keys = data.draw(st.lists(st.integers(0, len(expected) - 1), max_size=40))
    assert src.__getitems__(keys) == [expected[k] for k in keys]
    assert [src[k] for k in keys] == [expected[k] for k in keys]


def test_runs_duplicates_and_reversed_keys(tmp_path) -> None:
    """Range reads for consecutive keys, per-key reads otherwise: the same records either way."""
    p = str(tmp_path / "a.array_record")
    records = _write(p, 50)
    src = th.sources.ArrayRecordSource(p)
    for keys in ([10, 11, 12, 13], [13, 12, 11, 10], [3, 3, 5], [7, 8], [8, 7], [0, 2, 1, 3], list(range(50))):
        assert src.__getitems__(keys) == [records[k] for k in keys], keys


def test_list_of_paths_keeps_the_given_order(tmp_path) -> None:
    a, b = str(tmp_path / "b.ar"), str(tmp_path / "a.ar")
    ra, rb = _write(a, 3, b"A"), _write(b, 2, b"B")
    src = th.sources.ArrayRecordSource([a, b])
    assert src.__getitems__(list(range(5))) == ra + rb


def test_pickles_cheaply_and_reads_after_unpickling(tmp_path) -> None:
    p = str(tmp_path / "a.array_record")
    records = _write(p, 1000)
    src = th.sources.ArrayRecordSource(p)
    src[3]  # opens a reader
    blob = pickle.dumps(src)
    assert len(blob) < 2000
    assert pickle.loads(blob).__getitems__([999, 1]) == [records[999], records[1]]


def test_key_out_of_range_names_key_and_length(tmp_path) -> None:
    p = str(tmp_path / "a.array_record")
    _write(p, 10)
    src = th.sources.ArrayRecordSource(p)
    with pytest.raises(RecordKeyError, match=r"record key 10 .* length 10"):
        src[10]
    with pytest.raises(IndexError, match="-1"):
        src.__getitems__([0, -1])


def test_missing_file_and_empty_glob(tmp_path) -> None:
    with pytest.raises(SourceNotFoundError, match="nope.array_record"):
        th.sources.ArrayRecordSource(str(tmp_path / "nope.array_record"))
    with pytest.raises(SourceNotFoundError, match=r"matches no file"):
        th.sources.ArrayRecordSource(str(tmp_path / "*.array_record"))
    with pytest.raises(SourceNotFoundError, match="directory"):
        th.sources.ArrayRecordSource(str(tmp_path))
    with pytest.raises(ValueError, match="no paths given"):  # what Grain raises for no paths
        th.sources.ArrayRecordSource([])


def test_not_array_record_and_truncated(tmp_path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello, this is not an ArrayRecord file\n" * 10)
    with pytest.raises(CorruptSourceError, match="notes.txt"):
        th.sources.ArrayRecordSource(str(bad))
    p = str(tmp_path / "a.array_record")
    _write(p, 500)
    data = open(p, "rb").read()
    trunc = tmp_path / "trunc.array_record"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptSourceError, match="trunc.array_record"):
        th.sources.ArrayRecordSource(str(trunc))


def test_file_deleted_after_open_is_named(tmp_path) -> None:
    p = str(tmp_path / "gone.array_record")
    _write(p, 10)
    src = th.sources.ArrayRecordSource(p)
    os.remove(p)
    with pytest.raises(SourceNotFoundError, match="gone.array_record"):
        src.__getitems__([1, 2])


def test_writer_is_atomic(tmp_path) -> None:
    p = tmp_path / "x.array_record"
    with pytest.raises(RuntimeError):
        with th.sources.ArrayRecordWriter(str(p)) as w:
            w.write(b"one")
            raise RuntimeError("crash while writing")
    assert not p.exists()
    assert os.listdir(tmp_path) == []  # no temp file left either
    with pytest.raises(TypeError, match="bytes"):
        with th.sources.ArrayRecordWriter(str(p)) as w:
            w.write("not bytes")  # type: ignore[arg-type]
    assert not p.exists()


def test_writer_replaces_existing_file_only_on_success(tmp_path) -> None:
    p = str(tmp_path / "x.array_record")
    _write(p, 3)
    with pytest.raises(ValueError):
        th.sources.write_array_record(p, (b"new" if i < 2 else _raise() for i in range(3)))
    assert len(th.sources.ArrayRecordSource(p)) == 3  # old file intact
    th.sources.write_array_record(p, [np.arange(4, dtype=np.uint8).tobytes()])
    assert th.sources.ArrayRecordSource(p)[0] == bytes(range(4))


def _raise() -> bytes:
    raise ValueError("generator failed")


def test_in_memory_and_range_sources() -> None:
    src = th.sources.InMemoryDataSource(["a", "b"])
    assert len(src) == 2 and src.__getitems__([1, 0]) == ["b", "a"]
    with pytest.raises(RecordKeyError, match="length 2"):
        src[2]
    r = th.sources.RangeDataSource(5, 0, -2)
    assert len(r) == 3 and r.__getitems__([0, 1, 2]) == [5, 3, 1]
    with pytest.raises(RecordKeyError):
        r.__getitems__([3])
    assert isinstance(r, th.sources.RandomAccessDataSource)


def test_empty_records_are_records_but_a_cut_file_is_an_error(tmp_path) -> None:
    # array_record returns b"" without an error for records cut off under an open reader.
    path = str(tmp_path / "e.array_record")
    th.sources.write_array_record(path, [b"", b"x" * 100, b""] * 400)
    src = th.sources.ArrayRecordSource(path)
    assert src.__getitems__([0, 1, 2]) == [b"", b"x" * 100, b""]
    assert src[1199] == b""
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CorruptSourceError, match=r"changed while it was read: it had \d+ bytes and now"):
        src.__getitems__(list(range(1100, 1110)))
