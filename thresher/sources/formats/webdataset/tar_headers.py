"""A direct reader of tar headers (ustar, GNU long names, pax), for indexing shards fast.

Python's :mod:`tarfile` spends some 50-100 microseconds of Python per member (a
``TarInfo`` with every field decoded, two checksums summed byte by byte); an index needs
only each member's name, type, size and offsets. :func:`members` reads those straight
from the 512-byte header blocks, following :mod:`tarfile`'s rules exactly (the name and
its ustar prefix, the old V7 directory convention, which types carry data, GNU ``L``/``K``
long names and links, pax ``x`` headers' ``path`` and ``size``). Whatever it does not
handle the same way for certain -- a header whose checksum is not the plain unsigned sum,
a number it cannot read, a global pax header, sparse files, ``hdrcharset``, a header that
ends early or lies beyond the file, nested extensions -- raises :class:`Unusual`, and the
caller reads the shard with :mod:`tarfile` instead, so a damaged or exotic tar gets
exactly :mod:`tarfile`'s outcome and error.

Example:
    >>> import io, tarfile
    >>> buf = io.BytesIO()
    >>> with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
    ...     info = tarfile.TarInfo("d/" + "x" * 120 + ".txt")
    ...     info.size = 3
    ...     tar.addfile(info, io.BytesIO(b"abc"))
    >>> [(m.name[-6:], m.offset, m.offset_data, m.size, m.regular) for m in members(buf, len(buf.getvalue()))]
    [('xx.txt', 0, 1536, 3, True)]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO, NamedTuple

__all__ = ["Member", "Unusual", "header_fits", "members"]

_BLOCK = 512
_ZERO = bytes(_BLOCK)
_REGULAR = (b"0", b"\0", b"7")  # tarfile's REGULAR_TYPES less sparse (b"S", left to tarfile)
_NO_DATA = (b"1", b"2", b"3", b"4", b"5", b"6")  # supported types whose size tarfile does not skip
_GNU_LONG = (b"L", b"K")
_PAX_RECORD = re.compile(rb"(\d+) ([^=]+)=")
_PAX_HANDLED = frozenset({"path", "linkpath", "size", "mtime", "uid", "gid", "uname", "gname", "atime",
                          "ctime", "comment"})


class Unusual(Exception):
    """Something :func:`members` leaves to :mod:`tarfile` (the caller reads the tar with it)."""


class Member(NamedTuple):
    """A member as :mod:`tarfile` would list it: ``offset`` is its first header block (of any
    long-name or pax header before it), ``offset_data`` its data, ``end`` where the next header is."""

    name: str
    offset: int
    offset_data: int
    size: int
    regular: bool
    end: int


def _number(field: bytes) -> int:
    """tarfile's ``nti`` for the values it reads without error; Unusual otherwise."""
    if field[0] == 0o200:
        return int.from_bytes(field[1:], "big")
    if field[0] == 0o377:
        raise Unusual("negative base-256 number")
    p = field.find(b"\0")
    text = (field if p < 0 else field[:p]).strip()
    if not text:
        return 0
    try:
        return int(text.decode("ascii"), 8)
    except ValueError:
        raise Unusual("unreadable number") from None


def _text(field: bytes) -> str:
    p = field.find(b"\0")
    return (field if p < 0 else field[:p]).decode("utf-8", "surrogateescape")


def _blocks(size: int) -> int:
    return (size + _BLOCK - 1) // _BLOCK * _BLOCK


def _pax(buf: bytes) -> dict[str, str]:
    """The records of a pax ``x`` header, as tarfile reads them; Unusual for what it alone handles."""
    if b"hdrcharset=" in buf:
        raise Unusual("pax hdrcharset")
    out: dict[str, str] = {}
    pos = 0
    while True:
        m = _PAX_RECORD.match(buf, pos)
        if m is None:
            return out
        length = int(m.group(1))
        if length == 0:
            raise Unusual("pax record of length 0")
        try:
            keyword = m.group(2).decode("utf-8")
            value = buf[m.end(2) + 1:m.start(1) + length - 1].decode("utf-8")
        except UnicodeDecodeError:
            raise Unusual("pax record not in UTF-8") from None
        if keyword not in _PAX_HANDLED:
            raise Unusual(f"pax keyword {keyword!r}")
        out[keyword] = value
        pos += length


def members(f: IO[bytes], size: int) -> Iterator[Member]:
    """The members of the tar ``f`` (``size`` bytes) up to its end marker; Unusual (see the module doc)."""
    offset = 0
    while True:
        if offset + _BLOCK > size:
            raise Unusual("the archive ends without an end marker")
        first = offset
        long_name: str | None = None
        pax: dict[str, str] | None = None
        while True:  # the extension headers before a member, then its own
            f.seek(offset)
            buf = f.read(_BLOCK)
            if len(buf) != _BLOCK:
                raise Unusual("short header read")
            if buf == _ZERO:
                if long_name is not None or pax is not None:
                    raise Unusual("an extension header without its member")
                return
            if _number(buf[148:156]) != sum(buf) - sum(buf[148:156]) + 256:
                raise Unusual("header checksum")
            kind = buf[156:157]
            length = _number(buf[124:136])
            if kind in _GNU_LONG or kind == b"x":
                if offset + _BLOCK + _blocks(length) > size:
                    raise Unusual("an extension header beyond the end of the file")
                data = f.read(_blocks(length))
                if len(data) != _blocks(length):
                    raise Unusual("short extension read")
                offset += _BLOCK + _blocks(length)
                if kind == b"x":
                    if pax is not None:
                        raise Unusual("two pax headers")
                    pax = _pax(data)
                elif kind == b"L":  # outside a pax header (it overrides the pax path, as in tarfile)
                    if long_name is not None or pax is not None:
                        raise Unusual("nested long names")
                    long_name = _text(data)
                continue
            if kind in (b"g", b"X", b"S"):
                raise Unusual(f"tar member type {kind!r}")
            name = _text(buf[0:100])
            if kind == b"\0" and name.endswith("/"):
                kind = b"5"  # the old V7 directory convention
            prefix = _text(buf[345:500])
            if prefix:
                name = prefix + "/" + name
            if pax is not None:
                if "path" in pax:
                    name = pax["path"].rstrip("/")
                if "size" in pax:
                    try:
                        length = int(pax["size"])
                    except ValueError:
                        raise Unusual("pax size") from None
            if long_name is not None:
                name = long_name
            if kind == b"5":
                name = name.rstrip("/")
            if kind in _NO_DATA and length:
                raise Unusual("a size on a member without data")  # tarfile ignores it; leave it to tarfile
            data_at = offset + _BLOCK
            end = data_at if kind in _NO_DATA else data_at + _blocks(length)
            yield Member(name, first, data_at, length, kind in _REGULAR, end)
            offset = end
            break


def header_fits(block: bytes, name: str, size: int, extended: bool = False) -> bool:
    """Whether ``block`` is a valid tar header (its checksum) of a member ``name`` of ``size`` bytes.

    ``extended``: the member had a GNU long name or a pax header before this block, whose
    name (and, for members of 8 GiB or more, size) replace the block's own: only the
    checksum and a size that fits in the block are compared then.

    Example:
        >>> import tarfile
        >>> block = tarfile.TarInfo("a.txt").tobuf()[:512]
        >>> header_fits(block, "a.txt", 0), header_fits(block, "b.txt", 0), header_fits(block, "a.txt", 1)
        (True, False, False)
    """
    if len(block) != _BLOCK:
        return False
    try:
        stored = _number(block[148:156])
        if _number(block[124:136]) != size and not (extended and size >= 8**11):
            return False
    except Unusual:
        return False
    rest = sum(block) - sum(block[148:156]) + 256
    if stored != rest:  # tarfile also takes the sum of signed bytes
        signed = rest - 256 * sum(1 for b in block if b >= 128) + 256 * sum(1 for b in block[148:156] if b >= 128)
        if stored != signed:
            return False
    if extended:
        return True
    own = _text(block[0:100])
    prefix = _text(block[345:500])
    return (prefix + "/" + own if prefix else own) == name
