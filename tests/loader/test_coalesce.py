"""Coalesced chunks (worker_count=0): the chunks, dropped records and errors of one-by-one computation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thresher as th
from tests.loader import worker_helpers as wh
from thresher.errors import TransformError
from thresher.loader.producers.coalescing import CoalescingProducer
from thresher.loader.producers.in_process import InProcessProducer


def _chunks(producer: Any) -> list[Any]:
    out = []
    while (c := producer.next_chunk()) is not None:
        out.append(c)
    producer.close()
    return out


def _assert_same_chunks(a: list[Any], b: list[Any]) -> None:
    assert [(c.start, c.stop) for c in a] == [(c.start, c.stop) for c in b]
    for x, y in zip(a, b):
        assert x.positions.tolist() == y.positions.tolist()
        assert len(x.elements) == len(y.elements)
        for e, f in zip(x.elements, y.elements):
            wh.assert_same(e, f)
        assert [d.position for d in x.dropped or []] == [d.position for d in y.dropped or []]


@given(n=st.integers(1, 200), chunk=st.integers(1, 40), start=st.integers(0, 60), seed=st.integers(0, 2**32),
       filter_=st.booleans(), shards=st.sampled_from([(0, 1), (1, 3)]))
@settings(max_examples=80, deadline=None)
def test_coalesced_chunks_are_the_chunks_of_one_by_one(records_path: str, n: int, chunk: int, start: int, seed: int,
                                                       filter_: bool, shards: tuple[int, int]) -> None:
    loader = wh.build(records_path, n=min(n, wh.N_RECORDS), shuffle=True, seed=seed, random_map=True,
                      filter=filter_, shards=shards, batch=None, num_epochs=2)
    proc = loader._processor
    stop = proc.sampler.local_length
    start = min(start, stop)
    _assert_same_chunks(_chunks(CoalescingProducer(proc, start, stop, chunk)),
                        _chunks(InProcessProducer(proc, start, stop, chunk)))


def _failing_at(label: int) -> th.DataLoader:
    source = th.sources.RangeDataSource(0, 4000)

    def boom(x: int) -> int:
        if x == label:
            raise ValueError(f"bad {x}")
        return x + 1

    return th.DataLoader(source, th.IndexSampler(4000, shuffle=True, seed=1), [boom], chunk_size=16)


@given(label=st.integers(0, 3999))
@settings(max_examples=25, deadline=None)
def test_an_error_comes_at_its_own_chunk_after_the_same_chunks(label: int) -> None:
    proc = _failing_at(label)._processor
    for make in (CoalescingProducer, InProcessProducer):
        got = []
        producer = make(proc, 0, 4000, 16)
        with pytest.raises(TransformError) as err:
            while (c := producer.next_chunk()) is not None:
                got.append(c.start)
        assert err.value.position is not None and got[-1:] < [err.value.position]
        assert err.value.position // 16 * 16 == (got[-1] + 16 if got else 0)  # raised at the failing chunk


def test_skipped_records_are_dropped_in_their_own_chunk() -> None:
    def odd_fails(x: int) -> int:
        if x % 7 == 3:
            raise ValueError(x)
        return x

    loader = th.DataLoader(th.sources.RangeDataSource(0, 3000), th.IndexSampler(3000, shuffle=True, seed=5),
                           [odd_fails], chunk_size=32, errors="skip")
    proc = loader._processor
    coalesced = _chunks(CoalescingProducer(proc, 0, 3000, 32))
    _assert_same_chunks(coalesced, _chunks(InProcessProducer(proc, 0, 3000, 32)))
    assert sum(len(c.dropped or []) for c in coalesced) == sum(1 for x in range(3000) if x % 7 == 3)


def test_cheap_chunks_are_coalesced_and_the_loader_uses_it() -> None:
    loader = th.DataLoader(th.sources.RangeDataSource(0, 100_000), th.IndexSampler(100_000, shuffle=True, seed=2),
                           [lambda x: x + 1, th.Batch(256)])
    with iter(loader) as it:
        batches = [next(it)]
        producer = it._producer
        batches += list(it)
    assert isinstance(producer, CoalescingProducer) and producer._k > 1
    ref = th.DataLoader(th.sources.RangeDataSource(0, 100_000), th.IndexSampler(100_000, shuffle=True, seed=2),
                        [lambda x: x + 1, th.Batch(256)], chunk_size=1_000_000)
    assert [b.tolist() for b in batches] == [b.tolist() for b in ref]
