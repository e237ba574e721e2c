"""Decoded chunks kept in memory within a byte budget, and one fetch per chunk at a time.

A record of an ArrayRecord file can only be read with its whole chunk. When a chunk
holds several records (``group_size > 1``), a shuffled epoch asks for it once per
record, at random times: without a cache every one of those asks is a range request.
:class:`ChunkCache` keeps the decoded chunks of recent reads (their record bounds and
bytes) up to ``budget`` bytes, so a chunk is fetched again only after it was evicted.
If the budget holds every chunk of a dataset, each chunk is fetched once per process
and epochs after the first cost no requests at all.

Eviction is least recently used first, unless the reader was told which chunks come
next (:meth:`ChunkCache.upcoming`: the chunks of the next few thousand positions of the
sampler, a bounded window): then it approaches Belady's optimal policy (evict the chunk
whose next use is farthest): the least recently used chunk *not* needed within the window
goes first, and only when every chunk held is needed within it, the one needed last. The
window only chooses what is evicted: the records read never depend on it.

A chunk fetched only because its block was (the rest of a block shuffle's block) is held as
its stored bytes (:class:`Raw`) until a read needs it; that read decodes and checks it and
puts it back decoded (:meth:`ChunkCache.replace`). A block of one-record chunks (group_size
1) is held as one entry, a :class:`Block` of its records, decoded and checked when it arrives
(in C, about a microsecond a record): evicted least recently used first.

Reads of the same chunk by concurrent threads share one fetch: the first claims it and
fetches it, the others wait for that fetch (its result or its error), so a loader that
keeps several batches' reads in flight never fetches a chunk twice at once.

Example:
    >>> cache = ChunkCache(budget=1 << 20)
    >>> hits, waits, mine = cache.claim([(0, 3)])
    >>> hits, waits, mine
    ({}, {}, [(0, 3)])
    >>> cache.fulfil((0, 3), ([0, 2, 5], b"abcde"))
    >>> cache.claim([(0, 3)])[0]
    {(0, 3): ([0, 2, 5], b'abcde')}
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import NamedTuple

import numpy as np

__all__ = ["Block", "ChunkCache", "ChunkKey", "Decoded", "Held", "Raw", "cache_cost"]

#: A chunk: (file index, chunk index in that file); a Block: (file, first chunk, last chunk).
ChunkKey = tuple[int, ...]
_FILE_SHIFT = 40  # a chunk's code in the look-ahead window: file << 40 | chunk
#: A decoded chunk: ``num_records + 1`` record bounds and the records' bytes.
Decoded = tuple[list[int], bytes]


class Raw(NamedTuple):
    """A chunk fetched but not decoded yet (nor checked): its stored bytes, ``[begin, end)`` of
    its file. A range request fetches a whole block of chunks; each is decoded by the first
    read that needs it, so a process decodes only the chunks it reads."""

    data: bytes
    begin: int
    end: int


class Block(NamedTuple):
    """The records of a block of one-record chunks (a file of group_size 1), fetched together and
    kept as one entry, under the key ``(file, first chunk, last chunk)``: a block shuffle reads
    them all, and thousands of tiny entries would cost more than the records' reading."""

    records: list[bytes]
    nbytes: int


#: What the cache holds for a chunk (or, a Block, for a block of chunks).
Held = Decoded | Raw | Block


def cache_cost(held: Held) -> int:
    """Bytes a chunk held takes (a decoded one: its records, and 8 per bound)."""
    if isinstance(held, Raw):
        return len(held.data)
    if isinstance(held, Block):
        return held.nbytes + 16 * len(held.records)
    return len(held[1]) + 8 * len(held[0])


class ChunkCache:
    """Decoded chunks up to ``budget`` bytes (least recently used evicted first), and the
    fetches in progress, shared by the threads of one process.

    Attributes:
        hits, misses, evictions: chunks found, claimed for fetching, and dropped.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: collections.OrderedDict[ChunkKey, tuple[Held, int]] = collections.OrderedDict()
        # Chunks being fetched; the Future is made only when a second thread waits for one (a
        # Future per chunk costs more than decoding a small chunk).
        self._fetching: dict[ChunkKey, Future[Held] | None] = {}
        self._size = 0
        self._lock = threading.Lock()
        self._window = np.zeros(0, dtype=np.int64)  # codes of the chunks needed next, in order
        self._soon: dict[int, int] | None = {}  # code -> its first index in the window, made when needed
        self.hits = self.misses = self.evictions = 0

    def upcoming(self, files: np.ndarray, chunks: np.ndarray) -> None:
        """The chunks (``files[i]``, ``chunks[i]``) the next reads will need, in order; it
        replaces the previous window (empty: plain LRU). Memory: the window's length,
        whatever the dataset's size; nothing is computed until an eviction needs it."""
        codes = (np.asarray(files, dtype=np.int64) << _FILE_SHIFT) | np.asarray(chunks, dtype=np.int64)
        with self._lock:
            self._window, self._soon = codes, None

    def _victim(self) -> ChunkKey:
        """The chunk to evict (lock held): the least recently used one not needed within the
        window, else the one needed last."""
        if self._soon is None:  # once per window: later occurrences first, so the first one stays
            n = len(self._window)
            self._soon = dict(zip(self._window[::-1].tolist(), range(n - 1, -1, -1), strict=True))
        soon = self._soon
        for key in self._entries:  # oldest first (a Block: by its last use only)
            if len(key) != 2 or (key[0] << _FILE_SHIFT | key[1]) not in soon:
                return key
        return max(self._entries, key=lambda k: soon[k[0] << _FILE_SHIFT | k[1]])

    def claim(self, keys: Iterable[ChunkKey], extra: Iterable[ChunkKey] = ()
              ) -> tuple[dict[ChunkKey, Held], dict[ChunkKey, Future[Held]], list[ChunkKey]]:
        """Splits ``keys`` into the chunks held (with their data), the chunks another thread is
        fetching (with the future of that fetch) and those the caller must fetch now (each
        then ends with :meth:`fulfil` or :meth:`abandon`). ``extra``: chunks the caller fetches
        too if no thread holds or fetches them (the rest of a block), claimed in the same step
        so that two threads starting on one block never split it between them."""
        hits: dict[ChunkKey, Held] = {}
        waits: dict[ChunkKey, Future[Held]] = {}
        mine: list[ChunkKey] = []
        with self._lock:
            for key in extra:
                if key not in self._entries and key not in self._fetching:
                    self._fetching[key] = None
                    mine.append(key)
            for key in keys:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    hits[key] = entry[0]
                elif key in self._fetching:
                    future = self._fetching[key]
                    if future is None:
                        future = self._fetching[key] = Future()
                    waits[key] = future
                else:
                    self._fetching[key] = None
                    mine.append(key)
            self.hits += len(hits) + len(waits)
            self.misses += len(mine)
        return hits, waits, mine

    def holds(self, key: ChunkKey) -> bool:
        """Whether ``key`` is held now (a hint: it may be evicted the next moment)."""
        return key in self._entries

    def fulfil(self, key: ChunkKey, decoded: Held) -> None:
        """The claimed chunk ``key`` was fetched: waiting threads get it, and it is kept if it
        fits in the budget (older chunks are evicted to make room)."""
        with self._lock:
            future = self._fetching.pop(key, None)
            self._put(key, decoded)
        if future is not None:
            future.set_result(decoded)

    def fulfil_many(self, items: Iterable[tuple[ChunkKey, Decoded]]) -> None:
        """:meth:`fulfil` for many decoded chunks, in one step (a block's chunks): the same
        outcome, with older chunks evicted once at the end."""
        futures = []
        entries, fetching = self._entries, self._fetching
        with self._lock:
            for key, decoded in items:
                future = fetching.pop(key, None)
                if future is not None:
                    futures.append((future, decoded))
                cost = len(decoded[1]) + 8 * len(decoded[0])
                if cost <= self.budget and key not in entries:
                    entries[key] = (decoded, cost)
                    self._size += cost
            while self._size > self.budget:
                _, dropped = entries.pop(self._victim())
                self._size -= dropped
                self.evictions += 1
        for future, decoded in futures:
            future.set_result(decoded)

    def replace(self, key: ChunkKey, decoded: Held) -> None:
        """A held chunk in another form (decoded from its Raw bytes); nothing if it was evicted."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old[1]
                self._put(key, decoded)

    def _put(self, key: ChunkKey, held: Held) -> None:
        """Keeps ``held`` if it fits in the budget, evicting older chunks (lock held)."""
        cost = cache_cost(held)
        if cost <= self.budget and key not in self._entries:
            self._entries[key] = (held, cost)
            self._size += cost
            while self._size > self.budget:
                _, dropped = self._entries.pop(self._victim())
                self._size -= dropped
                self.evictions += 1

    def abandon(self, keys: Iterable[ChunkKey], error: BaseException) -> None:
        """The claimed chunks ``keys`` could not be fetched: threads waiting for them get
        ``error``; a later read claims them again."""
        with self._lock:
            futures = [f for f in (self._fetching.pop(k, None) for k in keys) if f is not None]
        for future in futures:
            future.set_exception(error)

    @property
    def size(self) -> int:
        """Bytes held now."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)
