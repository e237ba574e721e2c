"""ShardFiles' local reads: slices of a map per process, checked against the listing before each batch."""

from __future__ import annotations

import os
import pickle
import resource

import pytest

from tests.helpers import answer_of_child, run_script
from thresher.errors import CorruptSourceError
from thresher.sources.formats.shard_files import ShardFiles
from thresher.sources.formats.shards import list_shards


def _file(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's warning: see answer_of_child below
def test_ranges_are_slices_of_one_map_per_process(tmp_path: str) -> None:
    a = _file(os.path.join(str(tmp_path), "a.bin"), bytes(range(256)) * 40)
    empty = _file(os.path.join(str(tmp_path), "b.bin"), b"")
    files = ShardFiles(list_shards([a, empty]))
    assert files.read_many([(0, 10, 13), (0, 10235, 10240), (1, 0, 0)]) == [
        b"\x0a\x0b\x0c", b"\xfb\xfc\xfd\xfe\xff", b""]
    buffers = files.local_buffers({0})
    assert buffers[0] is files.local_buffers([0])[0]  # mapped once, not per batch
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a forked worker maps the file again and reads the same bytes
        os.close(read)
        ok = files.read_many([(0, 256, 260)]) == [b"\0\1\2\3"] and files.local_buffers([0])[0] is not buffers[0]
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    # A bare fork on purpose (what a user's fork-started worker does); the child does almost
    # nothing, but if a lock held by another thread of this process were ever needed there, the
    # child would hang: a failure within seconds, not a hung test run.
    answer = answer_of_child(pid, read)
    assert answer == b"1", answer
    clone = pickle.loads(pickle.dumps(files))
    assert clone.read_many([(0, 1, 3)]) == [b"\1\2"]
    files.close()
    assert files.read_many([(0, 1, 3)]) == [b"\1\2"]  # reopened after close


def test_a_file_truncated_in_place_is_refused_before_it_is_sliced(tmp_path: str) -> None:
    a = _file(os.path.join(str(tmp_path), "a.bin"), b"x" * 100_000)
    files = ShardFiles(list_shards(a))
    assert files.read_many([(0, 99_990, 100_000)]) == [b"x" * 10]
    os.truncate(a, 1000)  # the map is still 100,000 bytes long: reading past 1000 would be SIGBUS
    with pytest.raises(CorruptSourceError, match=r"a\.bin.*changed after its index was built"):
        files.read_many([(0, 99_990, 100_000)])


def test_objects_in_a_bucket_are_read_through_the_lean_client() -> None:
    import s3fs

    from tests.sources.remote.s3_server import S3Server
    from thresher.sources.remote.lean import LeanClient

    data = os.urandom(20_000)
    with S3Server() as s3:
        bucket, so = s3.new_bucket(), s3.storage_options()
        s3fs.S3FileSystem(**so).pipe(f"{bucket}/a.bin", data)
        files = ShardFiles(list_shards(f"s3://{bucket}/a.bin", so), so)
        ranges = [(0, s, s + n) for s, n in [(0, 10), (19_990, 10), (7, 5000), (500, 0)] * 8]
        assert files.read_many(ranges) == [data[s:e] for _, s, e in ranges]
        assert isinstance(files._lean_client(), LeanClient)  # not fsspec: the options are ones it serves
        with files.open_stream(0) as f:
            f.seek(19_000)
            assert f.read(2000) == data[19_000:]
        clone = pickle.loads(pickle.dumps(files))
        assert clone.read_many([(0, 3, 9)]) == [data[3:9]]
        files.close()
        clone.close()


def test_many_shards_hold_no_descriptors_and_a_bounded_number_of_maps(tmp_path: str, monkeypatch) -> None:
    from thresher.sources.formats import shard_files

    monkeypatch.setattr(shard_files, "MAX_MAPS_KEPT", 8)
    paths = [_file(os.path.join(str(tmp_path), f"{i:03d}.bin"), bytes([i]) * 100) for i in range(40)]
    files = ShardFiles(list_shards(paths))
    open_before = len(os.listdir("/proc/self/fd"))
    for round_ in range(2):
        assert files.read_many([(i, 10, 12) for i in range(40)]) == [bytes([i]) * 2 for i in range(40)], round_
    assert len(files._maps) == 8
    assert len(os.listdir("/proc/self/fd")) <= open_before + 8  # one per map kept (Python's mmap holds one)
    files.close()
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_the_maps_kept_follow_the_descriptor_limit(tmp_path: str) -> None:
    # a quarter of the soft limit: batches over 300 shards under `ulimit -n 512` keep 128 maps
    # (and never run out of descriptors); under the hard limit (at most 16,384: the cap of 4,096
    # maps) every shard stays mapped
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    high = 16_384 if hard == resource.RLIM_INFINITY else min(hard, 16_384)
    assert high >= 1_200, f"this machine's hard descriptor limit ({hard}) is too low for the test"
    for soft, kept in ((512, 128), (high, 300)):
        script = (
            "import os, resource, sys\n"
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
            "from thresher.sources.formats.shard_files import ShardFiles, maps_kept\n"
            "from thresher.sources.formats.shards import list_shards\n"
            f"root = {str(tmp_path)!r}\n"
            "paths = []\n"
            "for i in range(300):\n"
            "    paths.append(os.path.join(root, f'{i:03d}.bin'))\n"
            "    if not os.path.exists(paths[-1]):\n"
            "        open(paths[-1], 'wb').write(bytes([i % 256]) * 50)\n"
            "files = ShardFiles(list_shards(paths))\n"
            "for lo in [0, 100, 200] * 2:  # a batch holds the maps it slices until it ends: 100 shards each\n"
            "    got = files.read_many([(i, 3, 5) for i in range(lo, lo + 100)])\n"
            "    assert got == [bytes([i % 256]) * 2 for i in range(lo, lo + 100)]\n"
            "print(maps_kept(), len(files._maps))\n"
        )
        out = run_script(script)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [str(min(soft // 4, 4096)), str(kept)]


def test_one_batch_over_more_shards_than_descriptors_reads_in_groups(tmp_path: str) -> None:
    # Under `ulimit -n 128` (32 maps kept), one batch touches all 300 shards: it is read in
    # groups of 32 shards (a batch holds its maps until it ends: at once they would not fit),
    # in key order, for ShardFiles, TFRecord and WebDataset alike
    script = (
        "import io, os, resource, tarfile\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "import numpy as np\n"
        "import thresher as th\n"
        "from thresher.sources.formats.shard_files import ShardFiles, maps_kept\n"
        "from thresher.sources.formats.shards import list_shards\n"
        "from thresher.sources.formats.tfrecord.framing import frame_record\n"
        f"root = {str(tmp_path)!r}\n"
        "raw, rec, tars = [], [], []\n"
        "for i in range(300):\n"
        "    raw.append(os.path.join(root, f'r{i:03d}.bin'))\n"
        "    open(raw[-1], 'wb').write(bytes([i % 256]) * 50)\n"
        "    rec.append(os.path.join(root, f'data.tfrecord-{i:05d}-of-00300'))\n"
        "    open(rec[-1], 'wb').write(frame_record(b'a%d' % i) + frame_record(b'b%d' % i))\n"
        "    tars.append(os.path.join(root, f's{i:03d}.tar'))\n"
        "    with tarfile.open(tars[-1], 'w') as tar:\n"
        "        for j in range(2):\n"
        "            data = b'%d-%d' % (i, j)\n"
        "            info = tarfile.TarInfo(f'k{i}_{j}.txt'); info.size = len(data)\n"
        "            tar.addfile(info, io.BytesIO(data))\n"
        "assert maps_kept() == 32\n"
        "files = ShardFiles(list_shards(raw))\n"
        "order = np.random.default_rng(0).permutation(300).tolist()\n"
        "assert files.read_many([(i, 3, 5) for i in order]) == [bytes([i % 256]) * 2 for i in order]\n"
        "src = th.sources.TFRecordSource(os.path.join(root, 'data.tfrecord-{00000..00299}-of-00300'))\n"
        "keys = np.random.default_rng(1).permutation(600)\n"
        "assert src.__getitems__(keys) == [(b'a' if k % 2 == 0 else b'b') + str(k // 2).encode() for k in keys]\n"
        "wds = th.sources.WebDatasetSource(tars)\n"
        "got = wds.__getitems__(keys)\n"
        "assert [g['txt'] for g in got] == [b'%d-%d' % (k // 2, k % 2) for k in keys], got[:3]\n"
        "print('ok')\n"
    )
    out = run_script(script)
    assert out.stdout.strip() == "ok", out.stderr[-3000:]
