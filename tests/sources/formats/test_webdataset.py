"""WebDatasetSource against the ``webdataset`` library as the oracle; bad shards; engine promises."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import tarfile
from collections.abc import Iterator

import numpy as np
import pytest
import s3fs
import webdataset as wds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import thresher as th
from tests.sources.formats.engine import check_fresh_resume, check_small_pickle, check_worker_counts
from tests.sources.remote.s3_server import S3Server
from thresher.errors import CorruptSourceError, SourceError

Member = tuple[str, bytes]


def write_tar(path: str, members: list[Member], dirs: tuple[str, ...] = ()) -> str:
    with tarfile.open(path, "w") as tar:
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def oracle(urls: list[str], decode: str | None = None) -> list[dict]:
    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    if decode:
        ds = ds.decode(decode)
    return [{k: v for k, v in s.items() if k != "__local_path__"} for s in ds]


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a)


_key = st.text("abcXY_09-", min_size=1, max_size=6)
_ext = st.sampled_from(["jpg", "cls", "json", "seg.png", "TXT", "npy", "x.y.z"])
_sample = st.tuples(st.lists(_key, min_size=1, max_size=2).map("/".join),
                    st.lists(st.tuples(_ext, st.binary(max_size=1500)), min_size=1, max_size=4,
                             unique_by=lambda m: m[0].lower()))


@given(shards=st.lists(st.lists(_sample, max_size=8, unique_by=lambda s: s[0]), min_size=1, max_size=3),
       meta=st.booleans())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_samples_equal_the_webdataset_librarys(tmp_path_factory: pytest.TempPathFactory, shards: list,
                                               meta: bool) -> None:
    root = str(tmp_path_factory.mktemp("wds"))
    urls = []
    for i, samples in enumerate(shards):
        members = [(f"{key}.{ext}", data) for key, ms in samples for ext, data in ms]
        if meta:
            members.insert(len(members) // 2 if not samples else len(samples[0][1]), ("__meta__", b"{}"))
        urls.append(write_tar(os.path.join(root, f"{i:06d}.tar"), members, dirs=("adir",)))
    src = th.sources.WebDatasetSource(os.path.join(root, f"{{000000..{len(shards) - 1:06d}}}.tar"))
    want = oracle(urls)
    assert len(src) == len(want)
    got = src.__getitems__(list(range(len(src))))
    assert got == want
    assert [src[k] for k in reversed(range(len(src)))] == want[::-1]
    assert src.block_boundaries().tolist() == sorted(set(np.cumsum([0] + [len(s) for s in shards])[:-1].tolist())
                                                      - {len(src)})


def test_names_from_pax_and_gnu_long_name_headers_read_back(tmp_path: str) -> None:
    members = [("café/été-0001.jpg", b"J1"), ("café/été-0001.cls", b"1"), ("d/" + "k" * 150 + ".txt", b"long"),
               ("plain.txt", b"p")]
    urls = []
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        path = os.path.join(str(tmp_path), f"{fmt}.tar")
        with tarfile.open(path, "w", format=fmt) as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        urls.append(path)
    src = th.sources.WebDatasetSource(urls)
    assert src.__getitems__(list(range(len(src)))) == oracle(urls)


def _image(fmt: str, seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (6, 9, 3), np.uint8)).save(buf, fmt)
    return buf.getvalue()


def _vision_shard(path: str, n: int, start: int = 0) -> str:
    members = []
    for i in range(start, start + n):
        npy = io.BytesIO()
        np.save(npy, np.arange(i, i + 3, dtype=np.int16))
        members += [(f"s{i:05d}.jpg", _image("JPEG", i)), (f"s{i:05d}.png", _image("PNG", i)),
                    (f"s{i:05d}.cls", str(i % 7).encode()), (f"s{i:05d}.json", json.dumps({"i": i}).encode()),
                    (f"s{i:05d}.txt", f"caption {i}".encode()), (f"s{i:05d}.npy", npy.getvalue())]
    return write_tar(path, members)


def test_decoders_equal_the_webdataset_librarys(tmp_path: str) -> None:
    url = _vision_shard(os.path.join(str(tmp_path), "v.tar"), 4)
    want = oracle([url], decode="rgb8")
    got = th.sources.WebDatasetSource(url, decode=True).__getitems__([0, 1, 2, 3])
    assert all(_same(g, w) for g, w in zip(got, want, strict=True))
    custom = th.sources.WebDatasetSource(url, decode={"cls": lambda b: int(b) * 10})[1]
    assert custom["cls"] == 10 and isinstance(custom["jpg"], bytes)


def _tar_bytes(members: list[Member]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_bad_shards_are_refused_naming_file_and_offset(tmp_path: str) -> None:
    d = str(tmp_path)

    def refused(name: str, data: bytes, pattern: str) -> None:
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        with pytest.raises(CorruptSourceError, match=pattern):
            th.sources.WebDatasetSource(os.path.join(d, name))

    good = _tar_bytes([("a.txt", b"x" * 700), ("a.cls", b"1"), ("b.txt", b"y" * 700)])
    refused("cut_data.tar", good[:800], r"cut_data\.tar: the archive is truncated: member 'a\.txt'")
    refused("cut_header.tar", good[:2048 + 512 + 100], r"cut_header\.tar: .*truncated or damaged.*at byte 2560")
    refused("cut_member.tar", good[:2048 + 512], r"cut_member\.tar: .*truncated.*at byte 2560")
    refused("nokey.tar", _tar_bytes([("a.txt", b"1"), ("README", b"2")]), r"member 'README' has no key.*at byte 1024")
    refused("dup.tar", _tar_bytes([("a.txt", b"1"), ("b.txt", b"2"), ("a.cls", b"3")]),
            r"dup\.tar: key 'a' appears again .*first at byte 0.*at byte 2048")
    refused("twice.tar", _tar_bytes([("a.txt", b"1"), ("a.TXT", b"2")]), r"two members with extension 'txt'")
    refused("z.tar.gz", gzip.compress(good), r"z\.tar\.gz is a compressed tar \(gzip\).*gunzip -k z\.tar\.gz")
    refused("noise.tar", os.urandom(3000), r"noise\.tar: not a readable tar archive.*at byte 0")


def test_a_changed_shard_is_an_error_never_other_data(tmp_path: str) -> None:
    path = write_tar(os.path.join(str(tmp_path), "s.tar"), [("a.txt", b"aaaa"), ("b.txt", b"bbbb")])
    src = th.sources.WebDatasetSource(path)
    blob = pickle.dumps(src)
    st0 = os.stat(path)
    write_tar(path, [("a.txt", b"AAAAAAAA"), ("b.txt", b"bbbb")])  # same size (blocks), other sizes inside
    assert th.sources.WebDatasetSource(path)[0]["txt"] == b"AAAAAAAA"  # a new index
    with pytest.raises(CorruptSourceError, match=r"s\.tar.*changed after its index was built"):
        src[1]
    with pytest.raises(SourceError, match=r"s\.tar.*changed"):
        pickle.loads(blob)
    os.utime(path, ns=(st0.st_atime_ns, st0.st_mtime_ns))  # even with the old size and mtime back
    with pytest.raises(CorruptSourceError, match=r"s\.tar: the tar header at byte 0 is not the one its index names"):
        src[0]


def test_engine_promises(tmp_path: str) -> None:
    d = str(tmp_path)
    for s in range(3):
        _vision_shard(os.path.join(d, f"shard-{s:06d}.tar"), 4 + s, start=10 * s)
    args = {"urls": os.path.join(d, "shard-{000000..000002}.tar")}
    src = th.sources.WebDatasetSource(**args)
    index = os.path.join(d, ".thresher-index", "shard-000001.tar.wds.npz")
    built = os.stat(index).st_mtime_ns
    check_worker_counts("webdataset", args)
    assert os.stat(index).st_mtime_ns == built  # workers loaded the index, none rebuilt it
    assert len(src) == 4 + 5 + 6
    check_worker_counts("webdataset", {**args, "decode": True})
    check_fresh_resume("webdataset", args, stop=3)
    check_small_pickle(th.sources.WebDatasetSource(**args), limit=1500)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


def test_shards_in_a_bucket_are_read_by_byte_ranges(tmp_path: str, s3: S3Server) -> None:
    d = str(tmp_path)
    bucket = s3.new_bucket()
    so = s3.storage_options()
    fs = s3fs.S3FileSystem(**so)
    for s in range(2):
        local = _vision_shard(os.path.join(d, f"{s:06d}.tar"), 3, start=5 * s)
        fs.put(local, f"{bucket}/wds/{s:06d}.tar")
    remote = th.sources.WebDatasetSource(f"s3://{bucket}/wds/{{000000..000001}}.tar", storage_options=so)
    local = th.sources.WebDatasetSource(os.path.join(d, "*.tar"))
    keys = [5, 0, 3, 2]
    strip = [{k: v for k, v in s.items() if k != "__url__"} for s in local.__getitems__(keys)]
    assert [{k: v for k, v in s.items() if k != "__url__"} for s in remote.__getitems__(keys)] == strip
    assert remote.suggested_reads_in_flight > 0 and remote[0]["__url__"].startswith("s3://")
    clone = pickle.loads(pickle.dumps(remote))
    assert clone[4]["__key__"] == local[4]["__key__"]
