"""Where this process's positions lie in the global stream: the arithmetic, written once.

Shards deal the global stream in blocks of ``block_size`` consecutive positions,
block k to shard ``k mod shard_count`` (docs/architecture.md). Local position p of shard s lies
in the shard's block ``p // b``, which is global block ``(p // b) * P + s``.

Example:
    >>> from thresher.samplers.geometry import ShardGeometry
    >>> g = ShardGeometry(shard_index=1, shard_count=2, block_size=4)
    >>> g.to_global(5)                 # block 1 of shard 1 = global block 3, offset 1
    13
    >>> g.to_global_array(np.array([0, 5])).tolist()
    [4, 13]
    >>> g.step_start(8), g.step_start(5)   # 8: a step boundary (2 rounds of 2 x 4)
    (16, None)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ShardGeometry"]


@dataclass(frozen=True)
class ShardGeometry:
    """One shard's part of the global stream: its index, the shard count, the block size."""

    shard_index: int
    shard_count: int
    block_size: int

    @property
    def round_size(self) -> int:
        """Global positions in one round of blocks (one block per shard)."""
        return self.shard_count * self.block_size

    def to_global(self, position: int) -> int:
        """The global position of local position ``position`` (plain integers)."""
        block, offset = divmod(position, self.block_size)
        return (block * self.shard_count + self.shard_index) * self.block_size + offset

    def to_global_array(self, positions: np.ndarray) -> np.ndarray:
        """``to_global`` for an array of local positions (int64)."""
        p = np.asarray(positions, dtype=np.int64)
        b, shards = self.block_size, self.shard_count
        if shards == 1:
            return p
        if b == 1:
            return p * shards + self.shard_index
        block, offset = np.divmod(p, b)
        return (block * shards + self.shard_index) * b + offset

    def first_at_or_after(self, global_position: int) -> int:
        """The first local position whose global position is >= ``global_position``.

        Example:
            >>> g = ShardGeometry(shard_index=1, shard_count=3, block_size=2)   # global 2, 3, 8, 9, ...
            >>> [g.first_at_or_after(x) for x in (0, 3, 4, 9, 10)]
            [0, 1, 2, 3, 4]
        """
        b = self.block_size
        block, offset = divmod(global_position, b)
        rounds, shard = divmod(block, self.shard_count)
        if shard < self.shard_index:
            return rounds * b
        if shard == self.shard_index:
            return rounds * b + offset
        return (rounds + 1) * b

    def step_start(self, position: int) -> int | None:
        """The global position every shard stands at when this one is at ``position``.

        Defined when ``position`` is a whole number of blocks (a step boundary when
        blocks are batches): every global position before it has then been handed
        out, by some shard, and none after. None otherwise.
        """
        if self.shard_count == 1:
            return position
        if position % self.block_size:
            return None
        return (position // self.block_size) * self.round_size

    def local_length(self, total: int, drop_remainder: bool) -> int:
        """This shard's number of positions out of ``total`` global ones."""
        b = self.block_size
        rounds, rest = divmod(total, self.round_size)
        if drop_remainder:
            return rounds * b
        return rounds * b + min(max(rest - self.shard_index * b, 0), b)
