"""IndexSampler: position -> RecordMetadata, a pure function, O(1) memory.

The global stream (docs/architecture.md): N records, E epochs; global position g has epoch
``g // N`` and record key ``perm_e(g % N)``. This shard's local position p lies in
block ``p // b`` of the shard, which is global block ``(p // b) * P + shard_index``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from thresher._validate import check_count, check_int
from thresher.errors import ConfigError
from thresher.randomness.permutation import Permutation
from thresher.randomness.seeds import (
    DOMAIN_BLOCKS,
    DOMAIN_PERMUTATION,
    DOMAIN_RECORD,
    check_seed,
    derive_seed,
    derive_seeds,
    mix64,
)
from thresher.samplers.block_shuffle import BlockShuffle, EpochOrder
from thresher.samplers.geometry import Geometry
from thresher.samplers.sharding import NoSharding, ShardOptions

__all__ = ["IndexSampler", "RecordMetadata"]


@dataclass(frozen=True)
class RecordMetadata:
    """Where one element of this process's stream comes from.

    Attributes:
        position: the local position in this process's stream (the iterator state).
        global_position: the position in the job's global stream.
        record_key: the source key to read.
        epoch: ``global_position // num_records``.
        rng_seed: the 64-bit seed of this record's randomness (RandomMap).
    """

    position: int
    global_position: int
    record_key: int
    epoch: int
    rng_seed: int

    @property
    def index(self) -> int:
        """Grain's name for the global position (its sampler's index)."""
        return self.global_position

    @property
    def rng(self) -> np.random.Generator:
        """Grain's per-record generator: a NumPy Generator (Philox) seeded with ``rng_seed``, new on
        each access. A RandomMapTransform in a thresher pipeline gets its own generator, seeded from
        the same ``rng_seed`` but not this object.

        Example:
            >>> import thresher as th
            >>> m = th.IndexSampler(4, shuffle=True, seed=0)[1]
            >>> float(m.rng.random()) == float(m.rng.random())
            True
        """
        return np.random.Generator(np.random.Philox(self.rng_seed))


class IndexSampler:
    """Maps positions of this process's stream to records, shuffled per epoch.

    Args:
        num_records: N, the number of records in the source.
        shuffle: True: shuffle each epoch with a keyed bijection (O(1) memory); a
            :class:`BlockShuffle`: shuffle blocks, then records within windows of blocks
            (locality for chunked and remote sources; see its docstring); False: in order.
        seed: the job's seed, an int in [0, 2**64); required with ``shuffle``. It also
            seeds RandomMap operations (0 when None).
        num_epochs: E, or None to repeat forever.
        shard_options: this process's shard; ``NoSharding()`` by default. With a
            BlockShuffle and several shards, a ``block_size`` left unset deals the stream
            in whole windows (``BlockShuffle.window_records``), so no two shards read the
            same block in an epoch (the global batch then depends on the shard count).

    Unlike Grain's IndexSampler, epochs are keyed by hashing (seed, epoch), so seed 0
    at epoch 1 never equals seed 1 at epoch 0, and each shard sees a random 1/P of
    every epoch rather than one fixed slice.

    Example:
        >>> import thresher as th
        >>> s = th.IndexSampler(10, shuffle=True, seed=42, num_epochs=2)
        >>> len(s)
        20
        >>> m = s[0]
        >>> m.position, m.epoch, 0 <= m.record_key < 10
        (0, 0, True)
        >>> sorted(s[p].record_key for p in range(10)) == list(range(10))
        True
    """

    def __init__(
        self,
        num_records: int,
        *,
        shuffle: bool | BlockShuffle = False,
        seed: int | None = None,
        num_epochs: int | None = 1,
        shard_options: ShardOptions | None = None,
    ) -> None:
        num_records = check_count(num_records, "num_records", minimum=0)
        num_epochs = check_int(num_epochs, "num_epochs", minimum=1, optional=True, also="None (forever)")
        if num_epochs is None and num_records == 0:
            raise ConfigError("num_epochs=None (repeat forever) needs num_records > 0; the source is empty")
        if shuffle and seed is None:
            raise ConfigError("shuffle=True needs a seed (an int): thresher's shuffles are reproducible")
        if shard_options is None:
            shard_options = NoSharding()
        shard_options = ShardOptions.coerce(shard_options, "IndexSampler shard_options")  # Grain's too
        if isinstance(shuffle, dict):  # a stream config's shuffle (forensics rebuilds samplers from states)
            shuffle = BlockShuffle.from_config(shuffle)
        #: The BlockShuffle, or None for a full shuffle or none.
        self.block_shuffle = shuffle if isinstance(shuffle, BlockShuffle) else None
        if self.block_shuffle is not None:
            self.block_shuffle.check(int(num_records))
            if shard_options.block_size is None and shard_options.shard_count > 1:
                shard_options = shard_options.with_block_size(self.block_shuffle.window_records)
        self.num_records = int(num_records)
        self.shuffle = bool(shuffle)
        self.seed = None if seed is None else check_seed(seed)
        self.num_epochs = None if num_epochs is None else int(num_epochs)
        self.shard_options = shard_options
        self._rng_prefix = derive_seed(self.seed or 0, DOMAIN_RECORD)
        self._perms: dict[int, Permutation] = {}
        self._orders: dict[int, EpochOrder] = {}
        self.geometry = Geometry(shard_options.shard_index, shard_options.shard_count,
                                 shard_options.block_size or 1, drop_remainder=shard_options.drop_remainder)

    # -- geometry -------------------------------------------------------------------
    @property
    def shard_index(self) -> int:
        return self.shard_options.shard_index

    @property
    def shard_count(self) -> int:
        return self.shard_options.shard_count

    @property
    def block_size(self) -> int:
        """The effective block size (1 when the shard options leave it to the loader)."""
        return self.shard_options.block_size or 1

    @property
    def global_length(self) -> int | None:
        """E * N, or None for an endless stream."""
        return None if self.num_epochs is None else self.num_epochs * self.num_records

    def with_shard_options(self, shard_options: ShardOptions) -> IndexSampler:
        """The same global stream, another part of it."""
        return IndexSampler(self.num_records, shuffle=self.block_shuffle or self.shuffle, seed=self.seed,
                            num_epochs=self.num_epochs, shard_options=shard_options)

    def with_block_size(self, block_size: int) -> IndexSampler:
        """The same sampler with the given block size."""
        return self.with_shard_options(self.shard_options.with_block_size(block_size))

    def __len__(self) -> int:
        n = self.local_length
        if n is None:
            raise TypeError("this IndexSampler repeats forever (num_epochs=None): it has no len()")
        return n

    @property
    def local_length(self) -> int | None:
        """This shard's number of positions, or None for an endless stream."""
        total = self.global_length
        if total is None:
            return None
        return self.geometry.local_length(total, self.shard_options.drop_remainder)

    # -- the mapping ----------------------------------------------------------------
    def to_global(self, positions: np.ndarray) -> np.ndarray:
        """Local positions -> global positions (int64 array)."""
        return self.geometry.to_global_array(positions)

    def permutation(self, epoch: int) -> Permutation:
        """The permutation of epoch ``epoch`` (cached for the last few epochs)."""
        perm = self._perms.get(epoch)
        if perm is None:
            if len(self._perms) > 4:
                self._perms.clear()
            key = derive_seed(self.seed or 0, DOMAIN_PERMUTATION, epoch)
            perm = self._perms[epoch] = Permutation(self.num_records, key)
        return perm

    def epoch_order(self, epoch: int) -> EpochOrder:
        """The BlockShuffle order of epoch ``epoch`` (cached for the last few epochs).

        Example:
            >>> import thresher as th
            >>> s = th.IndexSampler(64, shuffle=th.BlockShuffle(block_size=4, window_blocks=2), seed=0)
            >>> blocks = s.epoch_order(0).window_blocks(0)       # the 2 blocks window 0 reads
            >>> all(any(a <= s[p].record_key < b for a, b in blocks) for p in range(8))
            True
        """
        if self.block_shuffle is None:
            raise ConfigError("epoch_order() needs shuffle=BlockShuffle(...)")
        order = self._orders.get(epoch)
        if order is None:
            if len(self._orders) > 4:
                self._orders.clear()
            key = derive_seed(self.seed or 0, DOMAIN_BLOCKS, epoch)
            order = self._orders[epoch] = EpochOrder(self.num_records, self.block_shuffle, key)
        return order

    def _epoch_keys(self, epoch: int, index: np.ndarray) -> np.ndarray:
        """Indices of epoch ``epoch`` -> record keys (int64); IndexError outside [0, N)."""
        if self.block_shuffle is not None:
            return self.epoch_order(epoch).keys(index)
        return self.permutation(epoch).keys(index)

    def _keys_in_first_epoch(self, g: np.ndarray) -> tuple[np.ndarray, int] | None:
        """The shuffled keys of ``g`` and their epoch when all are in the epoch of the first, else None."""
        n = self.num_records
        e0 = int(g[0]) // n
        try:  # the common case: no divmod
            return self._epoch_keys(e0, g - e0 * n if e0 else g), e0
        except IndexError:  # positions of several epochs
            return None

    def keys(self, global_positions: np.ndarray) -> np.ndarray:
        """Global positions -> record keys (int64): ``record_keys`` without the epochs.

        Example:
            >>> import numpy as np, thresher as th
            >>> s = th.IndexSampler(10, shuffle=True, seed=3, num_epochs=3)
            >>> g = np.arange(8, 13)
            >>> s.keys(g).tolist() == s.record_keys(g)[0].tolist() == [s[p].record_key for p in range(8, 13)]
            True
        """
        g = np.asarray(global_positions, dtype=np.int64)
        if not g.size:
            return g
        if not self.shuffle:
            return g % self.num_records
        one = self._keys_in_first_epoch(g)
        return one[0] if one is not None else self.record_keys(g)[0]

    def record_keys(self, global_positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global positions -> (record keys, epochs), both int64 arrays."""
        g = np.asarray(global_positions, dtype=np.int64)
        n = self.num_records
        if self.shuffle and g.size:
            one = self._keys_in_first_epoch(g)
            if one is not None:
                return one[0], np.full(g.shape, one[1], dtype=np.int64)
        epochs, index = np.divmod(g, n)
        if not self.shuffle or g.size == 0:
            return index, epochs
        keys = np.empty_like(index)
        for e in np.unique(epochs).tolist():
            where = epochs == e
            keys[where] = self._epoch_keys(e, index[where])
        return keys, epochs

    def rng_seeds(self, global_positions: np.ndarray) -> np.ndarray:
        """The per-record 64-bit seeds of these global positions (uint64 array)."""
        return derive_seeds(self._rng_prefix, np.asarray(global_positions, dtype=np.int64).astype(np.uint64))

    def check_positions(self, start: int, stop: int) -> None:
        """Raises IndexError unless [start, stop) are valid positions."""
        n = self.local_length
        if start < 0 or (n is not None and stop > n):
            raise IndexError(f"positions [{start}, {stop}) are outside this sampler's [0, {n})")

    def __getitem__(self, position: int) -> RecordMetadata:
        """One position's metadata, computed in plain Python integers (a few microseconds).

        The loader itself uses the vectorised ``to_global``/``record_keys``/``rng_seeds``;
        both paths give identical results (tested).
        """
        p = int(position)
        self.check_positions(p, p + 1)
        g = self.geometry.to_global(p)
        epoch, index = divmod(g, self.num_records)
        if self.block_shuffle is not None:
            key = int(self.epoch_order(epoch).keys(np.array([index], dtype=np.int64))[0])
        else:
            key = self.permutation(epoch).at(index) if self.shuffle else index
        return RecordMetadata(p, g, key, epoch, mix64(g ^ self._rng_prefix))

    # -- identity ---------------------------------------------------------------------
    def stream_config(self) -> dict[str, Any]:
        """What defines the global stream (for state fingerprints)."""
        shuffle: Any = self.block_shuffle.config() if self.block_shuffle is not None else self.shuffle
        return {"num_records": self.num_records, "shuffle": shuffle, "seed": self.seed,
                "num_epochs": self.num_epochs}

    def __repr__(self) -> str:
        return (f"IndexSampler(num_records={self.num_records}, shuffle={self.block_shuffle or self.shuffle}, "
                f"seed={self.seed}, "
                f"num_epochs={self.num_epochs}, shard_options={self.shard_options!r})")
