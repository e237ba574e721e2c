"""The direct tar header reader against Python's tarfile: same indexes, same errors on damaged tars."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from thresher.errors import CorruptSourceError
from thresher.sources.formats.webdataset import index as wds_index
from thresher.sources.formats.webdataset.tar_headers import Unusual, header_fits, members

_FORMATS = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}
_part = st.text("abcXY_09-é", min_size=1, max_size=70)
_ext = st.sampled_from(["jpg", "cls", "seg.png", "TXT", "x.y"])
_member = st.one_of(
    st.tuples(st.just("file"), st.lists(_part, min_size=1, max_size=3).map("/".join), _ext,
              st.binary(max_size=1200)),
    st.tuples(st.just("dir"), _part, st.just(""), st.just(b"")),
    st.tuples(st.just("link"), _part, st.just("jpg"), st.just(b"")),
    st.tuples(st.just("meta"), st.just("__meta__"), st.just(""), st.binary(max_size=40)),
)


def _tar(fmt: int, items: list[tuple[str, str, str, bytes]]) -> bytes:
    try:
        return _write(fmt, items)
    except ValueError as e:  # a name ustar cannot hold
        assume(fmt == tarfile.USTAR_FORMAT and "too long" in str(e))
        raise


def _write(fmt: int, items: list[tuple[str, str, str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for i, (kind, stem, ext, data) in enumerate(items):
            name = f"{stem}{i}.{ext}" if ext else stem
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "x" * (50 if fmt == tarfile.USTAR_FORMAT else 120)
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _outcome(data: bytes, direct: bool) -> dict[str, list[int]] | str:
    try:
        arrays = wds_index._scan(io.BytesIO(data), len(data), "t.tar", direct=direct)
    except CorruptSourceError as e:
        return f"CorruptSourceError: {e}"
    return {k: v.tolist() for k, v in arrays.items()}


@given(fmt=st.sampled_from(sorted(_FORMATS)), items=st.lists(_member, max_size=8))
@settings(max_examples=150, deadline=None)
def test_the_index_is_tarfiles_and_read_without_it(fmt: str, items: list) -> None:
    data = _tar(_FORMATS[fmt], items)
    listed = list(members(io.BytesIO(data), len(data)))  # no Unusual: tarfile is not needed here
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        expected = [(i.name, i.offset, i.offset_data, i.size if i.isreg() else 0, i.isreg()) for i in tar]
    assert [(m.name, m.offset, m.offset_data, m.size if m.regular else 0, m.regular) for m in listed] == expected
    assert _outcome(data, direct=True) == _outcome(data, direct=False)


@given(fmt=st.sampled_from(sorted(_FORMATS)), items=st.lists(_member, min_size=1, max_size=5),
       damage=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=3),
       cut=st.one_of(st.none(), st.floats(0, 1)))
@settings(max_examples=300, deadline=None)
def test_a_damaged_tar_gets_tarfiles_outcome(fmt: str, items: list, damage: list, cut: float | None) -> None:
    data = bytearray(_tar(_FORMATS[fmt], items))
    for where, value in damage:
        data[int(where * len(data))] = value
    if cut is not None:
        data = data[:int(cut * len(data))]
    assert _outcome(bytes(data), direct=True) == _outcome(bytes(data), direct=False)


def test_what_it_leaves_to_tarfile() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": "global"}) as tar:  # a global pax header
        info = tarfile.TarInfo("a.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"1"))
    data = buf.getvalue()
    with pytest.raises(Unusual, match="type b'g'"):
        list(members(io.BytesIO(data), len(data)))
    index = wds_index.scan_tar(io.BytesIO(data), len(data), "g.tar")
    assert wds_index.unpack_names(index["names"], index["name_ends"]) == ["a.txt"]
    assert np.array_equal(index["data_offsets"], [1536])  # after the global header and its data


def _tarfile_fits(block: bytes, name: str, size: int) -> bool:
    """The check on read as tarfile makes it."""
    try:
        info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except tarfile.TarError:
        return False
    return info.size == size and (info.name == name or len(name.encode("utf-8", "surrogateescape")) >= 100)


@given(fmt=st.sampled_from(sorted(_FORMATS)), items=st.lists(_member, min_size=1, max_size=4),
       damage=st.lists(st.tuples(st.integers(0, 511), st.integers(0, 255)), max_size=2), other_size=st.booleans())
@settings(max_examples=200, deadline=None)
def test_the_check_on_read_is_tarfiles(fmt: str, items: list, damage: list, other_size: bool) -> None:
    data = _tar(_FORMATS[fmt], items)
    for m in members(io.BytesIO(data), len(data)):
        if not m.regular:
            continue
        block = bytearray(data[m.offset_data - 512:m.offset_data])
        for where, value in damage:
            block[where] = value
        size = m.size + 1 if other_size else m.size
        extended = m.offset != m.offset_data - 512  # named by a long-name or pax header
        fits = header_fits(bytes(block), m.name, size, extended)
        if not extended:
            assert fits == _tarfile_fits(bytes(block), m.name, size)
        if not damage:
            assert fits == (not other_size)
