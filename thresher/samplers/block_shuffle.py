"""BlockShuffle: a global shuffle that reads each block of records once per epoch.

A full shuffle asks for records at random over the whole dataset; where records live
in chunks that are fetched or decoded whole (ArrayRecord groups, Parquet row groups,
tar shards, objects in a bucket), every record then costs a chunk. A block shuffle
trades some shuffle quality for locality, in two keyed levels per epoch:

1. the records are cut into *blocks* of ``block_size`` consecutive record keys (or at
   the natural boundaries a source reports, see :meth:`BlockShuffle.of_source`), and
   the blocks are put in a keyed random order;
2. the records, laid out block after block in that order, are cut into *windows* of
   ``window_blocks * block_size`` records, and each window is shuffled on its own.

Every position of the epoch so needs only the blocks of its window: a reader that
holds one window's blocks fetches each block once per epoch. Both levels use the
keyed permutation of ``thresher.randomness.permutation`` (a Feistel network, or a
Fisher-Yates table for 4096 elements or fewer), so the map is a bijection for every
N and is computed from the position alone: O(1) memory and state (with natural
boundaries, 8 bytes per block, never per record). The last block of an epoch may be
short (N not a multiple of ``block_size``); it always sits at the end of the block
order, so every window but the epoch's last has exactly ``window_records`` records.

Example:
    >>> import numpy as np
    >>> from thresher.samplers.block_shuffle import BlockShuffle, EpochOrder
    >>> order = EpochOrder(10, BlockShuffle(block_size=2, window_blocks=2), key=7)
    >>> keys = order.keys(np.arange(10))
    >>> sorted(keys.tolist()) == list(range(10))
    True
    >>> order.window_blocks(0)        # the key ranges window 0 draws from (two blocks of 2)
    [(2, 4), (6, 8)]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thresher._validate import check_int
from thresher.errors import ConfigError
from thresher.randomness.permutation import Permutation
from thresher.randomness.seeds import derive_seed

__all__ = ["BlockShuffle", "EpochOrder"]

_MAX_WINDOW = 2**31  # window records: a shard block size in the state must stay below it
_CACHED_WINDOWS = 4


@dataclass(frozen=True)
class BlockShuffle:
    """Shuffle blocks of records, then records within windows of consecutive blocks.

    Args:
        block_size: records per block (consecutive record keys); with natural
            boundaries, the least a block holds where the source allows.
        window_blocks: blocks per window: records are shuffled within
            ``window_blocks * block_size`` records. 1 only reorders blocks and shuffles
            inside each; a window of N or more is a full shuffle of a block-ordered
            epoch.
        boundaries: the first record key of each block (int64, strictly increasing,
            starting at 0), or None for blocks of exactly ``block_size`` keys. Usually
            made by :meth:`of_source`.

    The defaults (512 x 128: windows of 65,536 records mixing 128 blocks) were chosen by
    ``benchmarks/shuffle_quality.py``: on a dataset sorted by class they keep the per-batch
    label mix within 1.2x of a full shuffle's distance and the demo model's accuracy within
    0.5 points, where 4096 x 16 (the same window, 16 blocks) is 2x and 10 points off.

    Memory: a reader needs about one window of records (``window_records`` times the
    mean record size) held at once to fetch each block once per epoch; see the
    block-shuffle guide for the sizing rule.

    Example:
        >>> import thresher as th
        >>> s = th.IndexSampler(100, shuffle=th.BlockShuffle(block_size=8, window_blocks=4), seed=0)
        >>> sorted(s[p].record_key for p in range(100)) == list(range(100))
        True
        >>> th.BlockShuffle(block_size=8, window_blocks=4).window_records
        32
    """

    block_size: int = 512
    window_blocks: int = 128
    boundaries: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("block_size", "window_blocks"):
            object.__setattr__(self, name, check_int(getattr(self, name), f"BlockShuffle.{name}", minimum=1))
        if self.window_records >= _MAX_WINDOW:
            raise ConfigError(f"BlockShuffle: block_size * window_blocks = {self.window_records} records per "
                              f"window; it must be below 2**31; lower block_size or window_blocks")
        if self.boundaries is not None:
            b = np.asarray(self.boundaries, dtype=np.int64).reshape(-1)
            if not b.size or b[0] != 0 or (b.size > 1 and bool((np.diff(b) <= 0).any())):
                raise ConfigError("BlockShuffle.boundaries must be the first record key of each block: strictly "
                                  f"increasing and starting at 0, got {b[:8].tolist()}...; use "
                                  "BlockShuffle.of_source(source) to take them from a source")
            b.setflags(write=False)
            object.__setattr__(self, "boundaries", b)

    @classmethod
    def of_source(cls, source: Any, *, block_size: int = 512, window_blocks: int = 128) -> BlockShuffle:
        """A BlockShuffle whose blocks follow ``source``'s natural boundaries, when it reports them.

        A source that implements ``block_boundaries(min_records)``
        (:class:`thresher.sources.protocol.BlockedSource`: ArrayRecord chunks, Parquet row
        groups, tar shards) is cut at its own boundaries into blocks of at least
        ``block_size`` records, so that no chunk is split between two blocks (and so never
        needed by two windows). Any other source gets plain blocks of ``block_size``.

        Example:
            >>> import thresher as th
            >>> th.BlockShuffle.of_source(th.sources.RangeDataSource(0, 10), block_size=4).boundaries is None
            True
        """
        from thresher.sources.protocol import natural_block_starts

        return cls(block_size, window_blocks, natural_block_starts(source, block_size))

    @property
    def window_records(self) -> int:
        """Records per window (``window_blocks * block_size``)."""
        return self.block_size * self.window_blocks

    def check(self, num_records: int) -> None:
        """Raises ConfigError unless the boundaries fit a source of ``num_records`` records."""
        b = self.boundaries
        if b is not None and num_records and int(b[-1]) >= num_records:
            raise ConfigError(f"BlockShuffle.boundaries start a block at record {int(b[-1])}, but the sampler has "
                              f"only {num_records} records: the boundaries are of another source")

    def config(self) -> dict[str, Any]:
        """What defines this shuffle (the state fingerprint covers it; boundaries by digest)."""
        digest = None
        if self.boundaries is not None:
            import hashlib  # here, not at the top: a worker (and the fork server) never makes one

            digest = hashlib.sha256(self.boundaries.astype("<i8").tobytes()).hexdigest()[:16]
        return {"kind": "block", "block_size": self.block_size, "window_blocks": self.window_blocks,
                "boundaries": digest}

    @classmethod
    def from_config(cls, config: Any) -> BlockShuffle:
        """The BlockShuffle of a ``config()`` without boundaries (those cannot be rebuilt from a digest)."""
        if not (isinstance(config, dict) and config.get("kind") == "block"):
            raise ConfigError(f"not a BlockShuffle config: {config!r}")
        if config.get("boundaries") is not None:
            raise ConfigError("this BlockShuffle used a source's natural boundaries; rebuild it with "
                              "BlockShuffle.of_source(source, ...)")
        return cls(config["block_size"], config["window_blocks"])


class EpochOrder:
    """One epoch of a BlockShuffle: epoch index -> record key, vectorised.

    ``key`` is the epoch's 64-bit key (derived from the seed and the epoch). Holds the
    block permutation (O(1); with natural boundaries, two arrays of one entry per block)
    and the permutations of the last few windows used.
    """

    def __init__(self, num_records: int, shuffle: BlockShuffle, key: int) -> None:
        self.n = n = int(num_records)
        self.shuffle = shuffle
        self.key = int(key)
        self._window_size = shuffle.window_records
        self._windows: dict[int, Permutation] = {}
        b = shuffle.boundaries
        if b is None:
            self._block = shuffle.block_size
            self._full = n // self._block  # full blocks; a short last one stays last
            self._perm = Permutation(self._full, derive_seed(self.key, 0))
            self._cum: np.ndarray | None = None
            self._first: np.ndarray | None = None
        else:
            sizes = np.diff(np.append(b, n))
            last = int(sizes[-1])
            full = b.size - (1 if last < shuffle.block_size else 0)  # a short last block stays last
            perm = np.arange(b.size, dtype=np.int64)
            if full > 1:
                perm[:full] = Permutation(full, derive_seed(self.key, 0)).keys(perm[:full])
            self._first = b[perm]
            self._cum = np.concatenate([[0], np.cumsum(sizes[perm])])

    def _window(self, w: int) -> Permutation:
        perm = self._windows.get(w)
        if perm is None:
            if len(self._windows) >= _CACHED_WINDOWS:
                self._windows.pop(next(iter(self._windows)))
            start = w * self._window_size
            size = min(self._window_size, self.n - start)
            perm = self._windows[w] = Permutation(size, derive_seed(self.key, 1, w))
        return perm

    def _record(self, j: np.ndarray) -> np.ndarray:
        """Positions in the block-ordered layout -> record keys."""
        if self._cum is not None:
            assert self._first is not None
            t = np.searchsorted(self._cum, j, side="right") - 1
            return self._first[t] + (j - self._cum[t])
        t, off = np.divmod(j, self._block)
        full = t < self._full
        if full.all():
            return self._perm.keys(t) * self._block + off
        out = j.copy()  # the short last block is in place
        if full.any():
            out[full] = self._perm.keys(t[full]) * self._block + off[full]
        return out

    def keys(self, index: np.ndarray) -> np.ndarray:
        """Indices in [0, n) of this epoch -> record keys (int64); IndexError outside."""
        i = np.asarray(index, dtype=np.int64)
        if not i.size:
            return i
        if int(i.min()) < 0 or int(i.max()) >= self.n:
            raise IndexError(f"index out of range for an epoch of {self.n} records")
        s = self._window_size
        w = i // s
        w0 = int(w[0])
        if int(w[-1]) == w0 and (w == w0).all():
            return self._record(self._window(w0).keys(i - w0 * s) + w0 * s)
        out = np.empty_like(i)
        for wi in np.unique(w).tolist():
            where = w == wi
            out[where] = self._record(self._window(wi).keys(i[where] - wi * s) + wi * s)
        return out

    def window_of(self, index: int) -> int:
        """The window that epoch index ``index`` lies in."""
        return int(index) // self._window_size

    def window_blocks(self, w: int) -> list[tuple[int, int]]:
        """The key ranges [start, stop) of the blocks window ``w`` draws from, in block order.

        A position of window ``w`` never needs a record outside them (the window bound).
        """
        lo = w * self._window_size
        hi = min(lo + self._window_size, self.n)
        if hi <= lo:
            return []
        if self._cum is not None:
            assert self._first is not None
            t0 = int(np.searchsorted(self._cum, lo, side="right")) - 1
            t1 = int(np.searchsorted(self._cum, hi - 1, side="right")) - 1
            return [(int(self._first[t]), int(self._first[t] + self._cum[t + 1] - self._cum[t]))
                    for t in range(t0, t1 + 1)]
        b = self._block
        out = []
        for t in range(lo // b, (hi - 1) // b + 1):
            first = self._perm.at(t) * b if t < self._full else t * b
            out.append((first, min(first + b, self.n)))
        return out
