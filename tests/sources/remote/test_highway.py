"""HighwayHash-64 against the hashes array_record's writer (Riegeli) puts in its files.

Every chunk of files written by array_record under many options is walked: the chunk
header's hash, the hash of every block header, and the hash of the chunk's data (its
lengths exercise every way a last partial packet is padded) must all match; a header
changed by one bit is refused unless ``verify_headers=False``. The C module and the
Python fallback agree on every input; the C module is built on first use where a
compiler is, and without one thresher hashes in Python and says so.
"""

from __future__ import annotations

import importlib.machinery
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thresher as th
from tests.helpers import REPO
from tests.sources.remote.test_range_reader import COMPRESSIONS, SIZES, write_native
from thresher.errors import CorruptSourceError
from thresher.sources.remote import RemoteReadOptions
from thresher.sources.remote.format import BLOCK_SIZE, read_chunk
from thresher.sources.remote.highway import RIEGELI_KEY, highway_hash64, native_module, python_hash64


def _chunks(data: bytes) -> list[int]:
    """The offsets of every chunk, found by following the chunk headers from offset 0."""
    out, pos = [], 0
    while pos < len(data):
        header, _ = read_chunk(data, 0, pos)
        out.append(pos)
        pos = header.end(pos)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(sizes=st.lists(SIZES, max_size=12), group=st.integers(1, 8),
       compression=st.sampled_from(COMPRESSIONS), seed=st.integers(0, 2**32 - 1))
def test_every_hash_in_files_array_record_writes(tmp_path_factory: Any, sizes: list[int], group: int,
                                                 compression: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    path = str(tmp_path_factory.mktemp("hh") / "x.array_record")
    write_native(path, [rng.bytes(n) for n in sizes], f"group_size:{group},{compression}")
    with open(path, "rb") as f:
        data = f.read()
    offsets = _chunks(data)  # read_chunk verifies each chunk header and its block headers
    assert len(offsets) >= 3  # signature, footer, postscript (and the data chunks)
    for pos in offsets:
        header, body = read_chunk(data, 0, pos)
        assert highway_hash64(body) == header.data_hash
    for block in range(0, len(data), BLOCK_SIZE):
        (stored,) = struct.unpack_from("<Q", data, block)
        assert stored == highway_hash64(data[block + 8:block + 24])


def test_a_changed_header_bit_is_refused(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "x.array_record")
    records = [bytes([i]) * 100 for i in range(20)]
    write_native(path, records, "group_size:1,uncompressed")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    second = _chunks(bytes(data))[2]  # after the signature chunk: records[0], then records[1]
    data[second + 16] ^= 1  # its data_hash: only the header hash disagrees with it
    with open(path, "wb") as f:
        f.write(bytes(data))
    src = th.sources.ArrayRecordSource(path, reader="ranges")
    assert src[0] == records[0]
    with pytest.raises(CorruptSourceError, match=r"records 1\.\.1 .*does not match its hash"):
        src[1]
    # Without header checks the header is believed, but its data hash then fails: chunk
    # data hashes are always verified.
    lax = th.sources.ArrayRecordSource(path, reader="ranges",
                                       read_options=RemoteReadOptions(verify_headers=False))
    assert lax[0] == records[0]
    with pytest.raises(CorruptSourceError, match=r"records 1\.\.1 .*chunk data hash mismatch"):
        lax[1]


def test_known_values() -> None:
    # Every Riegeli file starts with the same block header and signature chunk; their
    # hashes (and the hash of the signature's empty data) as array_record wrote them.
    assert highway_hash64(struct.pack("<QQ", 0, 64)) == 0x3F4A880DD170AF83
    signature = bytes.fromhex("0000000000000000e19f13c0e9b1c37273000000000000000000000000000000")
    assert highway_hash64(signature) == 0xA9E187923CC2BA91
    assert highway_hash64(b"") == 0x72C3B1E9C0139FE1


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), cut=st.integers(0, 64))
def test_c_and_python_agree(data: bytes, cut: int) -> None:
    assert highway_hash64(data) == python_hash64(data)
    assert highway_hash64(memoryview(data)[cut:]) == python_hash64(data[cut:])
    key = (cut, 2**64 - 1 - cut, 1, 0)
    assert highway_hash64(data, key) == python_hash64(data, key)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=200, max_size=3000), cut=st.integers(0, 64),
       key=st.tuples(*[st.integers(0, 2**64 - 1)] * 4))
def test_the_avx2_and_portable_loops_agree(data: bytes, cut: int, key: tuple[int, int, int, int]) -> None:
    # inputs of 256 bytes and more hash their whole packets in AVX2 where the CPU has it
    module = native_module()
    assert module is not None
    on = module.simd()
    try:
        module.simd(False)
        portable = [module.hash64(d, *key) for d in (data, memoryview(data)[cut:])]
        module.simd(True)
        assert [module.hash64(d, *key) for d in (data, memoryview(data)[cut:])] == portable
    finally:
        module.simd(on)
    assert portable[0] == python_hash64(data, key)


def test_the_avx2_loop_is_used_where_the_cpu_has_it() -> None:
    module = native_module()
    assert module is not None
    if platform.machine() not in ("x86_64", "AMD64"):
        assert module.simd() is False  # the AVX2 loop is built for x86-64 only
    elif os.path.exists("/proc/cpuinfo"):  # Linux says what the CPU has: the choice must follow it
        assert module.simd() == ("avx2" in Path("/proc/cpuinfo").read_text().split())
    big = bytes(range(256)) * 4096  # 1 MiB: whole packets, then the check of a known value
    assert module.hash64(big, *RIEGELI_KEY) == python_hash64(big)


CHILD = """
import sys, warnings
sys.path.insert(0, {repo!r})
warnings.simplefilter("always")
sys.modules["thresher.sources.remote._highway"] = None  # as if pip had built none (if it did)
from thresher.sources.remote import highway
print(highway.implementation())
print(hex(highway.highway_hash64(bytes(range(256)) * 9)))
"""


def _child(native_dir: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, THRESHER_NATIVE_DIR=native_dir)
    return subprocess.run([sys.executable, "-c", CHILD.format(repo=REPO)], env=env, capture_output=True,
                          text=True, timeout=300, check=True)


def test_the_c_module_is_built_on_first_use(tmp_path: Any) -> None:
    if not (shutil.which("cc") or sysconfig.get_config_var("LDSHARED")) or \
            not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no C compiler or no Python headers on this machine: the build cannot be tried")
    folder = str(tmp_path / "native")
    done = _child(folder)
    lines = done.stdout.split()
    assert re.match(rf"c(, avx2)? \(built on first use in {re.escape(folder)}\)", done.stdout), \
        done.stdout + done.stderr
    assert int(lines[-1], 16) == python_hash64(bytes(range(256)) * 9)
    assert len(os.listdir(folder)) == 1 and "RuntimeWarning" not in done.stderr
    assert _child(folder).stdout == done.stdout  # the second process loads it: nothing is built
    assert len(os.listdir(folder)) == 1


def test_a_build_removes_builds_unused_for_a_month_and_keeps_the_others(tmp_path: Any) -> None:
    if not (shutil.which("cc") or sysconfig.get_config_var("LDSHARED")) or \
            not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no C compiler or no Python headers on this machine: the build cannot be tried")
    folder = tmp_path / "native"
    folder.mkdir()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    old, recent = folder / f"_highway_0000000000000000{suffix}", folder / f"_highway_1111111111111111{suffix}"
    other_python, unrelated = folder / "_highway_2222222222222222.cpython-399-x.so", folder / "notes.txt"
    for path in (old, recent, other_python, unrelated):
        path.write_bytes(b"")
    month_ago = time.time() - 31 * 86400
    for path in (old, other_python, unrelated):
        os.utime(path, (month_ago, month_ago))
    done = _child(str(folder))
    assert re.match(r"c(, avx2)? \(built on first use", done.stdout), done.stdout + done.stderr
    left = set(os.listdir(folder))
    assert old.name not in left  # this Python's, unused for a month: an earlier version's build
    assert {recent.name, other_python.name, unrelated.name} <= left and len(left) == 4


def test_without_a_c_module_python_hashes_and_says_so(tmp_path: Any) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a folder cannot be made under a file: nothing can be built
    done = _child(str(blocker / "native"))
    assert done.stdout.startswith("python (it could not be built"), done.stdout
    assert "RuntimeWarning" in done.stderr and "pure Python" in done.stderr
    assert int(done.stdout.split()[-1], 16) == python_hash64(bytes(range(256)) * 9)


def test_a_module_others_can_write_is_not_loaded(tmp_path: Any) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)  # a folder anyone can write: what is in it is not run
    done = _child(str(folder))
    assert done.stdout.startswith("python (") and "not this user's alone" in done.stdout, done.stdout
    assert int(done.stdout.split()[-1], 16) == python_hash64(bytes(range(256)) * 9)
