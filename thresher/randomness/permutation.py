"""A keyed pseudo-random permutation of [0, n) in O(1) memory.

A Feistel network on ``m = max(2, bits(n - 1))`` bits, with alternating unbalanced
halves so every m works, and cycle walking to map [0, 2**m) onto [0, n): values that
land outside [0, n) are encrypted again until they fall inside. Since the network is
a bijection on [0, 2**m), cycle walking makes it a bijection on [0, n) for every n,
and as 2**m < 2n the expected number of walks per index is below 2.

A Feistel network only generates even permutations of its 2**m domain, which makes
cycle-walked permutations of tiny n measurably non-uniform. For n <= SMALL_N the
permutation is therefore a keyed Fisher-Yates table built from the same hash (at most
32 KiB, a constant that does not grow with the dataset).

Speed without changing a single key. The loader asks for a few hundred indices at a
time; evaluated alone, such a call pays NumPy's per-call overhead (8 rounds of ~6
calls) for each small array. So a call whose indices are dense in a short range is
served from a *window*: the permutation of a run of consecutive indices evaluated
ahead in one go. The window grows (up to WINDOW_MAX indices, 128 KiB) while its
values are used and shrinks when they are not (sharded streams that skip ahead), so
memory stays bounded by a constant and a restore evaluates at most one small window.
When each Feistel half has at most TABLE_BITS bits (n <= 2**28), a round's function
of its half is read from a precomputed table of ``2**half`` entries instead of being
hashed, and the two parts of each value stay in separate arrays, so a round is one
lookup and one XOR: the same bits, a fifth of the work.

Example:
    >>> import numpy as np
    >>> from thresher.randomness.permutation import Permutation
    >>> p = Permutation(10, key=1234)
    >>> sorted(p(np.arange(10)).tolist()) == list(range(10))
    True
    >>> p.at(3) == int(p(np.array([3]))[0])
    True
"""

from __future__ import annotations

import numpy as np

from thresher.randomness.seeds import derive_seed, mix64, mix64_array, mix64_inplace

__all__ = ["NUM_ROUNDS", "SMALL_N", "TABLE_BITS", "WINDOW_MAX", "Permutation"]

NUM_ROUNDS = 8
SMALL_N = 4096
TABLE_BITS = 14  # round tables when every Feistel half fits: 8 rounds x 2**14 x 8 B = 1 MiB at most
WINDOW_MIN = 1024
WINDOW_MAX = 16384  # indices evaluated ahead at most (128 KiB of int64 keys)
_DENSE = 4  # a call is served by a window when its indices fill at least 1/_DENSE of their range
_SCALAR_WALK = 8  # at most this many values left to walk: finish them one by one in Python


def _fisher_yates(n: int, key: int) -> np.ndarray:
    """A uniform permutation of [0, n) from a keyed hash (platform independent).

    Swap targets are ``hash(key, i) mod (i + 1)``; the modulo bias is below 2**-50.
    """
    i = np.arange(n, dtype=np.uint64)
    targets = (mix64_array(i ^ np.uint64(mix64(key))) % (i + np.uint64(1))).tolist()
    table = list(range(n))
    for a in range(n - 1, 0, -1):
        b = targets[a]
        table[a], table[b] = table[b], table[a]
    return np.array(table, dtype=np.uint64)


class Permutation:
    """The bijection of [0, n) selected by ``key`` (a 64-bit int)."""

    __slots__ = (
        "_bits",
        "_int_rounds",
        "_rounds",
        "_served",
        "_table",
        "_tables",
        "_use_tables",
        "_window",
        "key",
        "n",
    )

    def __init__(self, n: int, key: int) -> None:
        if n < 0:
            raise ValueError(f"permutation size must be >= 0, got {n}")
        if n > 1 << 63:
            raise ValueError(f"permutation size must be <= 2**63, got {n}")
        self.n = int(n)
        self.key = int(key)
        m = max(2, (self.n - 1).bit_length())
        self._bits = m
        self._table = _fisher_yates(self.n, self.key) if 1 < self.n <= SMALL_N else None
        rounds = []
        top = m // 2  # bits in the top part; alternates each round
        for r in range(NUM_ROUNDS if self._table is None else 0):
            bottom = m - top
            rounds.append((derive_seed(self.key, r), bottom, top, (1 << bottom) - 1, (1 << top) - 1))
            top = bottom
        self._int_rounds = rounds  # the same rounds on Python ints: the fast path for one index
        self._rounds = [tuple(np.uint64(v) for v in r) for r in rounds]
        # Round tables, built on first use (at() never needs them).
        self._tables: list[np.ndarray] | None = None
        self._use_tables = bool(rounds) and m - m // 2 <= TABLE_BITS
        # (first index, values of [first, first + len)): replaced whole, never mutated, so a
        # reader in another thread sees either the old window or the new one.
        self._window: tuple[int, np.ndarray] | None = None
        self._served = 0  # indices served from the current window (steers its next size)

    def __reduce__(self) -> tuple[type, tuple[int, int]]:
        # Pickles as its definition: tables and windows are rebuilt where it is used.
        return (Permutation, (self.n, self.key))

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        if self._use_tables:
            return self._encrypt_tables(x)
        # Each round: x = (lo << top) | (hi ^ (mix64(lo ^ key) & top_mask)), computed in
        # place: fewer temporaries, the same bits.
        for key, bottom, top, bottom_mask, top_mask in self._rounds:
            lo = x & bottom_mask
            z = mix64_inplace(lo ^ key)
            z &= top_mask
            z ^= x >> bottom
            lo <<= top
            lo |= z
            x = lo
        return x

    def _encrypt_tables(self, x: np.ndarray) -> np.ndarray:
        # The rounds of _encrypt with mix64(lo ^ key) & top_mask looked up, on the two parts of x
        # kept apart: a round maps (hi, lo) to (lo, hi ^ table[lo]), where the parts trade widths as
        # the unbalanced halves alternate. Two passes a round; int64 throughout, so ``take`` needs no
        # index conversion.
        tables = self._tables
        if tables is None:
            tables = self._tables = [
                (mix64_array(np.arange(1 << bottom, dtype=np.uint64) ^ np.uint64(key)) & np.uint64(top_mask))
                .astype(np.int64) for key, bottom, top, bottom_mask, top_mask in self._int_rounds]
        first = self._int_rounds[0]
        x = x.astype(np.int64, copy=False)
        lo, hi = x & first[3], x >> first[1]
        for table in tables:
            t = table.take(lo)
            t ^= hi
            hi, lo = lo, t
        hi <<= self._int_rounds[-1][2]  # lo now has the top width of the last round
        hi |= lo
        return hi

    def _walk_one(self, y: int) -> int:
        """Cycle-walks one value with Python ints (the same rounds as ``_encrypt``).

        The last few values of a walk are cheaper this way than through NumPy, whose
        per-call cost (8 rounds of ~14 calls) dominates for a handful of elements.
        """
        n = self.n
        while True:
            for key, bottom, top, bottom_mask, top_mask in self._int_rounds:
                lo = y & bottom_mask
                y = (lo << top) | ((y >> bottom) ^ (mix64(lo ^ key) & top_mask))
            if y < n:
                return y

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        """Permutes an array of indices in [0, n); returns uint64."""
        x = np.asarray(indices)
        if x.dtype != np.int64:
            x = x.astype(np.uint64)
        if self.n <= 1 or x.size == 0:
            return x.astype(np.uint64)
        return self.keys(x).astype(np.uint64)

    def keys(self, x: np.ndarray) -> np.ndarray:
        """Permutes a non-empty int64 or uint64 array of indices in [0, n); returns int64.

        The sampler's entry point (no conversions). Raises IndexError for an index
        outside [0, n).

        Example:
            >>> import numpy as np
            >>> from thresher.randomness.permutation import Permutation
            >>> p = Permutation(10**6, key=7)
            >>> p.keys(np.arange(5, 9)).tolist() == [p.at(i) for i in range(5, 9)]
            True
        """
        window = self._window
        if window is not None:
            # One pass checks both ends: an index below the window wraps to a huge uint64.
            rel = x - window[0] if window[0] else x
            if int(rel.view(np.uint64).max()) < window[1].size:
                self._served += x.size
                return window[1].take(rel)
        first, top = int(x.min()), int(x.max())
        if first < 0 or top >= self.n:
            raise IndexError(f"index {top if first >= 0 else first} out of range for a permutation of {self.n}")
        if self.n <= 1:
            return x.astype(np.int64)
        if self._table is not None:
            return self._table.take(x).astype(np.int64)
        span = top - first + 1
        if span > WINDOW_MAX or x.size * _DENSE < span:
            return self._evaluate(x.astype(np.uint64)).astype(np.int64, copy=False)
        stop = min(first + self._window_size(span), self.n)
        values = self._evaluate(np.arange(first, stop, dtype=np.int64 if self._use_tables else np.uint64)).astype(
            np.int64, copy=False)
        self._window, self._served = (first, values), x.size
        return values.take(x - first if first else x)

    def _window_size(self, span: int) -> int:
        """The next window's size: doubled after a well-used window, halved after a wasted one."""
        window = self._window
        if window is None:
            return max(span, WINDOW_MIN)
        size = window[1].size
        size = size * 2 if self._served * 2 >= size else size // 2
        return max(span, WINDOW_MIN, min(size, WINDOW_MAX))

    def _evaluate(self, x: np.ndarray) -> np.ndarray:
        """The cycle-walked network on the indices ``x`` (int64 with tables, else uint64)."""
        y = self._encrypt(x)
        n = y.dtype.type(self.n)
        outside = np.flatnonzero(y >= n)
        while outside.size > _SCALAR_WALK:
            z = self._encrypt(y[outside])
            y[outside] = z
            outside = outside[z >= n]
        for i in outside.tolist():
            y[i] = self._walk_one(int(y[i]))
        return y

    def at(self, index: int) -> int:
        """Permutes one index (in plain Python integers: ~5 us, no NumPy call overhead)."""
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for a permutation of {self.n}")
        if self.n <= 1:
            return int(index)
        if self._table is not None:
            return int(self._table[index])
        return self._walk_one(int(index))
