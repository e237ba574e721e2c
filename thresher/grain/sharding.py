"""Grain's sharding names: ``ShardOptions``, ``NoSharding``, ``ShardByJaxProcess``.

They are thresher's ShardOptions with Grain's defaults. What differs from Grain: a
shard is dealt blocks of the one global stream (a fresh random 1/P of every epoch)
rather than one fixed contiguous slice of the records.

Example:
    >>> import thresher.grain as grain
    >>> grain.NoSharding().shard_count, grain.ShardOptions(1, 4).drop_remainder
    (1, False)
"""

from __future__ import annotations

from thresher.samplers.sharding import ShardByJaxProcess as _ThresherShardByJaxProcess
from thresher.samplers.sharding import ShardOptions

__all__ = ["NoSharding", "ShardByJaxProcess", "ShardOptions"]


class NoSharding(ShardOptions):
    """One shard holding the whole stream (a class, as in Grain).

    Example:
        >>> from thresher.grain import NoSharding
        >>> NoSharding()
        NoSharding()
    """

    def __init__(self) -> None:
        super().__init__(shard_index=0, shard_count=1, drop_remainder=False)

    def __repr__(self) -> str:
        return "NoSharding()"


class ShardByJaxProcess(_ThresherShardByJaxProcess):
    """The shard of ``jax.process_index()``; ``drop_remainder=False`` by default, as in Grain
    (thresher's own ShardByJaxProcess defaults to True).

    Example:
        >>> from thresher.grain import ShardByJaxProcess
        >>> ShardByJaxProcess().drop_remainder
        False
    """

    def __init__(self, drop_remainder: bool = False) -> None:
        super().__init__(drop_remainder=drop_remainder)
