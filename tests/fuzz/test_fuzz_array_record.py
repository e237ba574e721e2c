"""ArrayRecord files with truncated, flipped or appended bytes, read through thresher (the
source and a DataLoader): thresher errors naming the file, never another exception type."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.fuzz.guards import only_thresher_errors

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RECORDS = [b"record %04d " % i + bytes(range(i % 50)) for i in range(60)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _intact(directory: str, group_size: int) -> bytes:
    path = os.path.join(directory, f"intact-{group_size}.array_record")
    if not os.path.exists(path):
        th.sources.write_array_record(path, RECORDS, group_size=group_size)
    with open(path, "rb") as f:
        return f.read()


def _read(path: str) -> None:
    source = th.sources.ArrayRecordSource(path)
    n = len(source)
    got = source.__getitems__(list(range(n)))
    assert all(isinstance(r, bytes) for r in got)
    if n:
        source[n - 1]
    loader = th.DataLoader(source, th.IndexSampler(n, shuffle=True, seed=0), [th.Batch(7)])
    for _ in loader:
        pass


def _damage(raw: bytes, data: st.DataObject) -> bytes:
    buf = bytearray(raw)
    how = data.draw(st.sampled_from(["truncate", "flip", "append", "zero-tail"]))
    if how == "truncate":
        return bytes(buf[:data.draw(st.integers(0, len(buf) - 1))])
    if how == "flip":
        for i in data.draw(st.lists(st.integers(0, len(buf) - 1), min_size=1, max_size=6)):
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        return bytes(buf)
    if how == "append":
        return bytes(buf) + data.draw(st.binary(min_size=1, max_size=100))
    cut = data.draw(st.integers(1, min(200, len(buf))))
    return bytes(buf[:-cut]) + bytes(cut)


@SETTINGS
@given(data=st.data(), group_size=st.sampled_from([1, 8]))
def test_damaged_files_raise_thresher_errors(tmp_path_factory, data: st.DataObject, group_size: int) -> None:
    base = str(tmp_path_factory.getbasetemp())
    path = os.path.join(base, "damaged.array_record")
    with open(path, "wb") as f:
        f.write(_damage(_intact(base, group_size), data))
    err = only_thresher_errors(lambda: _read(path))
    if err is not None:
        assert "damaged.array_record" in str(err), str(err)


@SETTINGS
@given(raw=st.binary(max_size=400))
def test_files_of_random_bytes_raise_thresher_errors(tmp_path_factory, raw: bytes) -> None:
    path = os.path.join(str(tmp_path_factory.getbasetemp()), "random.array_record")
    with open(path, "wb") as f:
        f.write(raw)
    assert only_thresher_errors(lambda: _read(path)) is not None


def test_the_intact_file_reads(tmp_path) -> None:
    _intact(str(tmp_path), 1)
    assert only_thresher_errors(lambda: _read(str(tmp_path / "intact-1.array_record"))) is None


def test_many_damaged_files_never_crash_the_process(tmp_path) -> None:
    # A C++ abort or segfault would kill pytest itself: read 200 damaged files in a child.
    import random

    rnd = random.Random(0)
    intact = _intact(str(tmp_path), 1)
    paths = []
    for i in range(200):
        buf = bytearray(intact)
        for _ in range(rnd.randint(1, 8)):
            buf[rnd.randrange(len(buf))] = rnd.randrange(256)
        path = tmp_path / f"d{i}.array_record"
        path.write_bytes(bytes(buf[:len(buf) - rnd.randrange(60)]))
        paths.append(str(path))
    code = ("import sys\nfrom tests.fuzz.test_fuzz_array_record import _read\n"
            "from thresher.errors import ThresherError\n"
            "for p in sys.argv[1:]:\n    try:\n        _read(p)\n    except ThresherError:\n        pass\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
