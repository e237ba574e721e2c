"""The sample index of a WebDataset tar shard, built in one pass over its headers.

Members are grouped into samples as the ``webdataset`` library groups them: a member's
key is its path up to the first dot of its file name (``train/0001.seg.png`` has key
``train/0001`` and extension ``seg.png``, lowercased), and consecutive members with the
same key form one sample. Non-regular members (directories, links) and metadata named
``__...__`` are passed over, as ``webdataset`` does. Where ``webdataset`` would go on,
the index refuses, naming the shard and the byte offset: a member without a key (no dot
in its name), a key that appears again after other samples (a duplicate), an extension
twice in one sample, a truncated archive, a compressed one.

The index holds per sample its key and its members (name, data offset and size, and
where its first header block starts), so a sample is one byte range of the shard.

Example:
    >>> import io, tarfile
    >>> buf = io.BytesIO()
    >>> with tarfile.open(fileobj=buf, mode="w") as tar:
    ...     for name, data in [("a.jpg", b"J"), ("a.cls", b"3"), ("b.jpg", b"K")]:
    ...         info = tarfile.TarInfo(name)
    ...         info.size = len(data)
    ...         tar.addfile(info, io.BytesIO(data))
    >>> index = scan_tar(io.BytesIO(buf.getvalue()), len(buf.getvalue()), "mem.tar")
    >>> unpack_names(index["keys"], index["key_ends"]), index["sample_members"].tolist()
    (['a', 'b'], [0, 2, 3])
"""

from __future__ import annotations

import re
import tarfile
from typing import IO

import numpy as np

from thresher.errors import CorruptSourceError
from thresher.sources.formats.webdataset.tar_headers import Unusual, header_fits, members

__all__ = ["INDEX_KIND", "INDEX_VERSION", "check_header", "pack_names", "scan_tar", "split_key", "unpack_names"]

INDEX_KIND = "wds"
INDEX_VERSION = 1
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")
_BLOCK = tarfile.BLOCKSIZE


def split_key(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name, as ``webdataset`` splits it; None without a key.

    Example:
        >>> split_key("dir/0001.seg.PNG"), split_key("README")
        (('dir/0001', 'seg.png'), None)
    """
    m = _KEY.match(name)
    return None if m is None else (m.group(1), m.group(2).lower())


def pack_names(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the end of each (no pickle needed to store them)."""
    blobs = [n.encode("utf-8", "surrogateescape") for n in names]
    return (np.frombuffer(b"".join(blobs), dtype=np.uint8).copy(),
            np.cumsum([len(b) for b in blobs], dtype=np.int64))


def unpack_names(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    """The strings :func:`pack_names` packed."""
    data = blob.tobytes()
    out, start = [], 0
    for end in ends.tolist():
        out.append(data[start:end].decode("utf-8", "surrogateescape"))
        start = end
    return out


def _bad(name: str, offset: int, what: str) -> CorruptSourceError:
    return CorruptSourceError(f"{name}: {what} (tar member at byte {offset})")


def _refuse_compressed(name: str, head: bytes) -> None:
    kind = {b"\x1f\x8b": "gzip", b"\x28\xb5": "zstd", b"BZ": "bzip2", b"\xfd7": "xz"}.get(head[:2])
    if kind is not None or name.endswith((".tar.gz", ".tgz", ".tar.zst", ".tar.bz2", ".tar.xz")):
        base = name.rsplit("/", 1)[-1]
        raise CorruptSourceError(
            f"{name} is a compressed tar ({kind or 'by its name'}), which cannot be read at random: "
            f"decompress each shard once, e.g. `gunzip -k {base}` (or `zstd -d`, `bunzip2 -k`, `unxz -k`), "
            "and read the .tar files; for a bucket, copy down, decompress and upload them")


class _Samples:
    """The members of one shard grouped into samples, as they are met."""

    def __init__(self, name: str, size: int) -> None:
        self.name, self.size = name, size
        self.keys: list[str] = []
        self.names: list[str] = []
        self.starts: list[int] = []  # where each member's first header block starts
        self.data_offsets: list[int] = []
        self.sizes: list[int] = []
        self.sample_members: list[int] = [0]
        self.seen: dict[str, int] = {}
        self.exts: set[str] = set()

    def add(self, member_name: str, offset: int, offset_data: int, size: int) -> None:
        name = self.name
        if offset_data + size > self.size:
            raise _bad(name, offset, f"the archive is truncated: member {member_name!r} needs "
                       f"{size} bytes from byte {offset_data}, the file ends at byte {self.size}")
        parts = split_key(member_name)
        if parts is None:
            raise _bad(name, offset, f"member {member_name!r} has no key (a WebDataset member is "
                       "named KEY.EXTENSION)")
        key, ext = parts
        if not self.keys or key != self.keys[-1]:
            if key in self.seen:
                raise _bad(name, offset, f"key {key!r} appears again after other samples (first "
                           f"at byte {self.seen[key]}): duplicate keys")
            self.seen[key] = offset
            if self.keys:
                self.sample_members.append(len(self.names))
            self.keys.append(key)
            self.exts = set()
        elif ext in self.exts:
            raise _bad(name, offset, f"sample {key!r} has two members with extension {ext!r}")
        self.exts.add(ext)
        self.names.append(member_name)
        self.starts.append(offset)
        self.data_offsets.append(offset_data)
        self.sizes.append(size)

    def arrays(self) -> dict[str, np.ndarray]:
        key_blob, key_ends = pack_names(self.keys)
        name_blob, name_ends = pack_names(self.names)
        members = [*self.sample_members, len(self.names)] if self.keys else [0]
        return {"keys": key_blob, "key_ends": key_ends, "names": name_blob, "name_ends": name_ends,
                "starts": np.asarray(self.starts, np.int64), "data_offsets": np.asarray(self.data_offsets, np.int64),
                "sizes": np.asarray(self.sizes, np.int64), "sample_members": np.asarray(members, np.int64)}


def _open_tar(f: IO[bytes], name: str) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=f, mode="r:")
    except tarfile.ReadError as e:
        raise _bad(name, 0, f"not a readable tar archive ({e})") from None


def _meta(member: str) -> bool:
    """Metadata ``webdataset`` passes over: members named ``__...__`` (as are non-regular members)."""
    top = "/" not in member and member.startswith("__") and member.endswith("__")
    return top or _META.match(member) is not None


def scan_tar(f: IO[bytes], size: int, name: str) -> dict[str, np.ndarray]:
    """The sample index of the tar ``f`` of ``size`` bytes (see the module doc).

    Headers are read by :func:`~thresher.sources.formats.webdataset.tar_headers.members`; a tar
    it leaves to :mod:`tarfile` (damaged, or with rare extensions) is read again with it."""
    return _scan(f, size, name, direct=True)


def _scan(f: IO[bytes], size: int, name: str, direct: bool) -> dict[str, np.ndarray]:
    _refuse_compressed(name, f.read(4))
    samples = _Samples(name, size)
    end = 0
    try:
        if not direct:
            raise Unusual("asked for tarfile")
        for m in members(f, size):
            end = m.end
            if m.regular and not _meta(m.name):
                samples.add(m.name, m.offset, m.offset_data, m.size)
    except Unusual:
        samples, end = _scan_with_tarfile(f, size, name)
    _check_end(f, size, end, name)
    return samples.arrays()


def _scan_with_tarfile(f: IO[bytes], size: int, name: str) -> tuple[_Samples, int]:
    f.seek(0)
    samples = _Samples(name, size)
    end = 0
    with _open_tar(f, name) as tar:
        try:
            for info in tar:
                end = info.offset_data + (info.size + _BLOCK - 1) // _BLOCK * _BLOCK
                if info.isreg() and not _meta(info.name):
                    samples.add(info.name, info.offset, info.offset_data, info.size)
        except tarfile.TarError as e:
            raise _bad(name, tar.offset, f"the archive is corrupt ({e})") from None
    return samples, end


def _check_end(f: IO[bytes], size: int, end: int, name: str) -> None:
    """The archive must go on with its end-of-archive marker (two zero blocks): else it was cut short."""
    f.seek(min(end, size))
    rest = f.read(2 * _BLOCK)
    if size - end < 2 * _BLOCK or rest.strip(b"\0"):
        raise _bad(name, end, f"the archive is truncated or damaged: no end-of-archive marker after the "
                   f"last member (the file has {size} bytes)")


def check_header(block: bytes, name: str, size: int, shard: str, offset: int, extended: bool = False) -> None:
    """CorruptSourceError unless ``block`` is the tar header of member ``name`` with ``size`` bytes
    (``extended``: after a long-name or pax header, which named it:
    :func:`~thresher.sources.formats.webdataset.tar_headers.header_fits`)."""
    if not header_fits(block, name, size, extended):
        raise CorruptSourceError(f"{shard}: the tar header at byte {offset} is not the one its index names "
                                 f"({name!r}, {size} bytes): the shard changed after it was indexed or is "
                                 "corrupt; make the source again to rebuild the index")
