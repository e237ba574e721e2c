"""TFRecordSource and tfrecord TFDS directories read in place: values, the index cache, bad input."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import shutil
from collections.abc import Iterator

import numpy as np
import pytest
import s3fs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.sources.formats.engine import check_fresh_resume, check_small_pickle, check_worker_counts
from tests.sources.remote.s3_server import S3Server
from tests.sources.tfds.expected import DATA, assert_same, load
from thresher.errors import CorruptSourceError, SourceError
from thresher.sources.formats.index_cache import index_paths
from thresher.sources.formats.shards import list_shards
from thresher.sources.formats.tfds.convert import convert
from thresher.sources.formats.tfrecord.framing import frame_record, read_records

_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _write(path: str, records: list[bytes]) -> str:
    with open(path, "wb") as f:
        f.write(b"".join(frame_record(r) for r in records))
    return path


def _files(root: str, per_file: list[list[bytes]]) -> str:
    os.makedirs(root, exist_ok=True)
    for i, records in enumerate(per_file):
        _write(os.path.join(root, f"data.tfrecord-{i:05d}-of-{len(per_file):05d}"), records)
    return os.path.join(root, f"data.tfrecord-{{00000..{len(per_file) - 1:05d}}}-of-{len(per_file):05d}")


@given(per_file=st.lists(st.lists(st.binary(max_size=300), max_size=12), min_size=1, max_size=4),
       keys=st.lists(st.integers(0, 10**6), max_size=30))
@_SETTINGS
def test_records_equal_the_framing_loop(tmp_path_factory: pytest.TempPathFactory, per_file: list,
                                        keys: list[int]) -> None:
    root = str(tmp_path_factory.mktemp("tfr"))
    pattern = _files(root, per_file)
    flat = [r for records in per_file for r in records]
    src = th.sources.TFRecordSource(pattern)
    assert len(src) == len(flat) and src.file_lengths == [len(r) for r in per_file]
    if flat:
        ks = [k % len(flat) for k in keys]
        assert src.__getitems__(ks) == [flat[k] for k in ks]
        assert [src[k] for k in range(len(flat))] == flat
    looped = []
    for path in src.paths:  # the same records as the sequential framing loop
        with open(path, "rb") as f:
            looped.extend(read_records(f, path))
    assert looped == flat
    assert src.block_boundaries().tolist() == sorted(set(np.cumsum([0] + [len(r) for r in per_file])[:-1].tolist())
                                                      - {len(src)})
    again = th.sources.TFRecordSource(os.path.join(root, "data.tfrecord-*"))  # glob, index from the cache
    assert again.__getitems__(list(range(len(again)))) == flat


def test_index_is_cached_beside_the_data_or_in_the_user_cache(tmp_path: str) -> None:
    path = _write(os.path.join(str(tmp_path), "a.tfrecord"), [b"x" * i for i in range(5)])
    shard = list_shards(path)[0]
    beside, user = index_paths(shard, "tfrecord")
    th.sources.TFRecordSource(path)
    assert os.path.isfile(beside) and not os.path.exists(user)
    ro = os.path.join(str(tmp_path), "ro")
    os.makedirs(ro)
    path2 = _write(os.path.join(ro, "b.tfrecord"), [b"y"])
    with open(os.path.join(ro, ".thresher-index"), "w"):
        pass  # the index folder cannot be made there: a read-only place, as far as the cache knows
    th.sources.TFRecordSource(path2)
    assert os.path.isfile(index_paths(list_shards(path2)[0], "tfrecord")[1])


def test_a_changed_file_gets_a_new_index_never_the_old_one(tmp_path: str) -> None:
    path = _write(os.path.join(str(tmp_path), "a.tfrecord"), [b"one", b"two"])
    src = th.sources.TFRecordSource(path)
    blob = pickle.dumps(src)
    _write(path, [b"uno", b"dos", b"tres"])
    os.utime(path, ns=(1, 1))
    assert th.sources.TFRecordSource(path).__getitems__([0, 1, 2]) == [b"uno", b"dos", b"tres"]
    with pytest.raises(SourceError, match=r"a\.tfrecord.*changed"):
        pickle.loads(blob)  # a worker of the old source refuses the new file
    with pytest.raises(CorruptSourceError, match=r"a\.tfrecord.*changed after its index was built"):
        src[1]  # the open source's index no longer fits: an error, never other bytes


def test_a_forged_index_is_caught_by_the_checks_on_read(tmp_path: str) -> None:
    path = _write(os.path.join(str(tmp_path), "a.tfrecord"), [b"aaaa", b"bb", b"c"])
    th.sources.TFRecordSource(path)
    cached = index_paths(list_shards(path)[0], "tfrecord")[0]
    with np.load(cached) as z:
        arrays = dict(z)
    arrays["offsets"] = np.asarray([0, 20, 37], dtype=np.int64)  # the last two off by one
    with open(cached, "wb") as f:
        np.savez(f, **arrays)
    src = th.sources.TFRecordSource(path)
    assert src[0] == b"aaaa"
    with pytest.raises(CorruptSourceError, match="record 1 at byte 20 is not where its index says"):
        src[1]


def test_bad_files_are_refused_naming_file_and_offset(tmp_path: str) -> None:
    d = str(tmp_path)
    good = b"".join(frame_record(bytes([i]) * 50) for i in range(4))
    with open(os.path.join(d, "crc.tfrecord"), "wb") as f:
        f.write(good[:66 + 20] + b"\x00" + good[66 + 21:])  # a data byte of record 1 (at byte 66)
    with pytest.raises(CorruptSourceError, match=r"crc\.tfrecord: record 1 at byte 66 has a bad data checksum"):
        th.sources.TFRecordSource(os.path.join(d, "crc.tfrecord"))
    with open(os.path.join(d, "cut.tfrecord"), "wb") as f:
        f.write(good[:-10])
    with pytest.raises(CorruptSourceError, match=r"cut\.tfrecord is truncated: record 3 at byte 198"):
        th.sources.TFRecordSource(os.path.join(d, "cut.tfrecord"))
    with open(os.path.join(d, "z.tfrecord"), "wb") as f:
        f.write(gzip.compress(good))
    with pytest.raises(CorruptSourceError, match=r"gzip-compressed.*gunzip"):
        th.sources.TFRecordSource(os.path.join(d, "z.tfrecord"))
    with open(os.path.join(d, "text.tfrecord"), "wb") as f:
        f.write(b"hello world, not a tfrecord file")
    with pytest.raises(CorruptSourceError, match=r"text\.tfrecord: the record header at byte 0"):
        th.sources.TFRecordSource(os.path.join(d, "text.tfrecord"))
    path = _write(os.path.join(d, "later.tfrecord"), [b"p" * 40, b"q" * 40])
    src = th.sources.TFRecordSource(path)
    st = os.stat(path)
    with open(path, "r+b") as f:  # damaged after indexing, same size and mtime kept
        f.seek(56 + 12 + 5)
        f.write(b"!")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert src[0] == b"p" * 40
    with pytest.raises(CorruptSourceError, match=r"later\.tfrecord: record 1 at byte 56 has a bad data checksum"):
        src.__getitems__([0, 1])


def _tfds_copy(tmp_path: str) -> str:
    dst = os.path.join(tmp_path, "images_tfrecord", "2.0.1")
    shutil.copytree(os.path.join(DATA, "images_tfrecord", "2.0.1"), dst)
    return dst


def test_tfds_tfrecord_directory_reads_in_place_like_after_convert(tmp_path: str) -> None:
    d = _tfds_copy(str(tmp_path))
    out = convert(d, os.path.join(str(tmp_path), "converted"), progress=False)
    expected = load("images")
    for split, values in expected["splits"].items():
        ours, converted = th.data_source(d, split=split), th.data_source(out, split=split)
        keys = list(range(len(ours)))
        assert_same(ours.__getitems__(keys), values, split)
        assert_same(ours.__getitems__(keys), converted.__getitems__(keys), split)
    for spec, keys in expected["split_strings"].items():
        assert len(th.data_source(d, split=spec)) == len(keys), spec
    ds = th.data_source(d, split="train[5:30]")
    assert ds.record_locations([0])[0] == (os.path.join(d, "images-train.tfrecord-00000-of-00003"), 5)
    clone = check_small_pickle(ds, limit=8192)
    assert_same(clone[3], ds[3], "unpickled")


def test_engine_promises(tmp_path: str) -> None:
    pattern = _files(os.path.join(str(tmp_path), "t"), [[bytes([i, j]) * j for j in range(5)] for i in range(3)])
    check_worker_counts("tfrecord", {"paths": pattern})
    check_fresh_resume("tfrecord", {"paths": pattern}, stop=2)
    check_small_pickle(th.sources.TFRecordSource(pattern), limit=1500)
    d = _tfds_copy(str(tmp_path))
    check_worker_counts("tfds", {"path": d, "split": "train"})
    check_fresh_resume("tfds", {"path": d, "split": "train"}, stop=5)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


def test_objects_in_a_bucket_are_read_by_byte_ranges(tmp_path: str, s3: S3Server) -> None:
    per_file = [[os.urandom(n) for n in (0, 5, 3000, 17)], [b"last"]]
    bucket = s3.new_bucket()
    so = s3.storage_options()
    fs = s3fs.S3FileSystem(**so)
    for i, records in enumerate(per_file):
        fs.pipe(f"{bucket}/tfr/part-{i}.tfrecord", b"".join(frame_record(r) for r in records))
    src = th.sources.TFRecordSource(f"s3://{bucket}/tfr/part-*.tfrecord", storage_options=so)
    flat = [r for rs in per_file for r in rs]
    assert src.__getitems__([4, 2, 0, 3, 1]) == [flat[k] for k in [4, 2, 0, 3, 1]]
    assert src.suggested_reads_in_flight > 0
    clone = pickle.loads(pickle.dumps(src))  # the index comes from the user cache
    assert clone.__getitems__(list(range(len(flat)))) == flat
    data = io.BytesIO(fs.cat_file(f"{bucket}/tfr/part-0.tfrecord"))
    bad = bytearray(data.getvalue())
    bad[-6] ^= 1
    fs.pipe(f"{bucket}/tfr/part-0.tfrecord", bytes(bad))
    with pytest.raises(CorruptSourceError, match=r"part-0\.tfrecord.*record 3 at byte"):
        th.sources.TFRecordSource(f"s3://{bucket}/tfr/part-0.tfrecord", storage_options=so)
