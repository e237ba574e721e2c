"""The hidden temporaries of writes: swept when stale, public modes, errors that keep errno.

- after ``kill -9`` during ``write_array_record``, ``prepare`` or ``convert``, the next write
  of the same target removes the temporaries left behind (their process is gone), and says so;
  temporaries of live writers, and recent ones without an owner, are kept;
- written files and directories honour the umask (``mkstemp``/``mkdtemp`` made them private);
- a full disk (a small tmpfs) raises WriteError with errno ENOSPC naming the file.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

import thresher as th
from thresher.errors import WriteError
from thresher.sources import ArrayRecordSource, write_array_record
from thresher.sources.formats.tfds.convert import convert
from thresher.sources.temp_files import STALE_AFTER_S, sweep_stale
from tests.sources.tfds.expected import DATA

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each child starts writing, prints READY once its temporary exists, and then blocks forever.
CHILDREN = {
    "write_array_record": r"""
import sys, time
from thresher.sources import write_array_record
def records():
    yield b"x" * 1000
    print("READY", flush=True)
    time.sleep(600)
write_array_record(sys.argv[1], records())
""",
    "prepare": r"""
import sys, time
import thresher as th
def examples():
    for i in range(3):
        yield {"x": i}
    print("READY", flush=True)
    time.sleep(600)
th.prepare(sys.argv[1], {"train": examples()}, features={"x": th.features.Scalar("int64")},
           progress=False, overwrite=True)
""",
    "convert": r"""
import sys, time
from thresher.sources.formats.tfds import tfrecord
real = tfrecord.read_records
def slow(*args, **kwargs):
    for i, record in enumerate(real(*args, **kwargs)):
        if i == 2:
            print("READY", flush=True)
            time.sleep(600)
        yield record
import thresher.sources.formats.tfds.convert as c
c.read_records = slow
c.convert(sys.argv[1], progress=False)
""",
}


def _kill_mid_write(kind: str, target: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILDREN[kind], target], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": REPO})
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "READY", proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _hidden(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".thresher-tmp-" in n)


def test_a_killed_write_array_record_is_swept_by_the_next_write(tmp_path, caplog) -> None:
    target = os.path.join(str(tmp_path), "x.array_record")
    _kill_mid_write("write_array_record", target)
    left = _hidden(str(tmp_path))
    assert len(left) == 1 and not os.path.exists(target)
    with caplog.at_level(logging.WARNING, logger="thresher"):
        assert write_array_record(target, [b"a", b"b"]) == 2
    assert _hidden(str(tmp_path)) == []
    assert left[0] in caplog.text and "is gone" in caplog.text
    assert ArrayRecordSource(target)[1] == b"b"


def test_a_killed_prepare_is_swept_by_the_next_prepare(tmp_path, caplog) -> None:
    target = os.path.join(str(tmp_path), "ds")
    _kill_mid_write("prepare", target)
    left = _hidden(str(tmp_path))
    assert len(left) == 1 and os.path.isdir(os.path.join(str(tmp_path), left[0]))
    with caplog.at_level(logging.WARNING, logger="thresher"):
        th.prepare(target, {"train": [{"x": 1}]}, features={"x": th.features.Scalar("int64")},
                   progress=False)
    assert _hidden(str(tmp_path)) == [] and left[0] in caplog.text
    assert len(th.data_source(target, split="train")) == 1


def test_a_killed_convert_is_swept_by_the_next_convert(tmp_path) -> None:
    d = os.path.join(str(tmp_path), "images_tfrecord", "2.0.1")
    shutil.copytree(os.path.join(DATA, "images_tfrecord", "2.0.1"), d)
    _kill_mid_write("convert", d)
    assert len(_hidden(d)) == 1
    assert convert(d, progress=False) == d
    assert _hidden(d) == []
    assert len(th.data_source(d, split="train")) == 48


@pytest.fixture
def live_child() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_temporaries_in_use_or_recent_are_kept_old_ones_are_swept(tmp_path, live_child: int) -> None:
    d = str(tmp_path)
    target = os.path.join(d, "x.array_record")
    host = __import__("thresher.sources.temp_files", fromlist=["_host"])._host()
    live = os.path.join(d, f".x.array_record.thresher-tmp-{live_child}@{host}.abcd1234.tmp")
    other_host = os.path.join(d, ".x.array_record.thresher-tmp-1@elsewhere.abcd1234.tmp")
    legacy = os.path.join(d, ".x.array_record.k3j2x9q1.tmp")  # an older thresher's name
    old_legacy = os.path.join(d, ".x.array_record.zz99zz99.tmp")
    unrelated = os.path.join(d, ".x.array_record.notes.tmp")
    mine = os.path.join(d, f".x.array_record.thresher-tmp-{os.getpid()}@{host}.abcd1234.tmp")
    for p in (live, other_host, legacy, old_legacy, unrelated, mine):
        with open(p, "w") as f:
            f.write("partial")
    old = time.time() - STALE_AFTER_S - 60
    for p in (old_legacy, unrelated):
        os.utime(p, (old, old))
    assert sweep_stale(target) == [old_legacy]
    os.utime(other_host, (old, old))
    assert sweep_stale(target) == [other_host]
    for p in (live, legacy, unrelated, mine):
        assert os.path.exists(p)


def test_a_replaced_dataset_is_kept_while_the_new_one_is_not_in_place(tmp_path) -> None:
    d = str(tmp_path)
    old = os.path.join(d, ".ds.thresher-old-999999999@gone.abcd1234")  # pid beyond pid_max
    os.makedirs(old)
    assert sweep_stale(os.path.join(d, "ds"), max_age_s=0) == []  # the only copy: kept
    os.makedirs(os.path.join(d, "ds"))
    assert sweep_stale(os.path.join(d, "ds"), max_age_s=0) == [old]


@pytest.fixture
def umask() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_written_files_and_directories_honour_the_umask(tmp_path, umask: None, mask: int) -> None:
    os.umask(mask)
    f, d = 0o666 & ~mask, 0o777 & ~mask
    path = os.path.join(str(tmp_path), "x.array_record")
    write_array_record(path, [b"a"])
    assert os.stat(path).st_mode & 0o777 == f
    target = os.path.join(str(tmp_path), "ds")
    th.prepare(target, {"train": {"x": np.arange(4)}}, num_shards=2, progress=False)
    assert os.stat(target).st_mode & 0o777 == d
    for name in os.listdir(target):
        assert os.stat(os.path.join(target, name)).st_mode & 0o777 == f, name
    out = convert(os.path.join(DATA, "images_tfrecord"), os.path.join(str(tmp_path), "conv"),
                  progress=False)
    assert os.stat(out).st_mode & 0o777 == d
    for name in os.listdir(out):
        assert os.stat(os.path.join(out, name)).st_mode & 0o777 == f, name


@pytest.fixture
def small_disk(tmp_path) -> Iterator[str]:
    """A 256 KiB tmpfs (needs root and a kernel that lets this process mount)."""
    mnt = os.path.join(str(tmp_path), "small")
    os.makedirs(mnt)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root; this process is not root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): "
                    f"{proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], check=True)


def test_a_full_disk_raises_write_error_with_enospc_naming_the_file(small_disk: str) -> None:
    target = os.path.join(small_disk, "big.array_record")
    with pytest.raises(WriteError) as e:
        write_array_record(target, [os.urandom(1000) for _ in range(1000)])
    assert e.value.errno == errno.ENOSPC and e.value.filename == target
    assert isinstance(e.value, OSError) and target in str(e.value)
    assert os.listdir(small_disk) == []
    ds = os.path.join(small_disk, "ds")
    with pytest.raises(WriteError) as e:
        th.prepare(ds, {"train": {"x": np.random.default_rng(0).random((40_000, 4))}},
                   progress=False)
    assert e.value.errno == errno.ENOSPC and small_disk in str(e.value)
    assert os.listdir(small_disk) == []
