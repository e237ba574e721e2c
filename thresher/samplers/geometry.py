"""Where a process's positions lie in the global stream: one type, its arithmetic written once.

``Geometry`` is what the sampler deals by, what a state records (``state['geometry']``) and
what the forensics read steps with. Shards deal the global stream in blocks of ``block_size``
consecutive positions, block k to shard ``k mod shard_count`` (docs/architecture.md). Local
position p of shard s lies in the shard's block ``p // b``, which is global block ``(p // b) * P + s``.

Example:
    >>> from thresher.samplers.geometry import Geometry
    >>> g = Geometry(shard_index=1, shard_count=2, block_size=4)
    >>> g.to_global(5)                 # block 1 of shard 1 = global block 3, offset 1
    13
    >>> g.to_global_array(np.array([0, 5])).tolist()
    [4, 13]
    >>> g.step_start(8), g.step_start(5)   # 8: a step boundary (2 rounds of 2 x 4)
    (16, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from thresher._validate import check_int, is_int, require_key
from thresher.errors import InvalidStateError

__all__ = ["Geometry", "ShardGeometry"]

_MAX_GEOMETRY = 2**31  # shard counts, block and batch sizes: their products must stay in int64
_SAVED = ("shard_index", "shard_count", "block_size", "batch_size", "drop_remainder", "aligned")


@dataclass(frozen=True)
class Geometry:
    """One process's part of the stream: its shard, the blocks shards deal, its batches.

    Attributes:
        shard_index, shard_count, block_size: how shards deal the stream.
        batch_size: positions per batch (None without a Batch).
        drop_remainder: shards drop the stream's remainder (``ShardOptions.drop_remainder``).
        aligned: a Batch and no Filter, and blocks equal the batch size (or one shard), so a
            step boundary is a global one.
        drop_last: the Batch drops a last partial batch (step arithmetic only; not saved).
        total: global positions in the stream, None when endless (step arithmetic only; not
            saved: the state's stream says it).

    A state saves the first six fields (``to_json``); the two others are set by
    :func:`thresher.loader.steps.step_geometry` for the step arithmetic (``step_range``).
    """

    shard_index: int
    shard_count: int
    block_size: int
    batch_size: int | None = None
    drop_remainder: bool = False
    aligned: bool = False
    drop_last: bool = False
    total: int | None = None

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
            >>> g = Geometry(shard_index=1, shard_count=3, block_size=2)   # global 2, 3, 8, 9, ...
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

    def global_position(self, position: int) -> int | None:
        """The global position all processes stand at when this one is at ``position``.

        Known when the geometry is aligned and ``position`` is at a step boundary.
        """
        return self.step_start(position) if self.aligned else None

    def local_length(self, total: int, drop_remainder: bool) -> int:
        """This shard's number of positions out of ``total`` global ones."""
        b = self.block_size
        rounds, rest = divmod(total, self.round_size)
        if drop_remainder:
            return rounds * b
        return rounds * b + min(max(rest - self.shard_index * b, 0), b)

    def shard(self, shard_index: int) -> Geometry:
        """The geometry of shard ``shard_index`` of the same run."""
        return replace(self, shard_index=shard_index)

    def shape(self) -> Geometry:
        """The geometry without the shard index (equal for all processes of one run)."""
        return self.shard(0)

    # The steps: step t of a process is its local positions [t*B, (t+1)*B) when they are arithmetic
    # (thresher.loader.steps.step_geometry refuses pipelines whose steps depend on the data).

    @property
    def step_size(self) -> int:
        """B: positions per step of one process (the batch size, 1 without a Batch)."""
        return self.batch_size or 1

    @property
    def global_batch(self) -> int:
        """G: global positions in one step of all processes."""
        return self.shard_count * self.step_size

    @property
    def contiguous(self) -> bool:
        """Step t of all processes together is global positions ``[t*G, (t+1)*G)``."""
        return self.shard_count == 1 or self.block_size == self.step_size

    def positions(self) -> int | None:
        """This process's positions in the stream of ``total`` global ones (None: endless)."""
        return None if self.total is None else self.local_length(self.total, self.drop_remainder)

    def step_range(self, step: int) -> tuple[int, int] | None:
        """The local positions ``[start, stop)`` of step ``step`` of this process, or None if it has none.

        Example:
            >>> g = Geometry(0, 2, 4, batch_size=4, drop_last=True, total=20)
            >>> g.step_range(2), g.shard(1).step_range(2), g.shard(1).num_steps(), g.contiguous
            ((8, 12), None, 2, True)
        """
        b = self.step_size
        start, stop = step * b, (step + 1) * b
        n = self.positions()
        if n is not None:
            stop = min(stop, n)
            if stop <= start or (self.drop_last and stop - start < b):
                return None
        return start, stop

    def num_steps(self) -> int | None:
        """The number of steps of this process (None: endless)."""
        n = self.positions()
        if n is None:
            return None
        return n // self.step_size if self.drop_last else -(-n // self.step_size)

    # The state's JSON (thresher.loader.state_types.LoaderState reads and writes it through these).

    def to_json(self) -> dict[str, Any]:
        """``state['geometry']``: the six saved fields."""
        return {k: getattr(self, k) for k in _SAVED}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Geometry:
        """Parses and checks ``state['geometry']``; raises InvalidStateError naming what is wrong."""
        where = "state['geometry']"
        for k in ("shard_index", "shard_count", "block_size"):
            v = require_key(d, k, (int,), where, error=InvalidStateError)
            if not is_int(v, 0 if k == "shard_index" else 1, _MAX_GEOMETRY - 1):
                raise InvalidStateError(f"state['geometry'][{k!r}] is out of range: {v}")
        if d["shard_index"] >= d["shard_count"]:
            raise InvalidStateError(
                f"state['geometry'] has shard_index {d['shard_index']} >= shard_count "
                f"{d['shard_count']}"
            )
        aligned = require_key(d, "aligned", (bool,), where, error=InvalidStateError)
        batch_size = d.get("batch_size")
        check_int(batch_size, "state['geometry']['batch_size']", minimum=1, maximum=_MAX_GEOMETRY, optional=True,
                  error=InvalidStateError)
        if not isinstance(d.get("drop_remainder", False), bool):
            raise InvalidStateError(f"state['geometry']['drop_remainder'] must be a bool, "
                                    f"got {d['drop_remainder']!r}")
        if aligned and (batch_size is None or (d["block_size"] != batch_size and d["shard_count"] > 1)):
            raise InvalidStateError(
                f"state['geometry'] is aligned with batch_size {batch_size}, block_size {d['block_size']} and "
                f"shard_count {d['shard_count']}: an aligned geometry has a batch size, equal to the block size "
                "when there are several shards; the state was edited")
        return cls(d["shard_index"], d["shard_count"], d["block_size"], batch_size,
                   d.get("drop_remainder", False), aligned)


#: The name this type had before the state and the steps shared it (``thresher.samplers.geometry.ShardGeometry``).
ShardGeometry = Geometry
