"""Random pipelines for the forensics tests: elements carry their record key and a draw
from each RandomMap's generator, so what was delivered can be compared with ``explain``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

import thresher as th


def as_row(x: Any) -> np.ndarray:
    return np.array([int(x), 0], dtype=np.int64)


def double_payload(x: np.ndarray) -> np.ndarray:
    return np.array([x[0], x[1] * 2], dtype=np.int64)


def draw(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.array([x[0], x[1] + int(rng.integers(0, 2**40))], dtype=np.int64)


@dataclass(frozen=True)
class Spec:
    num_records: int
    shuffle: bool
    seed: int
    num_epochs: int | None
    shard_count: int
    random_maps: int
    extra_map: bool
    batch_size: int
    drop_remainder: bool

    def loader(self, shard_index: int = 0, worker_count: int = 0, shard_count: int | None = None,
               batch_size: int | None = None, skip_records: Any = None,
               worker_mode: str = "process") -> th.DataLoader:
        P = self.shard_count if shard_count is None else shard_count
        sampler = th.IndexSampler(self.num_records, shuffle=self.shuffle, seed=self.seed,
                                  num_epochs=self.num_epochs, shard_options=th.ShardOptions(shard_index, P))
        ops: list[Any] = [as_row]
        for _ in range(self.random_maps):
            ops.append(th.RandomMapTransform(draw))
        if self.extra_map:
            ops.append(double_payload)
        ops.append(th.Batch(self.batch_size if batch_size is None else batch_size,
                            drop_remainder=self.drop_remainder))
        return th.DataLoader(th.sources.RangeDataSource(0, self.num_records), sampler, ops,
                             worker_count=worker_count, chunk_size=self.batch_size * 3, skip_records=skip_records,
                             worker_mode=worker_mode)


specs = st.builds(Spec, num_records=st.integers(5, 60), shuffle=st.booleans(), seed=st.integers(0, 2**64 - 1),
                  num_epochs=st.sampled_from([1, 2, 3]), shard_count=st.integers(1, 3),
                  random_maps=st.integers(0, 2), extra_map=st.booleans(), batch_size=st.integers(1, 5),
                  drop_remainder=st.booleans())


class FlakySource:
    """Records 0..n-1 (the key itself); reading a key in ``bad_reads`` raises, every time."""

    def __init__(self, n: int, bad_reads: frozenset[int]) -> None:
        self.n, self.bad_reads = n, bad_reads

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: int) -> int:
        if key in self.bad_reads:
            raise OSError(f"checksum mismatch in record {key}")
        return int(key)

    def __getitems__(self, keys: list[int]) -> list[int]:
        return [self[k] for k in keys]


class FailOn:
    """A map that raises on the keys in ``bad``."""

    def __init__(self, bad: frozenset[int]) -> None:
        self.bad = bad

    def __call__(self, x: int) -> int:
        if x in self.bad:
            raise ValueError(f"cannot decode {x}")
        return x


@dataclass(frozen=True)
class BadSpec:
    num_records: int
    shuffle: bool
    seed: int
    num_epochs: int
    shard_count: int
    bad_reads: frozenset[int]
    bad_maps: frozenset[int]
    random_map: bool
    batch_size: int

    def loader(self, shard_index: int = 0, worker_count: int = 0, max_skipped: int | float | None = None,
               worker_mode: str | None = None) -> th.DataLoader:
        sampler = th.IndexSampler(self.num_records, shuffle=self.shuffle, seed=self.seed,
                                  num_epochs=self.num_epochs,
                                  shard_options=th.ShardOptions(shard_index, self.shard_count))
        ops: list[Any] = [FailOn(self.bad_maps)]
        if self.random_map:
            ops.append(th.RandomMapTransform(lambda x, rng: x + 1000 * int(rng.integers(0, 1000))))
        ops.append(th.Batch(self.batch_size))
        return th.DataLoader(FlakySource(self.num_records, self.bad_reads), sampler, ops,
                             worker_count=worker_count, chunk_size=7, errors="skip", max_skipped=max_skipped,
                             worker_mode=worker_mode)


bad_specs = st.integers(4, 40).flatmap(lambda n: st.builds(
    BadSpec, num_records=st.just(n), shuffle=st.booleans(), seed=st.integers(0, 2**64 - 1),
    num_epochs=st.integers(1, 2), shard_count=st.integers(1, 3),
    bad_reads=st.frozensets(st.integers(0, n - 1), max_size=4),
    bad_maps=st.frozensets(st.integers(0, n - 1), max_size=4), random_map=st.booleans(),
    batch_size=st.integers(1, 4)))
