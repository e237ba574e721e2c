"""Which chunks belong together: the blocks of a block shuffle's current windows.

A :class:`thresher.BlockShuffle` reads, within a window, every record of a few blocks of
consecutive keys. The loader tells the reader those blocks (``upcoming_blocks``) as it
reaches each window; :class:`BlockHints` keeps the chunk ranges of the last few windows'
blocks, and a read that needs any chunk of a hinted block fetches the whole block: its
chunks are adjacent, so they come back in one coalesced range request (a few when a
block passes ``max_request_bytes``) instead of one request per record. The hint only
chooses how much is fetched at once: the records returned never depend on it.

Memory: ``max_blocks`` ranges (3 integers each), whatever the dataset's size.

Example:
    >>> hints = BlockHints()
    >>> hints.add([(0, 4, 7), (1, 0, 1)])      # (file, first chunk, last chunk) per block
    >>> hints.expand([(0, 5), (2, 9)])
    [(0, 4), (0, 6), (0, 7)]
"""

from __future__ import annotations

import bisect
import collections
import threading
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["BlockHints"]


class BlockHints:
    """The chunk ranges of the most recently hinted blocks (at most ``max_blocks``)."""

    def __init__(self, max_blocks: int = 1024) -> None:
        self.max_blocks = max_blocks
        self._ranges: collections.OrderedDict[tuple[int, int, int], None] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._sorted: np.ndarray | None = None  # the ranges as rows (file, first, last), sorted; made when needed

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def add(self, blocks: Iterable[tuple[int, int, int]]) -> None:
        """Adds blocks ``(file, first chunk, last chunk)``; the oldest are forgotten past the cap."""
        with self._lock:
            for b in blocks:
                self._ranges[b] = None
                self._ranges.move_to_end(b)
            while len(self._ranges) > self.max_blocks:
                self._ranges.popitem(last=False)
            self._sorted = None

    def locate(self, files: np.ndarray, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hinted block that holds each chunk (``files[i]``, ``chunks[i]``): its first and last
        chunk; -1 for both where none does (or where blocks overlap and the one that starts last
        before the chunk ends before it: a hint may miss, never mislead).

        Example:
            >>> hints = BlockHints()
            >>> hints.add([(0, 4, 7)])
            >>> [a.tolist() for a in hints.locate(np.array([0, 0, 1]), np.array([5, 8, 5]))]
            [[4, -1, -1], [7, -1, -1]]
        """
        with self._lock:
            rows = self._sorted
            if rows is None:
                rows = np.array(list(self._ranges) or np.zeros((0, 3)), dtype=np.int64).reshape(-1, 3)
                rows = self._sorted = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
        files = np.asarray(files, dtype=np.int64)
        chunks = np.asarray(chunks, dtype=np.int64)
        lo = np.full(files.shape, -1, dtype=np.int64)
        hi = lo.copy()
        if not len(rows) or not files.size:
            return lo, hi
        # the last block starting at or before each chunk, in its file: (file, first) pairs in order
        at = np.searchsorted(rows[:, 0] * (1 << 40) + rows[:, 1], files * (1 << 40) + chunks, side="right") - 1
        ok = at >= 0
        row = rows[np.maximum(at, 0)]
        ok &= (row[:, 0] == files) & (chunks <= row[:, 2])
        lo[ok], hi[ok] = row[ok, 1], row[ok, 2]
        return lo, hi

    def expand(self, claimed: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The other chunks of the hinted blocks that hold the ``claimed`` chunks, sorted."""
        if not claimed:
            return []
        with self._lock:
            ranges = list(self._ranges)
        if not ranges:
            return []
        by_file: dict[int, list[int]] = {}
        for f, c in claimed:
            by_file.setdefault(f, []).append(c)
        for sorted_chunks in by_file.values():
            sorted_chunks.sort()
        out: set[tuple[int, int]] = set()
        for f, lo, hi in ranges:
            chunks = by_file.get(f)
            if chunks is not None:
                i = bisect.bisect_left(chunks, lo)
                if i < len(chunks) and chunks[i] <= hi:
                    out.update((f, c) for c in range(lo, hi + 1))
        return sorted(out - set(claimed))
