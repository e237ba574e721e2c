"""WebDatasetSource: random access to the samples of WebDataset tar shards, read in place.

Example:
    >>> import io, os, tarfile, tempfile
    >>> import thresher as th
    >>> d = tempfile.mkdtemp()
    >>> for s in range(2):
    ...     with tarfile.open(os.path.join(d, f"shard-{s:06d}.tar"), "w") as tar:
    ...         for i in range(3):
    ...             for ext, data in [("txt", f"s{s}i{i}".encode()), ("cls", str(i).encode())]:
    ...                 info = tarfile.TarInfo(f"{s}{i:04d}.{ext}")
    ...                 info.size = len(data)
    ...                 tar.addfile(info, io.BytesIO(data))
    >>> src = th.sources.WebDatasetSource(os.path.join(d, "shard-{000000..000001}.tar"))
    >>> len(src), src[4]["__key__"], src[4]["txt"], src[4]["cls"]
    (6, '10001', b's1i1', b'1')
    >>> th.sources.WebDatasetSource(os.path.join(d, "shard-*.tar"), decode=True)[4]["cls"]
    1
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from thresher.sources.formats.index_cache import load_or_build
from thresher.sources.formats.shard_files import ShardFiles, in_shard_groups
from thresher.sources.formats.shards import Shard, list_shards
from thresher.sources.formats.webdataset.decode import DECODERS, decode_sample
from thresher.sources.formats.webdataset.index import (
    INDEX_KIND,
    INDEX_VERSION,
    check_header,
    scan_tar,
    split_key,
    unpack_names,
)
from thresher.sources.protocol import check_key, check_keys, join_blocks

__all__ = ["WebDatasetSource"]

_REMOTE_READS_IN_FLIGHT = 16
_HEADER = 512


class _Shard:
    """The loaded index of one shard."""

    def __init__(self, index: dict[str, np.ndarray]) -> None:
        self.keys = unpack_names(index["keys"], index["key_ends"])
        self.names = unpack_names(index["names"], index["name_ends"])
        self.starts, self.data_offsets = index["starts"], index["data_offsets"]
        self.sizes, self.members = index["sizes"], index["sample_members"]

    def __len__(self) -> int:
        return len(self.keys)


class WebDatasetSource:
    """Samples of WebDataset tar shards: ``{"__key__": str, "__url__": str, EXT: bytes, ...}``.

    Args:
        urls: a shard, a brace pattern (``shards/{000000..001023}.tar``), a glob
            (sorted), or a list of them; URLs (``s3://``, ``gs://``) are read by byte
            ranges through fsspec.
        decode: False (members as bytes), True (the usual extensions decoded:
            :data:`~thresher.sources.formats.webdataset.decode.DECODERS`), or a dict
            ``{extension: function(bytes)}``.
        storage_options: fsspec options for URLs.

    Samples are grouped as the ``webdataset`` library groups them
    (:mod:`~thresher.sources.formats.webdataset.index`); key ``k`` is the k-th sample of
    the shards in order. Each shard's index is built in one pass over its tar headers
    and cached (beside the shard when writable, else in the user cache), keyed by its
    size and mtime or ETag; worker processes load it instead of building it. Reading a
    sample reads one byte range: its members' headers and bytes, and checks each header
    against the index, so a shard that changed is an error, never other data.
    """

    def __init__(self, urls: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 decode: bool | Mapping[str, Callable[[bytes], Any]] = False,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self.decode = decode
        self._open(list_shards(urls, storage_options, what="WebDataset"), storage_options)

    def _open(self, shards: list[Shard], storage_options: Mapping[str, Any] | None) -> None:
        self._files = ShardFiles(shards, storage_options)
        self._shards = [_Shard(self._index(i)) for i in range(len(shards))]
        self._starts = np.concatenate([[0], np.cumsum([len(s) for s in self._shards], dtype=np.int64)])
        self._starts = self._starts.astype(np.int64)
        if self._files.remote:
            self.suggested_reads_in_flight = _REMOTE_READS_IN_FLIGHT

    def _index(self, i: int) -> dict[str, np.ndarray]:
        shard = self._files.shards[i]

        def build() -> dict[str, np.ndarray]:
            with self._files.open_stream(i) as f:
                return scan_tar(f, shard.size, shard.url)

        return load_or_build(shard, INDEX_KIND, INDEX_VERSION, build)

    def __getstate__(self) -> dict[str, Any]:
        return {"files": self._files, "decode": self.decode}

    def __setstate__(self, state: dict[str, Any]) -> None:
        files: ShardFiles = state["files"]
        self.decode = state["decode"]
        files.check_unchanged()
        self._open(files.shards, files.storage_options)

    @property
    def urls(self) -> list[str]:
        """The shards, in key order."""
        return [s.url for s in self._files.shards]

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __repr__(self) -> str:
        return f"WebDatasetSource({len(self._shards)} shards, {len(self)} samples)"

    def block_boundaries(self, min_records: int = 1) -> np.ndarray:
        """The first key of each natural block (one per shard, consecutive ones joined until a block
        holds at least ``min_records``), as :class:`thresher.sources.protocol.BlockedSource` asks;
        ``thresher.BlockShuffle.of_source`` uses them."""
        return join_blocks(self._starts, min_records)

    def _locate(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shards = np.searchsorted(self._starts, keys, side="right") - 1
        return shards, keys - self._starts[shards]

    def record_locations(self, record_keys: Sequence[int]) -> list[tuple[str, int]]:
        """The shard of each key and the sample's index in it (nothing is read)."""
        shards, local = self._locate(check_keys(record_keys, len(self), repr(self)))
        return [(self._files.name(int(s)), int(j)) for s, j in zip(shards, local, strict=True)]

    def __getitem__(self, record_key: int) -> dict[str, Any]:
        return self.__getitems__([check_key(record_key, len(self), repr(self))])[0]

    def __getitems__(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        keys = check_keys(record_keys, len(self), repr(self))
        shards, local = self._locate(keys)
        if not self._files.remote:  # members sliced out of the shards' maps, each copied once
            grouped = in_shard_groups(keys, shards, self.__getitems__)  # more shards than maps kept
            if grouped is not None:
                return grouped
            maps = self._files.local_buffers(set(shards.tolist()))
            return [self._sample(s, j, maps[s], 0) for s, j in zip(shards.tolist(), local.tolist(), strict=True)]
        ranges = []
        for s, j in zip(shards.tolist(), local.tolist(), strict=True):
            sh = self._shards[s]
            first, last = int(sh.members[j]), int(sh.members[j + 1]) - 1
            ranges.append((s, int(sh.starts[first]), int(sh.data_offsets[last] + sh.sizes[last])))
        blobs = self._files.read_many(ranges)
        return [self._sample(s, j, blob, start)
                for (s, start, _), j, blob in zip(ranges, local.tolist(), blobs, strict=True)]

    def _sample(self, s: int, j: int, blob: bytes | mmap.mmap, start: int) -> dict[str, Any]:
        """Sample ``j`` of shard ``s`` out of ``blob``, the shard's bytes from byte ``start`` on."""
        sh, url = self._shards[s], self._files.name(s)
        sample: dict[str, Any] = {"__key__": sh.keys[j], "__url__": url}
        for m in range(int(sh.members[j]), int(sh.members[j + 1])):
            at, size, name = int(sh.data_offsets[m]) - start, int(sh.sizes[m]), sh.names[m]
            extended = int(sh.starts[m]) != at + start - _HEADER  # a long name or pax header first
            check_header(blob[at - _HEADER:at], name, size, url, at - _HEADER + start, extended)
            parts = split_key(name)
            assert parts is not None  # the index holds keyed members only
            sample[parts[1]] = blob[at:at + size]
        if self.decode is False:
            return sample
        decoders = DECODERS if self.decode is True else self.decode
        return decode_sample(sample, decoders, where=f"{url}: ")

    def close(self) -> None:
        """Closes open files (they reopen on the next read)."""
        self._files.close()
