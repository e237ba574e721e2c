"""`thresher convert`: tfrecord TFDS datasets become ArrayRecord ones that read the same."""

from __future__ import annotations

import io
import os
import shutil
import struct

import pytest
from hypothesis import given, settings, strategies as st

import thresher as th
from thresher.cli import main
from thresher.errors import ConfigError, CorruptSourceError, DatasetInfoError
from thresher.sources.formats.tfds.convert import convert
from thresher.sources.formats.tfds.tfrecord import crc32c, frame_record, read_records
from tests.sources.tfds.expected import DATA, assert_same, load

_IMAGES = load("images")
SHARD = "images-train.tfrecord-00001-of-00003"


def _tfrecord_copy(tmp_path: str) -> str:
    dst = os.path.join(tmp_path, "images_tfrecord", "2.0.1")
    shutil.copytree(os.path.join(DATA, "images_tfrecord", "2.0.1"), dst)
    return dst


def _check_reads(path: str) -> None:
    for split, values in _IMAGES["splits"].items():
        ds = th.data_source(path, split=split)
        assert_same(ds.__getitems__(list(range(len(ds)))), values, split)
    for spec, keys in _IMAGES["split_strings"].items():
        ds = th.data_source(path, split=spec)
        assert len(ds) == len(keys), spec


def test_convert_to_out_reads_like_the_array_record_dataset(tmp_path: str) -> None:
    out = os.path.join(str(tmp_path), "converted")
    assert main(["convert", os.path.join(DATA, "images_tfrecord"), "--out", out, "--quiet"]) == 0
    _check_reads(out)
    assert th.builder(out).info.file_format == "array_record"
    assert not [f for f in os.listdir(out) if "tfrecord" in f]
    assert main(["convert", os.path.join(DATA, "images_tfrecord"), "--out", out,
                 "--quiet"]) == 2  # refuses to overwrite


def test_convert_in_place_keeps_tfrecords_and_adds_array_record(tmp_path: str) -> None:
    d = _tfrecord_copy(str(tmp_path))
    assert convert(d, progress=False) == d
    _check_reads(d)
    info = th.builder(d).info
    assert info.file_format == "tfrecord" and info.alternative_file_formats == ("array_record",)
    assert convert(d, progress=False) == d  # nothing left to do


def test_tfds_reads_the_converted_directory(tmp_path: str) -> None:
    import tensorflow_datasets as tfds

    out = convert(os.path.join(DATA, "images_tfrecord"), os.path.join(str(tmp_path), "c"),
                  progress=False)
    theirs = tfds.builder_from_directory(out).as_data_source(split="train[10:20]")
    ours = th.data_source(out, split="train[10:20]")
    for k in range(10):
        assert_same(ours[k]["label"], theirs[k]["label"])
        assert (ours[k]["image"] == theirs[k]["image"]).all()


def test_truncated_tfrecord_shard_is_an_error_naming_it(tmp_path: str) -> None:
    d = _tfrecord_copy(str(tmp_path))
    path = os.path.join(d, SHARD)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    out = os.path.join(str(tmp_path), "out")
    with pytest.raises(CorruptSourceError, match=f"{SHARD}: record 15 is truncated"):
        convert(d, out, progress=False)
    assert not os.path.exists(out)
    assert not [f for f in os.listdir(str(tmp_path)) if "thresher-tmp" in f]  # cleaned up
    with pytest.raises(CorruptSourceError):
        convert(d, progress=False)  # in place: the dataset info is left unchanged
    assert th.builder(d).info.alternative_file_formats == ()


def test_corrupt_byte_fails_the_crc_unless_not_verifying(tmp_path: str) -> None:
    d = _tfrecord_copy(str(tmp_path))
    path = os.path.join(d, SHARD)
    with open(path, "r+b") as f:
        f.seek(40)
        b = f.read(1)
        f.seek(40)
        f.write(bytes([b[0] ^ 0x10]))
    with pytest.raises(CorruptSourceError, match=f"{SHARD}: record 0 has a bad data checksum"):
        convert(d, os.path.join(str(tmp_path), "a"), progress=False)


def test_missing_tfrecord_shard_and_wrong_count(tmp_path: str) -> None:
    d = _tfrecord_copy(str(tmp_path))
    os.remove(os.path.join(d, SHARD))
    with pytest.raises(DatasetInfoError, match="does not exist"):
        convert(d, os.path.join(str(tmp_path), "a"), progress=False)
    with open(os.path.join(d, SHARD), "wb") as f:
        f.write(frame_record(b"x"))
    with pytest.raises(DatasetInfoError, match="has 1 records but"):
        convert(d, os.path.join(str(tmp_path), "b"), progress=False)


def test_convert_refuses_an_existing_out(tmp_path: str) -> None:
    with pytest.raises(ConfigError, match="exists"):
        os.makedirs(os.path.join(str(tmp_path), "x"))
        convert(os.path.join(DATA, "images"), os.path.join(str(tmp_path), "x"), progress=False)


def test_crc32c_known_values() -> None:
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 test vector


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(0, 10**6))
def test_tfrecord_framing_round_trips_and_detects_truncation(records: list, cut: int) -> None:
    data = b"".join(frame_record(r) for r in records)
    assert list(read_records(io.BytesIO(data), "mem")) == records
    if data:
        n = cut % len(data)
        ends = {sum(16 + len(r) for r in records[:i]) for i in range(len(records) + 1)}
        if n in ends:  # a cut between records is a shorter, valid file
            assert len(list(read_records(io.BytesIO(data[:n]), "mem"))) <= len(records)
        else:
            with pytest.raises(CorruptSourceError, match="mem: record"):
                list(read_records(io.BytesIO(data[:n]), "mem"))


def test_bad_length_checksum() -> None:
    data = bytearray(frame_record(b"abc"))
    data[8] ^= 1
    with pytest.raises(CorruptSourceError, match="bad length checksum"):
        list(read_records(io.BytesIO(bytes(data)), "f"))
    assert struct.unpack("<Q", bytes(data[:8]))[0] == 3


def test_info_command_on_tfds_directories(capsys: pytest.CaptureFixture, tmp_path: str) -> None:
    assert main(["info", os.path.join(DATA, "images"), "--verify"]) == 0
    out = capsys.readouterr()
    assert "images/2.0.1" in out.out and "array_record" in out.out
    assert "train            48 examples" in out.out and "ClassLabel(num_classes=5)" in out.out
    assert "verified train: 48 records decode" in out.err
    assert main(["info", os.path.join(DATA, "images_tfrecord")]) == 0
    assert "read in place" in capsys.readouterr().out
    assert main(["info", _tfrecord_copy(str(tmp_path)), "--verify"]) == 0  # tfrecord shards read in place
    assert "verified train: 48 records decode" in capsys.readouterr().err
