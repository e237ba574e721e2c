"""How a process takes its part of the global stream: ShardOptions and friends.

Shards deal the global stream in blocks of ``block_size`` consecutive global
positions: block k goes to shard ``k mod shard_count``. Each shard so sees a fresh
random 1/P of every epoch. ``block_size=None`` lets the DataLoader choose (the
per-process batch size when a Batch comes before any Filter, else 1).

Example:
    >>> import thresher as th
    >>> th.ShardOptions(shard_index=1, shard_count=4, drop_remainder=True)
    ShardOptions(shard_index=1, shard_count=4, drop_remainder=True, block_size=None)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from thresher._optional import require
from thresher._validate import check_int
from thresher.errors import ConfigError, ConfigTypeError

__all__ = ["NoSharding", "ShardByJaxProcess", "ShardOptions"]


@dataclass(frozen=True)
class ShardOptions:
    """This process's shard of the global stream.

    Attributes:
        shard_index: which shard, in ``[0, shard_count)``.
        shard_count: how many shards (usually processes) share the stream.
        drop_remainder: drop the trailing partial round of blocks so that every
            shard has the same length (needed when every process must take the same
            number of steps, as in SPMD training).
        block_size: consecutive global positions dealt to one shard at a time;
            None lets the DataLoader choose.
    """

    shard_index: int
    shard_count: int
    drop_remainder: bool = False
    block_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("shard_index", "shard_count", "block_size"):
            value = check_int(getattr(self, name), f"ShardOptions.{name}", optional=name == "block_size",
                              minimum=1 if name == "block_size" else None)
            object.__setattr__(self, name, value)  # a NumPy int is stored as an int
        if self.shard_count < 1:
            raise ConfigError(f"ShardOptions.shard_count must be >= 1, got {self.shard_count}")
        if not 0 <= self.shard_index < self.shard_count:
            raise ConfigError(
                f"ShardOptions.shard_index must be in [0, {self.shard_count}), got "
                f"{self.shard_index} (shard_index >= shard_count)"
            )

    def with_block_size(self, block_size: int) -> ShardOptions:
        """A plain ShardOptions like this one with the given block size."""
        return ShardOptions(self.shard_index, self.shard_count, self.drop_remainder, block_size)

    def replace(self, **changes: object) -> ShardOptions:
        """A plain ShardOptions with some fields changed."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(ShardOptions)}
        fields.update(changes)
        return ShardOptions(**fields)

    @classmethod
    def coerce(cls, obj: Any, where: str) -> ShardOptions:
        """thresher's ShardOptions for thresher's own or anything shaped like Grain's (recognised by its
        attributes, without importing Grain).

        Example:
            >>> import thresher as th
            >>> th.ShardOptions.coerce(th.ShardOptions(1, 4), "shard_options").shard_count
            4
        """
        if isinstance(obj, cls):
            return obj
        index, count = getattr(obj, "shard_index", None), getattr(obj, "shard_count", None)
        if isinstance(index, int) and isinstance(count, int) and hasattr(obj, "drop_remainder"):
            return cls(index, count, bool(obj.drop_remainder), getattr(obj, "block_size", None))
        raise ConfigTypeError(
            f"{where} got {obj!r} ({type(obj).__module__}.{type(obj).__qualname__}), which has no "
            "shard_index/shard_count/drop_remainder: pass thresher.ShardOptions(shard_index, shard_count), "
            "thresher.NoSharding() or Grain's ShardOptions"
        )


def NoSharding() -> ShardOptions:
    """One shard holding the whole stream.

    Example:
        >>> from thresher.samplers import NoSharding
        >>> NoSharding().shard_count
        1
    """
    return ShardOptions(shard_index=0, shard_count=1, drop_remainder=False)


class ShardByJaxProcess(ShardOptions):
    """The shard of ``jax.process_index()`` among ``jax.process_count()`` processes.

    jax is imported only when this is created. Call it after
    ``jax.distributed.initialize()``.

    **``drop_remainder`` defaults to True here; Grain's ``ShardByJaxProcess``
    defaults to False.** With False, when the stream does not split evenly, some
    processes get one block more than others, so they run one step more; in a
    multi-host JAX job that step waits on a collective the other processes never
    join, and the job hangs at the end of the epoch. True drops the trailing
    partial round (at most ``shard_count * block_size - 1`` positions at the end of the
    global stream) so every process has the same number of steps. Pass
    ``drop_remainder=False`` to keep every record (``thresher.grain`` does, for
    Grain's default), e.g. for evaluation that gathers results per process.

    Example:
        >>> from thresher.samplers import ShardByJaxProcess
        >>> opts = ShardByJaxProcess(drop_remainder=True)   # doctest: +SKIP
    """

    def __init__(self, drop_remainder: bool = True, block_size: int | None = None) -> None:
        jax = require("jax", "ShardByJaxProcess")
        super().__init__(
            shard_index=jax.process_index(),
            shard_count=jax.process_count(),
            drop_remainder=drop_remainder,
            block_size=block_size,
        )

    def __repr__(self) -> str:
        return (f"ShardByJaxProcess(shard_index={self.shard_index}, shard_count={self.shard_count}, "
                f"drop_remainder={self.drop_remainder}, block_size={self.block_size})")
