"""MapWithIndexTransform: the index is the global position, for every worker and shard count."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th


def _tag(i: int, x: Any) -> tuple[int, Any]:
    return (i, x)


def _keep(pair: tuple[int, Any]) -> bool:
    return pair[1] % 3 != 1


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 30), epochs=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
       shards=st.integers(1, 3), workers=st.sampled_from([0, 2]), filtered=st.booleans())
def test_index_is_the_global_position(n: int, epochs: int, seed: int, shards: int, workers: int,
                                      filtered: bool) -> None:
    def loader(shard: th.ShardOptions, w: int) -> th.DataLoader:
        ops: list[Any] = [th.MapWithIndexTransform(_tag)] + ([th.FilterTransform(_keep)] if filtered else [])
        return th.DataLoader(th.sources.RangeDataSource(0, n),
                             th.IndexSampler(n, shuffle=True, seed=seed, num_epochs=epochs, shard_options=shard),
                             ops, worker_count=w)

    whole = list(loader(th.NoSharding(), 0))
    if not filtered:
        assert [i for i, _ in whole] == list(range(n * epochs))
    parts = [list(loader(th.ShardOptions(s, shards), workers)) for s in range(shards)]
    assert sorted(pair for part in parts for pair in part) == sorted(whole)
    for part in parts:
        assert [i for i, _ in part] == sorted(i for i, _ in part)


def test_index_with_a_filter_before_it_and_in_a_batch() -> None:
    ops = [th.FilterTransform(lambda x: x % 2 == 0), th.MapWithIndexTransform(lambda i, x: i * 100 + x), th.Batch(2)]
    loader = th.DataLoader(th.sources.RangeDataSource(0, 6), th.IndexSampler(6), ops)
    assert [b.tolist() for b in loader] == [[0, 202], [404]]
