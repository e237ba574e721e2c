"""Many ArrayRecord files: a bounded number of open readers, record counts cached next to the data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import thresher as th
from thresher.sources.formats.array_record.files import INDEX_NAME, ReaderCache, record_counts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _files(d: Path, n: int, per_file: int = 2) -> list[str]:
    paths = [str(d / f"part-{i:05d}.array_record") for i in range(n)]
    for i, p in enumerate(paths):
        th.sources.write_array_record(p, [f"{i}:{j}".encode() for j in range(per_file)])
    return paths


_CHILD = textwrap.dedent("""
    import os, resource, sys
    import thresher as th
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    most = None if sys.argv[2] == "default" else int(sys.argv[2])
    source = th.sources.ArrayRecordSource(sys.argv[1] + "/*.array_record", max_open=most, index=True)
    peak = 0
    loader = th.DataLoader(source, th.IndexSampler(len(source), shuffle=True, seed=4), [bytes.decode],
                           read_options=th.ReadOptions(num_threads=8))
    seen = []
    for i, x in enumerate(loader):
        seen.append(x)
        if i % 200 == 0:
            peak = max(peak, len(os.listdir("/proc/self/fd")))
    print(len(seen), len(set(seen)), peak)
""")


@pytest.mark.parametrize("max_open", ["64", "default"])  # the default: a quarter of the limit, 64
def test_more_files_than_descriptors_are_read_with_a_low_limit(tmp_path: Path, max_open: str) -> None:
    n = 1200  # more files than the child's limit of 256 descriptors
    _files(tmp_path, n)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), max_open], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records, distinct, peak = map(int, proc.stdout.split())
    assert records == distinct == 2 * n
    assert peak < 256
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    assert len(index) == n and index["part-00007.array_record"][0] == 2


def test_the_default_readers_kept_follow_the_descriptor_limit_and_the_files_size() -> None:
    # a quarter of `ulimit -n` (at most 4,096), beyond 256 only as far as the files' indexes
    # (8 bytes a record, counted at group_size 1) fit in INDEX_BUDGET
    script = textwrap.dedent("""
        import resource, sys
        soft = int(sys.argv[1])
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        from thresher.sources.formats.array_record.files import default_max_open
        print(default_max_open([200] * 1024), default_max_open([10**6] * 10), default_max_open([10**5] * 50))
    """)
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    high = 16_384 if hard == resource.RLIM_INFINITY else min(hard, 16_384)
    assert high >= 1_344, f"this machine's hard descriptor limit ({hard}) is too low for the test"
    # under `high`: the descriptor share min(high // 4, 4096); files of 200 records fill it, files of
    # 10**6 records keep 256 (their indexes: 8 MB each), files of 10**5 keep 335 (268 MB)
    share = min(high // 4, 4096)
    cases = {256: "64 64 64", 1024: "256 256 256", high: f"{share} 256 {min(share, 335)}"}
    for soft, expected in cases.items():
        out = subprocess.run([sys.executable, "-c", script, str(soft)], env=dict(os.environ, PYTHONPATH=ROOT),
                             capture_output=True, text=True, timeout=120)
        assert out.stdout.split() == expected.split(), (soft, out.stderr[-2000:])


def test_the_index_is_used_and_refreshed_for_changed_files(tmp_path: Path) -> None:
    paths = _files(tmp_path, 5)
    calls: list[str] = []

    def count(path: str) -> int:
        calls.append(path)
        return 2

    assert record_counts(paths, count, index=True)[0] == [2] * 5 and len(calls) == 5
    calls.clear()
    assert record_counts(paths, count, index=True)[0] == [2] * 5 and calls == []  # all from the index
    th.sources.write_array_record(paths[3], [b"a", b"b", b"c", b"d"])  # rewritten: size changes
    counts, sizes = record_counts(paths, index=True)
    assert counts == [2, 2, 2, 4, 2] and sizes[3] == os.path.getsize(paths[3])
    assert th.sources.ArrayRecordSource(paths, index=True).file_lengths == [2, 2, 2, 4, 2]


def test_an_index_that_cannot_be_written_is_left_out(tmp_path: Path) -> None:
    paths = _files(tmp_path, 3)
    (tmp_path / INDEX_NAME).mkdir()  # the index's name is taken: as on storage we may not write to
    assert record_counts(paths, index=True)[0] == [2, 2, 2]
    assert (tmp_path / INDEX_NAME).is_dir() and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [INDEX_NAME, *(os.path.basename(p) for p in paths)])  # no temporary file left behind


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    paths = _files(tmp_path, 3)
    with pytest.raises(th.errors.CorruptSourceError, match="part-00001"):
        (tmp_path / "part-00001.array_record").write_bytes(b"not an array record file")
        record_counts(paths)


def test_the_reader_cache_keeps_at_most_max_open_and_the_most_recent() -> None:
    opened: list[int] = []
    closed: list[str] = []

    def opener(i: int) -> str:
        opened.append(i)
        return f"r{i}"

    cache = ReaderCache(opener, max_open=3, closer=closed.append)
    for i in [0, 1, 2, 0, 3, 4, 0]:
        cache.get(i)
    assert cache.open_keys() == [3, 4, 0] and opened == [0, 1, 2, 3, 4]
    cache.close()
    assert sorted(closed) == ["r0", "r3", "r4"] and cache.open_keys() == []


def test_the_reader_cache_is_safe_from_many_threads() -> None:
    cache = ReaderCache(lambda i: object(), max_open=4)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for k in range(500):
                assert cache.get((seed * 7 + k) % 10) is not None
                assert len(cache.open_keys()) <= 4
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
