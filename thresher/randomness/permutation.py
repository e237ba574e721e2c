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

__all__ = ["Permutation", "NUM_ROUNDS", "SMALL_N"]

NUM_ROUNDS = 8
SMALL_N = 4096
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

    __slots__ = ("n", "key", "_bits", "_rounds", "_int_rounds", "_table")

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

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
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
        x = np.asarray(indices, dtype=np.uint64)
        if self.n <= 1 or x.size == 0:
            return x.copy()
        if self._table is not None:
            if x.size and int(x.max()) >= self.n:
                raise IndexError(f"index {int(x.max())} out of range for a permutation of {self.n}")
            return self._table[x]
        n = np.uint64(self.n)
        y = self._encrypt(x)
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
